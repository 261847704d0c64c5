"""HAVING, ORDER BY and LIMIT: post-processing of the noisy result, checked when translated."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import narwhals as nw
from sqlglot import exp

from dpkit.frame import aggregates
from dpkit.frame.language import Expr, ProtocolError, expr_kind, value_kind
from dpkit.frame.sql.common import PostProcess, SQLError
from dpkit.frame.sql.rowwise import AGG_FUNCTIONS, RowWise

__all__ = ["Post", "Aggregated"]


@dataclass
class Aggregated:
    """A SELECT item that is an aggregate: its node and the aggregation built."""

    node: exp.Expr
    agg: aggregates.Aggregation


class Post(RowWise):
    """The translation of HAVING, ORDER BY and LIMIT."""

    def dtype(self, column: str) -> Any:
        """A group column's type for HAVING's type check: from its public keys' values, else
        from the schema (which costs a dry run of the steps)."""
        kinds = {value_kind(v) for v in self.keys.get(column, ()) if v is not None}
        if kinds == {"string"}:
            return nw.String
        if kinds == {"boolean"}:
            return nw.Boolean
        return nw.Float64 if kinds == {"number"} else self.schema()[column]  # (none known)

    # -- HAVING, ORDER BY, LIMIT ----------------------------------------------------------
    def post(self, select: exp.Select, aggs: list[Aggregated], outputs: list[tuple[str, str]],
             group_columns: list[str]) -> PostProcess:
        names = dict(outputs)
        by_alias = {i.alias: i for i in select.expressions if isinstance(i, exp.Alias)}
        out_schema = {dst: self.dtype(src) if src in group_columns else nw.Float64
                      for src, dst in outputs}

        def output(node: exp.Expr) -> str | None:
            """The output column a HAVING / ORDER BY reference names, or None."""
            for a in aggs:
                if node == a.node:
                    return a.agg.output_name()
            if isinstance(node, exp.Column) and not node.table:
                if node.name in out_schema:
                    return node.name
                if node.name in by_alias:
                    return output(by_alias[node.name].this)
                try:
                    grammar = self.expr(node)
                except SQLError:
                    return None
                return names.get(grammar.get("col", ""))
            return None

        def column(node: exp.Column) -> dict[str, Any]:
            name = output(node)
            if name is None:
                raise self.fail(node, "HAVING and ORDER BY use the SELECT list's columns, "
                                      "aliases and aggregates (another aggregate would cost "
                                      "budget)")
            return {"col": name}

        having, texts = None, []
        node = select.args.get("having")
        if node is not None:
            having = self.having(node.this, output, column, out_schema)
            texts.append(f"HAVING {node.this.sql()}")
        order = self.order_by(select, output, outputs)
        if order:
            texts.append("ORDER BY " + ", ".join(
                f"{c}{' DESC' if d else ''}" for c, d, _ in order))
        limit = self.limit(select)
        if limit is not None:
            texts.append(f"LIMIT {limit}")
        try:
            return PostProcess(tuple(outputs), having, out_schema, order, limit,
                               " ".join(texts))
        except ProtocolError as exc:  # e.g. an integer literal beyond 64 bits
            raise self.fail(node, f"HAVING: {exc}") from None

    def having(self, node: exp.Expr, output: Callable[[exp.Expr], str | None],
               column: Callable[[exp.Column], dict[str, Any]],
               out_schema: dict[str, Any]) -> Expr:
        def named(n: exp.Expr) -> exp.Expr:
            name = output(n) if isinstance(n, AGG_FUNCTIONS) else None
            return n if name is None else exp.column(name, quoted=True)

        replaced = node.transform(named)
        self.no_aggregate(replaced, "in HAVING unless it is in the SELECT list")
        grammar = self.expr(replaced, column)
        try:
            if expr_kind(grammar, out_schema) != "boolean":
                raise self.fail(node, "HAVING needs a condition")
        except ProtocolError as exc:
            if isinstance(exc, SQLError):
                raise
            raise self.fail(node, f"HAVING: {exc}") from None
        return Expr(grammar)

    def order_by(self, select: exp.Select, output: Callable[[exp.Expr], str | None],
                 outputs: list[tuple[str, str]]) -> tuple[tuple[str, bool, bool], ...]:
        order = select.args.get("order")
        if order is None:
            return ()
        keys = []
        items = list(select.expressions)
        for ordered in order.expressions:
            if not isinstance(ordered, exp.Ordered) or ordered.args.get("with_fill"):
                raise self.refuse(ordered)
            node, name = ordered.this, None
            if isinstance(node, exp.Literal) and not node.is_string:
                index = int(node.this) if str(node.this).isdigit() else 0
                if not 1 <= index <= len(items):
                    raise self.fail(node, f"ORDER BY {node.this}: no such SELECT item")
                item = items[index - 1]
                name = output(item.this if isinstance(item, exp.Alias) else item) or (
                    item.alias if isinstance(item, exp.Alias) else None)
            else:
                name = output(node)
            if name is None or name not in {dst for _, dst in outputs}:
                raise self.fail(node, "ORDER BY uses the SELECT list's columns, aliases, "
                                      "ordinals and aggregates")
            keys.append((name, bool(ordered.args.get("desc")),
                         not ordered.args.get("nulls_first")))
        return tuple(keys)

    def limit(self, select: exp.Select) -> int | None:
        node = select.args.get("limit")
        if node is None:
            return None
        value = node.expression
        extra = [k for k, v in node.args.items() if k != "expression" and v not in (None, [],
                                                                                   False)]
        if extra or not (isinstance(value, exp.Literal) and not value.is_string
                         and str(value.this).isdigit() and int(value.this) < 1 << 31):
            raise self.fail(node, "LIMIT takes a non-negative integer literal")
        return int(value.this)


