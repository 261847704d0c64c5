"""dpkit.apps — the survey's applications (Xiong, Zhu & Wang 2014, §5), each on the layers
above it: one accountant for the debit, :func:`dpkit.mechanisms.make_noise` /
:func:`~dpkit.mechanisms.make_selection` for the noise.

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
