"""Input checks shared by every dpkit.learn model, through scikit-learn's validators so that
the models pass its conformance battery wherever differential privacy allows
(tests/test_learn_sklearn.py lists the checks they fail on purpose, and why).

Rules: features are a dense 2-D float array with at least one column (an empty dataset is
a valid input: refusing it would disclose n = 0); NaN and ±inf are refused in fit and in
predict (a NaN would pass ``np.clip`` and turn a released sum into NaN — a disclosure — so
it is an error, raised before any budget is spent);
labels must be a classification target and among the *declared* classes (a label read off
the data would disclose it); a model predicts only after a successful fit, on as many
features as it was fitted with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_array, check_is_fitted, check_X_y, validate_data

from dpkit.errors import DomainError

__all__ = ["ArrayLike", "fit_features", "fit_labelled", "fit_regression", "predict_features",
           "declared_labels"]

#: What a model's ``X`` and ``y`` accept: anything NumPy converts to an array (nested
#: sequences, NumPy arrays, and objects with ``__array__``: pandas and Polars frames and
#: series), exactly what scikit-learn's validators take. NumPy's own alias, not a union of
#: frame types: the validators convert through ``numpy.asarray`` whatever the engine, and
#: learn imports no dataframe library.
ArrayLike: TypeAlias = npt.ArrayLike

T = TypeVar("T")


def _typed(check: Callable[[], T]) -> T:
    """scikit-learn's ValueError re-raised as dpkit's DomainError (a ValueError too), with
    scikit-learn's message."""
    try:
        return check()
    except DomainError:
        raise
    except ValueError as exc:
        raise DomainError(str(exc)) from exc


def fit_features(X: ArrayLike) -> np.ndarray:
    """X for an unsupervised fit: (n_samples, n_features) float64, finite (no rows is a
    valid dataset)."""
    return np.array(_typed(lambda: check_array(X, dtype=np.float64, ensure_min_samples=0)),
                    dtype=np.float64)


def fit_regression(X: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """X and a numeric y (one value per row; a column vector is flattened with a warning)."""
    x, t = _typed(lambda: check_X_y(X, y, dtype=np.float64, y_numeric=True,
                                    ensure_min_samples=0))
    return np.array(x, dtype=np.float64), np.asarray(t, dtype=np.float64)


def fit_labelled(X: ArrayLike, y: ArrayLike, classes: Any
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X, the declared classes as an array, and each row's label as an index into them.

    Raises
    ------
    DomainError
        No declared classes, repeated classes, or a label outside them.
        Bad X, a missing or continuous y (scikit-learn's messages; DomainError is a
        ValueError).
    """
    x, labels = _typed(lambda: check_X_y(X, y, dtype=np.float64, ensure_min_samples=0))
    _typed(lambda: check_classification_targets(labels))
    declared, index = declared_labels(classes, labels)
    return np.array(x, dtype=np.float64), declared, index


def fit_binary(X: ArrayLike, y: ArrayLike, classes: Any
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`fit_labelled` for a binary classifier: exactly two declared classes and a
    target scikit-learn does not call multiclass.

    Raises
    ------
    DomainError
        Not two declared classes, a multiclass target, or :func:`fit_labelled`'s errors.
    """
    if classes is None or len(classes) != 2:
        raise DomainError("declare the two class labels: classes=[negative, positive]")
    kind = type_of_target(y, input_name="y") if y is not None else "binary"
    if kind == "multiclass":
        raise DomainError(f"Only binary classification is supported. The type of the "
                          f"target is {kind}.")
    return fit_labelled(X, y, classes)


def declared_labels(classes: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    """The declared classes (array) and ``labels`` as indices into them (int64)."""
    if classes is None:
        raise DomainError("declare the class labels: classes=[...]; dpkit never reads them "
                          "off the data")
    declared = np.asarray(classes)
    if declared.ndim != 1 or declared.size == 0 or len(set(declared.tolist())) != declared.size:
        raise DomainError("classes must be a non-empty list of distinct labels")
    index = {c: i for i, c in enumerate(declared.tolist())}
    flat = np.asarray(labels).ravel()
    try:  # map the few distinct labels, not every row
        distinct, inverse = np.unique(flat, return_inverse=True)
    except TypeError:  # unorderable mixed labels
        distinct = np.asarray(list(dict.fromkeys(flat.tolist())), dtype=object)
        inverse = np.fromiter((list(distinct).index(v) for v in flat.tolist()), np.int64)
    position = np.array([index.get(v, -1) for v in distinct.tolist()], dtype=np.int64)
    if np.any(position < 0):
        bad = distinct.tolist()[int(np.flatnonzero(position < 0)[0])]
        raise DomainError(f"label {bad!r} is not among the declared classes")
    return declared, position[inverse.ravel()].astype(np.int64)


def predict_features(model: Any, X: ArrayLike) -> np.ndarray:
    """X for predict/transform: the model is fitted and X has its number of features.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        Before a successful fit.
    DomainError
        Bad X or another number of features (scikit-learn's message).
    """
    check_is_fitted(model, "n_features_in_")  # set only by a fit that completed
    return np.array(_typed(lambda: validate_data(model, X, dtype=np.float64, reset=False,
                                                 ensure_min_samples=0)), dtype=np.float64)
