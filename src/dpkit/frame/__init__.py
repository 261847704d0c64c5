"""dpkit.frame — interface mode: analysts query private tables through a budget.

Contents
--------
Session       private data + privacy unit + budget (+ ledger); ``release(plan)`` → Release;
              ``sql(text)`` / ``sql_plan`` / ``sql_explain``: SQL (:mod:`dpkit.frame.sql`)
Query         immutable lazy query: filter, with_columns, select, clamp, bin, map, fill_null,
              drop_nulls, join (public or private), partition, group_by(keys | selection),
              agg, explain, calibrate, plan, release
Plan          a checked, calibrated release: statistics, loss, noise rows, description
KeySet        public group keys: values, cross products, keys from a public table
PrivacyUnit   rows() or by(column, max_rows) with contribution bounding
register_query_namespace
              class decorator: ``query.<name>`` for packages below frame (``dpkit.release``
              registers ``query.publish``: histogram, pmw)
count, count_distinct, sum, mean, variance, std, histogram, quantile, median, min, max
              aggregations
tune, BoundsRecommendation
              private contribution-bound and bound tuning (``Session.recommend_bounds``)
"""

from dpkit.frame.aggregates import (
    count,
    count_distinct,
    histogram,
    max,
    mean,
    median,
    min,
    quantile,
    std,
    sum,
    variance,
)
from dpkit.frame.namespace import provide_query_namespace, register_query_namespace
from dpkit.frame.privacy_unit import PrivacyUnit
from dpkit.frame.query import KeySet, Plan, Query
from dpkit.frame.schema import Categorical, Numeric, Schema, SchemaError, Text
from dpkit.frame.session import Session
from dpkit.frame.tuning import BoundsRecommendation, tune

__all__ = ["Session", "Query", "Plan", "KeySet", "PrivacyUnit", "Schema", "Numeric",
           "Categorical", "Text", "SchemaError", "count", "count_distinct", "sum",
           "mean", "variance", "std", "histogram", "quantile", "median", "min", "max",
           "register_query_namespace", "provide_query_namespace", "tune",
           "BoundsRecommendation"]
