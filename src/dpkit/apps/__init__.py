"""dpkit.apps — the survey's applications, each built on the layers above.

Contents
--------
dpkit.apps.holdout    ReusableHoldout: Thresholdout (Dwork et al. 2015) on the sparse vector
dpkit.apps.auction    digital-goods auction by the exponential mechanism (McSherry & Talwar 2007)
dpkit.apps.topk       top-k over an unknown domain with user-level contribution bounds
"""
