"""dpkit.apps — the survey's applications, each built on the layers above.

Contents
--------
dpkit.apps.holdout    ReusableHoldout: Thresholdout (Dwork et al. 2015) on the sparse vector
dpkit.apps.auction    digital_goods_auction: one price by the exponential mechanism on revenue
                      (McSherry & Talwar 2007), approximately truthful
dpkit.apps.topk       top_k_unknown_domain / top_k_query: top-k items over an unknown domain
                      with user-level contribution bounds (Korolova et al. 2009)
dpkit.apps.posterior  one_posterior_sample: Beta–Bernoulli OPS, exact on a θ grid
                      (Dimitrakakis et al. 2014; Wang, Fienberg & Smola 2015)
dpkit.apps.network    McSherry & Mahajan 2010's trace analyses as Session queries
"""
