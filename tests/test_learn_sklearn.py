"""scikit-learn's estimator conformance battery (``parametrize_with_checks``) on every
dpkit.learn model. The checks a DP model cannot pass are declared expected failures, each
with its reason; every other check must pass (fresh noise in every fit, so a check that
compares two fits, or an accuracy threshold on a few dozen rows, is never among those).
"""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("sklearn")

from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from dpkit.learn import (  # noqa: E402
    PCA,
    DecisionTreeClassifier,
    GaussianNB,
    KMeans,
    LinearRegression,
    LinearSVC,
    LogisticRegression,
    RandomForestClassifier,
    SmoothRandomForestClassifier,
    StandardScaler,
)

FRESH_NOISE = ("every fit draws fresh noise (a DP fit is randomised), so two fits, or a fit "
               "and a fit_transform, differ")
DECLARED_LABELS = ("labels are declared (classes=...), never read off the data: the check's "
                   "labels are not among them")
EMPTY_OK = ("an empty dataset is a valid DP input: refusing it would disclose n = 0")
NOISY_SCORE = ("the check wants near non-private accuracy on a few dozen rows; at any fixed "
               "ε the noise there is of the order of the counts")
ONE_LABEL = ("with one label in ten rows the other declared labels' statistics are pure "
             "noise (here means drawn across ±100), so about 3% of fits predict one of them")
BINARY_ONLY = ("the check fits three labels whatever the binary-only tag says; logistic "
               "regression declares two")

COMMON = {
    "check_fit_idempotent": FRESH_NOISE,
    "check_estimators_empty_data_messages": EMPTY_OK,
}
CLASSIFIER = {
    **COMMON,
    "check_classifier_data_not_an_array": FRESH_NOISE,
    "check_classifiers_train": NOISY_SCORE,
    "check_classifiers_classes": DECLARED_LABELS,
    "check_dtype_object": DECLARED_LABELS,
    "check_supervised_y_2d": FRESH_NOISE,
}
REGRESSOR = {
    **COMMON,
    "check_regressors_train": NOISY_SCORE,
    "check_regressor_data_not_an_array": FRESH_NOISE,
    "check_regressors_int": FRESH_NOISE,
    "check_supervised_y_2d": FRESH_NOISE,
}
TRANSFORMER = {
    **COMMON,
    "check_pipeline_consistency": FRESH_NOISE,
    "check_transformer_data_not_an_array": FRESH_NOISE,
    "check_transformer_general": FRESH_NOISE,
}

MODELS = [
    (GaussianNB(epsilon=10, bounds=(-100, 100), classes=[0, 1, 2]), {
        **CLASSIFIER, "check_classifiers_one_label": ONE_LABEL}),
    (LogisticRegression(epsilon=10, bounds=(-100, 100), classes=[0, 1]), {
        **CLASSIFIER,
        "check_estimators_dtypes": BINARY_ONLY, "check_fit2d_1feature": BINARY_ONLY}),
    (RandomForestClassifier(epsilon=10, bounds=(-100, 100), classes=[0, 1, 2]), CLASSIFIER),
    (SmoothRandomForestClassifier(epsilon=10, bounds=(-100, 100), classes=[0, 1, 2]), CLASSIFIER),
    (DecisionTreeClassifier(epsilon=10, bounds=(-100, 100), classes=[0, 1, 2]), CLASSIFIER),
    (LinearRegression(epsilon=10, bounds=(-100, 100), y_bounds=(-100, 100)), REGRESSOR),
    (LinearSVC(epsilon=10, delta=1e-6, bounds=(-100, 100), classes=[0, 1]), {
        **CLASSIFIER,
        "check_estimators_dtypes": BINARY_ONLY, "check_fit2d_1feature": BINARY_ONLY}),
    (StandardScaler(epsilon=10, bounds=(-100, 100)), {
        **TRANSFORMER,
        "check_estimator_sparse_array": "scikit-learn sets with_mean=False on any estimator "
                                        "named StandardScaler; dpkit's has no such parameter",
        "check_estimator_sparse_matrix": "as check_estimator_sparse_array"}),
    (PCA(2, 10, 1e-6, bounds=(-100, 100)), TRANSFORMER),
    (KMeans(3, 10, bounds=(-100, 100)), {
        **COMMON,
        "check_clustering": "the check wants the non-private clustering's labels on 100 rows"}),
]
EXPECTED = {type(model).__name__: failures for model, failures in MODELS}


@parametrize_with_checks([model for model, _ in MODELS],
                         expected_failed_checks=lambda est: EXPECTED[type(est).__name__])
def test_sklearn_conformance(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check(estimator)
