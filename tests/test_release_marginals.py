"""Finite domains, codecs, marginal measurement and mutual consistency (dpkit.release)."""

from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from release_checks import record, total_epsilon

from dpkit.errors import ColumnError, DomainError
from dpkit.release.synthetic.domain import Bins, Codec, Domain, marginal_counts, records
from dpkit.release.synthetic.marginals import (
    MarginalWorkload,
    NoisyMarginal,
    make_consistent,
    measure_marginals,
    project,
    total_variation,
)

ADULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "private_pgm"


def test_domains_are_declared_and_checked():
    d = Domain.from_dict({"a": 3, "b": 2})
    assert d.size() == 6 and d.project(["b"]).shape() == (2,)
    with pytest.raises(DomainError):
        records(pl.DataFrame({"a": [0, 3], "b": [0, 1]}), d)  # 3 is outside 0 … 2
    with pytest.raises(DomainError):
        records(pl.DataFrame({"a": [0, None], "b": [0, 1]}), d)
    with pytest.raises(ColumnError):
        records(pl.DataFrame({"a": [0]}), d)
    with pytest.raises(DomainError):
        Domain(("a", "a"), (2, 2))
    codes = records(pl.DataFrame({"a": [0, 2, 2, 1], "b": [1, 1, 0, 1]}), d)
    assert marginal_counts(codes, d, ["b", "a"]).tolist() == [[0, 0, 1], [1, 1, 1]]


def test_codec_round_trips_categories_and_bins():
    t = pl.DataFrame({"x": [0.5, 4.0, 9.9], "c": ["u", None, "u"], "n": [1, 7, 10]})
    codec = Codec.declare(t, {"x": Bins((0, 2, 5, 10)), "c": ["u", None],
                              "n": Bins((0, 5, 10))})
    codes = codec.encode(t)
    assert codes.rows() == [(0, 0, 0), (1, 1, 1), (2, 0, 1)]
    back = codec.decode(codes)
    assert back.schema == t.schema and back["c"].to_list() == ["u", None, "u"]
    assert back["x"].to_list() == [1.0, 3.5, 7.5] and back["n"].to_list() == [2, 7, 7]
    with pytest.raises(DomainError, match="undeclared"):
        codec.encode(t.with_columns(c=pl.lit("v")))
    with pytest.raises(DomainError, match="outside"):
        codec.encode(t.with_columns(x=pl.lit(11.0)))


def test_marginals_spend_epsilon_once_with_sensitivity_m(monkeypatch):
    log = record(monkeypatch)
    d = Domain.from_dict({"a": 3, "b": 2, "c": 4})
    codes = np.random.default_rng(0).integers(0, 2, (100, 3))  # test data only
    w = MarginalWorkload.all_kway(d, 2)
    measure_marginals(codes, d, w.cliques, Fraction(1, 2))
    assert total_epsilon(log) == Fraction(1, 2) and log[0].sensitivity == 3
    moved_codes = np.vstack([codes, [[2, 1, 3]]])  # one more record
    base = log[0].values
    log.clear()
    measure_marginals(moved_codes, d, w.cliques, Fraction(1, 2))
    assert np.abs(log[0].values - base).sum() == 3  # one cell in each of the 3 marginals


def test_consistency_makes_shared_projections_agree():
    d = Domain.from_dict({"a": 3, "b": 4, "c": 2, "e": 2})
    noise = np.random.default_rng(1)  # arbitrary measurements (no privacy involved)
    cliques = [("a", "b"), ("b", "c"), ("c", "a"), ("a", "e")]
    ms = [NoisyMarginal(c, noise.normal(10, 3, d.shape(c)), 1.0) for c in cliques]
    out = make_consistent(ms, d, passes=30)
    for x, y in [(0, 1), (1, 2), (0, 2), (0, 3)]:
        shared = sorted(set(out[x].clique) & set(out[y].clique))
        assert np.allclose(project(out[x], shared), project(out[y], shared), atol=1e-6)
    totals = {float(m.values.sum()) for m in out}
    assert max(totals) - min(totals) < 1e-6


@pytest.mark.skipif(not ADULT.is_dir(), reason="needs ../shared/data/private_pgm")
def test_adult_marginals_are_accurate_at_epsilon_one():
    """Scale 3/ε discrete Laplace on 48,842 records: every cell's error is below
    3·ln(2·cells/1e-6) with probability ≥ 1 − 1e-6 (union bound), so each marginal's TV
    distance is below cells·that/(2n). A broken variant (counts of another column) is far."""
    df = pl.read_csv(ADULT / "adult.csv")
    d = Domain.from_json(ADULT / "adult-domain.json")
    codes = records(df, d)
    cliques = [("sex", "race"), ("race", "income>50K"), ("sex", "income>50K")]
    truth = [marginal_counts(codes, d, c) for c in cliques]
    est = make_consistent(measure_marginals(codes, d, cliques, 1), d)
    cells = sum(t.size for t in truth)
    per_cell = 3 * np.log(2 * cells / 1e-6)
    for t, m in zip(truth, est, strict=True):
        assert total_variation(t, m.values) <= t.size * per_cell / (2 * len(df))
    flipped = codes.copy()  # broken variant: a marginal of the wrong data (sex flipped)
    flipped[:, d.attributes.index("sex")] ^= 1
    wrong = marginal_counts(flipped, d, cliques[0])
    assert total_variation(truth[0], wrong) > truth[0].size * per_cell / (2 * len(df))
