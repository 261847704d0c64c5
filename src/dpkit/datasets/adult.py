"""UCI Adult (Census Income).

Becker, B. & Kohavi, R. (1996). Adult [Dataset]. UCI Machine Learning Repository.
https://doi.org/10.24432/C5XW20 — licensed CC BY 4.0. The original ``adult.data`` and
``adult.test`` files ship gzip-compressed inside dpkit, byte-identical once decompressed.
"""

from __future__ import annotations

import gzip
from importlib import resources
from typing import Literal

import polars as pl

from dpkit.errors import DomainError

__all__ = ["load_adult", "ADULT_COLUMNS"]

ADULT_COLUMNS: dict[str, type[pl.DataType]] = {
    "age": pl.Int64,
    "workclass": pl.String,
    "fnlwgt": pl.Int64,
    "education": pl.String,
    "education-num": pl.Int64,
    "marital-status": pl.String,
    "occupation": pl.String,
    "relationship": pl.String,
    "race": pl.String,
    "sex": pl.String,
    "capital-gain": pl.Int64,
    "capital-loss": pl.Int64,
    "hours-per-week": pl.Int64,
    "native-country": pl.String,
    "income": pl.String,
}


def _read(name: str, skip_banner: bool) -> pl.DataFrame:
    raw = resources.files("dpkit.datasets").joinpath("data", f"{name}.gz").read_bytes()
    text = gzip.decompress(raw).decode("utf-8")
    if skip_banner:  # adult.test starts with "|1x3 Cross validator"
        text = text.split("\n", 1)[1]
    df = pl.read_csv(
        text.encode(),
        has_header=False,
        new_columns=list(ADULT_COLUMNS),
        schema_overrides={c: pl.String for c in ADULT_COLUMNS},
    )
    exprs = []
    for col, dtype in ADULT_COLUMNS.items():
        value = pl.col(col).str.strip_chars()
        value = pl.when(value == "?").then(None).otherwise(value)
        if col == "income":
            value = value.str.strip_suffix(".")
        exprs.append(value.cast(dtype).alias(col))
    return df.select(exprs).filter(pl.any_horizontal(pl.all().is_not_null()))


def load_adult(split: Literal["train", "test", "all"] = "train") -> pl.DataFrame:
    """Load the UCI Adult data as a typed Polars DataFrame.

    Parameters
    ----------
    split : {"train", "test", "all"}
        ``"train"`` is ``adult.data`` (32,561 rows), ``"test"`` is ``adult.test``
        (16,281 rows), ``"all"`` both (48,842 rows), in that order.

    Returns
    -------
    polars.DataFrame
        15 columns with the UCI names (``age``, ``workclass``, …, ``hours-per-week``,
        ``native-country``, ``income``); integers as Int64, categories as String.
        ``?`` becomes null; the test labels' trailing period is removed, so ``income`` is
        ``"<=50K"`` or ``">50K"`` in both splits.

    Raises
    ------
    DomainError
        For an unknown split.
    """
    if split == "train":
        return _read("adult.data", skip_banner=False)
    if split == "test":
        return _read("adult.test", skip_banner=True)
    if split == "all":
        return pl.concat([load_adult("train"), load_adult("test")])
    raise DomainError(f"split must be 'train', 'test' or 'all', got {split!r}")
