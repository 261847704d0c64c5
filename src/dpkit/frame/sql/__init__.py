"""SQL, compiled to the one query language: ``session.sql("SELECT sex, AVG(age) FROM adult
GROUP BY sex", epsilon=1)``.

SQL is a front end of the builder, not a second engine. The text is parsed by sqlglot
(``sqlglot.parse_one(text, read=dialect)``; dialects :data:`DIALECTS`: DuckDB, the default,
PostgreSQL, Spark SQL and BigQuery — the common spellings each of them reads), and the tree is
translated **by allow-list** into a :class:`~dpkit.frame.Query` of the registry
(:mod:`dpkit.frame.language`): row-wise SQL becomes the grammar's expressions (``filter``,
``with_columns``), ``GROUP BY`` becomes ``group_by`` over declared keys (or a private
partition selection when the caller passes ``selection=``), each aggregate an aggregation of
:mod:`dpkit.frame.aggregates` with the declared bounds (:meth:`Session.declared
<dpkit.frame.Session.declared>`). The release then goes the one road: the same plan-time
checks, dry run, debit and record as :meth:`Query.release <dpkit.frame.Query.release>`.
``HAVING``, ``ORDER BY`` and ``LIMIT`` are post-processing of the noisy result (they cost no
privacy; the plan's description says so).

Everything outside :data:`SUPPORTED` is refused while translating — before any data is read or
budget spent — with a :class:`SQLError` naming the line, column and fragment: subqueries that
aggregate, window functions, set operations, joins of private tables, non-deterministic and
unknown functions. Text longer than :data:`MAX_SQL_BYTES` is refused before parsing.

Decisions, and why:

- **Bounds of an expression** (``AVG(age * 2)``): the aggregate reads a ``with_columns`` column
  whose bounds follow from the declared bounds by interval arithmetic (``+ - *``, division by a
  non-zero literal, ``CASE`` as the hull of its values, a condition as [0, 1], ``LEAST`` /
  ``GREATEST`` as the hull of their arguments narrowed by their literals, so that
  ``LEAST(GREATEST(x, 0), 100)`` declares [0, 100] in the statement as ``bounds=`` does in
  Python); otherwise the statement is refused, naming the declaration that is missing.
  Interval arithmetic keeps "declared, never inferred" (DESIGN.md §3.4): the bounds are a
  function of declared facts. The aggregation clamps to those bounds, so the guarantee holds
  whatever the data hold.
- **``VAR_SAMP`` / ``VARIANCE`` / ``STDDEV``** release :func:`dpkit.variance` / ``std``, the
  population form (S₂/N − (S₁/N)²): the sample form's N/(N − 1) would need the noisy count,
  which the release does not return; the two differ by O(1/N).
- **``COUNT(col)``** is the sum of ``col IS NOT NULL`` over [0, 1] (the count's sensitivity).
- **``/``** is real division (DuckDB's), null on a zero divisor.
- **Budget split**: the ``split=`` option, in the order of the aggregates in ``SELECT``.
- **Table names**: the session's table names; a session opened on one unnamed table (named
  ``data``) answers to any single table name.
- **A public table** (``public={"regions": frame}``) is public: the keys of a ``GROUP BY`` on
  one of its columns are its distinct values, its numeric columns' bounds its minimum and
  maximum.
- **``LEAST`` / ``GREATEST``** ignore nulls (PostgreSQL, DuckDB, Spark); BigQuery's, which
  return null on a null argument, are refused rather than answered differently.
- **``TABLESAMPLE BERNOULLI (p PERCENT)``** is ``Query.sample(p/100)``: Poisson sampling of
  the *privacy units* (a kept unit keeps all its rows), not of rows, because amplification is
  a statement about one unit: a unit whose rows entered the sample independently would be
  seen with probability up to 1 − (1 − p)^M, not p. The release is charged
  ln(1 + p(e^ε − 1)) (Balle, Barthe & Gaboardi 2018, Thm 8). The percent is a number literal
  in (0, 100]. Refused, each with its reason: ``REPEATABLE (seed)`` (every sample is drawn
  afresh from the CSPRNG), ``SYSTEM`` and a method-less percent (DuckDB reads it as SYSTEM:
  storage blocks, no per-unit law), a bare ``BERNOULLI (p)`` (a percent in PostgreSQL, rows
  in DuckDB), ``TABLESAMPLE`` on a public table or on a WITH name, and ``(n ROWS)``, which
  is ``Query.sample(n=…)`` and refused there (no amplification for add/remove neighbours).
- **Limits**: :data:`MAX_SQL_BYTES` of text and parentheses nested at most
  ``MAX_SQL_DEPTH`` deep, checked before parsing; a parsed tree at most ``MAX_SQL_DEPTH``
  deep, checked before translating (no recursion error); the grammar's own limits after.

Contents
--------
common      SQLError (with its span), SQLQuery (query + post-processing: plan, explain,
            release), PostProcess, the limits, DIALECTS and SUPPORTED (form → example)
rowwise     row-wise SQL to grammar expressions; bounds by interval arithmetic, key domains
post        HAVING, ORDER BY and LIMIT, checked and compiled when translated
translate   to_query: FROM / JOIN / WITH, WHERE, GROUP BY, the SELECT list's aggregates
"""

from dpkit.frame.sql.common import (
    DIALECTS,
    MAX_SQL_BYTES,
    SUPPORTED,
    PostProcess,
    SQLError,
    SQLQuery,
    SQLSession,
)
from dpkit.frame.sql.translate import to_query

__all__ = ["SQLError", "SQLQuery", "SQLSession", "PostProcess", "to_query", "MAX_SQL_BYTES",
           "DIALECTS", "SUPPORTED"]
