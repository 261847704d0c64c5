"""dpkit.apps — the survey's applications (Xiong, Zhu & Wang 2014, §5), each on the layers
above it, on the front-end kit (:mod:`dpkit.mechanisms.frontend`): one ``charge`` for the
debit, noise from :func:`dpkit.mechanisms.make_noise` / :func:`~dpkit.mechanisms.make_selection`
drawn through their measurements, noise rows from ``row_of``.

Contents
--------
recommend   McSherry & Mironov 2009: private item–item covariance, item kNN and a low-rank
            factorisation on it (privacy unit: a user)
graph       social graphs (privacy unit: an edge or a node): edge count, degree distribution
            (Hay et al. 2009 constrained inference; Day, Li & Lyu 2016 projection), triangle
            and k-star counts by smooth sensitivity (NRS07, Karwa et al. 2011), common-neighbour
            recommendation by the exponential mechanism (Machanavajjhala et al. 2011)
sequence    the noisy prefix tree of Chen, Fung, Desai & Sossou (KDD 2012) with consistency
            and synthetic sequences; the n-gram model of Chen, Ács & Castelluccia (CCS 2012)
            (privacy unit: a sequence)
holdout     ReusableHoldout: Thresholdout (Dwork et al. 2015) on the sparse vector
auction     digital_goods_auction: one price by the exponential mechanism on revenue
            (McSherry & Talwar 2007), approximately truthful
topk        top_k_unknown_domain / top_k_query: top-k items over an unknown domain with
            user-level contribution bounds (Korolova et al. 2009)
posterior   one_posterior_sample / one_posterior_sample_categorical: one posterior sample
            for Beta–Bernoulli and Dirichlet–categorical, exact on a public θ grid
            (Dimitrakakis et al. 2014; Wang, Fienberg & Smola 2015)
network     McSherry & Mahajan 2010's trace analyses as Session queries
equilibrium private_equilibrium: a jointly DP mediator for a parallel-links congestion game
            (Kearns, Pai, Roth & Ullman 2014; Rogers & Roth 2014): noisy type histogram,
            Wardrop split, suggestions by the Billboard Lemma; approximately truthful
mobility    MobilityReport: Google-style mobility reports (Aktay et al. 2020), per-day,
            per-category counts with user-level bounds on one ContinualRelease, exact-law
            error bars, suppression, percent change from a weekday baseline
correlated  markov_quilt_release / quilt_scale: ε-Pufferfish for a Markov-chain series by
            the Markov quilt mechanism (Song, Wang & Chaudhuri 2017, MQMExact, MQMApprox)
"""

from dpkit.apps.graph import (
    DegreeHistogram,
    degree_histogram,
    edge_count,
    kstar_count,
    recommend_node,
    triangle_count,
)
from dpkit.apps.recommend import Recommender, fit_recommender, nonprivate_recommender
from dpkit.apps.sequence import NGramModel, PrefixTree, ngram_model, prefix_tree

__all__ = ["Recommender", "fit_recommender", "nonprivate_recommender", "DegreeHistogram",
           "degree_histogram", "edge_count", "kstar_count", "triangle_count", "PrefixTree",
           "prefix_tree", "recommend_node", "NGramModel", "ngram_model"]
