"""dpkit.frame — interface mode: analysts query private tables through a budget.

Contents
--------
Session       private data + privacy unit + budget (+ ledger)
Query         immutable lazy query: filter, with_columns, select, group_by(keys), agg, release
PrivacyUnit   rows() or by(column, max_rows) with contribution bounding
count, sum, mean, histogram, quantile   aggregations
"""

from dpkit.frame.aggregates import count, histogram, mean, quantile, sum
from dpkit.frame.privacy_unit import PrivacyUnit
from dpkit.frame.query import Query
from dpkit.frame.session import Session

__all__ = ["Session", "Query", "PrivacyUnit", "count", "sum", "mean", "histogram", "quantile"]
