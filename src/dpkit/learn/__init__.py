"""Private data mining, scikit-learn compatible, on exact noise.

Every model takes ``epsilon`` (nats) and an optional ``accountant`` — a
:class:`~dpkit.core.compose.PrivacyFilter` or a :class:`~dpkit.frame.Session`, debited
before any statistic is computed — and declared bounds or norms: ``fit`` raises without
them, never reading them off the data.

- :class:`GaussianNB`, :class:`CategoricalNB` (noisy sufficient statistics; Vaidya et al.
  2013)
- :class:`LogisticRegression` (output perturbation, Chaudhuri, Monteleoni & Sarwate 2011;
  the functional mechanism, Zhang et al. 2012, with declared one-hot groups)
- :class:`KMeans` (SuLQ k-means with Dwork 2011's budget schedules, Su et al. 2016's grid
  start; sample-and-aggregate, Nissim, Raskhodnikova & Smith 2007)
- :class:`PCA` (Analyze Gauss, Dwork, Talwar, Thakurta & Zhang 2014; (ε, δ) via zCDP; the
  Wishart mechanism is refused: its pure-DP claim does not hold, see decomposition)
- :class:`StandardScaler` (ε-DP means and variances)
- :func:`private_bounds` (ε-DP per-feature bounds from a log-scale histogram, for ``bounds=``)
- :class:`LinearRegression` (sufficient statistics / functional mechanism, Zhang et al. 2012;
  approximate minima perturbation on Huber's loss, Iyengar et al. 2019, ``method="amp"``)
- :class:`LinearSVC` (approximate minima perturbation on the Huber hinge, Iyengar et al.
  2019 Alg. 1; Chaudhuri, Monteleoni & Sarwate 2011 §3.4.2); ``LogisticRegression`` has it
  as ``method="amp"``
- :class:`RandomForestClassifier` (random decision trees, Jagannathan et al. 2009)
- :class:`SmoothRandomForestClassifier` (random trees on disjoint rows, leaf labels by the
  exponential mechanism: class counts, or the mode with its smooth sensitivity, Fletcher &
  Islam 2017)
- :class:`PrivateLearner` (the generic private learner: the exponential mechanism over a
  declared finite class — thresholds, intervals, conjunctions, stumps — scored by
  −mistakes, with its sample-complexity bound; Kasiviswanathan et al. 2011 Thm 3.4)
- :class:`DecisionTreeClassifier` (DiffP-ID3/C4.5, Friedman & Schuster 2010; SuLQ ID3)
- :func:`frequent_itemsets` (top-k frequent itemsets on sparse transactions; ``method``
  "smarttrunc" by default, :mod:`dpkit.learn.smarttrunc`, truncation after Zeng, Naughton &
  Cai 2012; "privbasis", :mod:`dpkit.learn.privbasis`, Li, Qardaji, Su & Cao 2012; "tf",
  :func:`top_k_itemsets`, Bhaskar et al. 2010) and :class:`FrequentItemsets`

Inputs are checked by scikit-learn's validators (:mod:`dpkit.learn._validation`): finite
dense features, declared labels; tests/test_learn_sklearn.py runs scikit-learn's
conformance battery on every model and lists the checks a randomised fit cannot pass.
"""

import importlib.util

if importlib.util.find_spec("sklearn") is None:  # the extra's hint, not a bare sklearn error
    raise ModuleNotFoundError("dpkit.learn needs scikit-learn: pip install 'dpkit[learn]'",
                              name="sklearn")

from dpkit.learn.bounds import private_bounds  # noqa: E402
from dpkit.learn.cluster import KMeans  # noqa: E402
from dpkit.learn.decision_tree import DecisionTreeClassifier  # noqa: E402
from dpkit.learn.decomposition import PCA  # noqa: E402
from dpkit.learn.forest import SmoothRandomForestClassifier  # noqa: E402
from dpkit.learn.hypothesis import PrivateLearner  # noqa: E402
from dpkit.learn.itemsets import FrequentItemsets, top_k_itemsets  # noqa: E402
from dpkit.learn.linear import LinearRegression  # noqa: E402
from dpkit.learn.logistic import LogisticRegression  # noqa: E402
from dpkit.learn.naive_bayes import CategoricalNB, GaussianNB  # noqa: E402
from dpkit.learn.preprocessing import StandardScaler  # noqa: E402
from dpkit.learn.smarttrunc import frequent_itemsets  # noqa: E402
from dpkit.learn.svm import LinearSVC  # noqa: E402
from dpkit.learn.tree import RandomForestClassifier  # noqa: E402

__all__ = ["CategoricalNB", "DecisionTreeClassifier", "FrequentItemsets", "GaussianNB",
           "KMeans", "LinearRegression", "LinearSVC", "LogisticRegression", "PCA",
           "PrivateLearner", "RandomForestClassifier", "SmoothRandomForestClassifier",
           "StandardScaler", "frequent_itemsets", "private_bounds", "top_k_itemsets"]
