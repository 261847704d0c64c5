"""Readable reprs (issue 24): exact losses, no raw function objects."""

from fractions import Fraction

import dpkit as dp
from dpkit.release.synthetic.domain import Bins


def test_losses_print_exactly():
    """Issue 33: a decimal, exact when the decimal is; a rounded one keeps its rational."""
    assert repr(dp.PureDP(Fraction(1, 2))) == "PureDP(ε=0.5)"
    assert repr(dp.ApproxDP(1, Fraction(1, 10**6))) == "ApproxDP(ε=1, δ=1e-06)"
    assert repr(dp.ZCDP(Fraction(1, 8))) == "ZCDP(ρ=0.125)"
    assert repr(dp.PureDP(Fraction(1, 3))) == "PureDP(ε≈0.333333, exact=1/3)"
    assert str(dp.PureDP(Fraction(1, 3))) == "ε ≈ 0.333333"
    assert str(dp.ApproxDP(0.5, 1e-6)) == "ε = 0.5, δ = 1e-06"


def test_components_and_pmw_have_readable_reprs():
    laplace = dp.mechanisms.make_laplace(scale=2.0)
    assert repr(laplace).startswith("Measurement('laplace(scale=2") and "<function" not in repr(
        laplace)
    table = dp.datasets.load_adult("train").select("sex", "age").head(500)
    session = dp.Session(table, budget=dp.PureDP(1))
    spec = {"sex": ["Female", "Male"], "age": Bins(tuple(range(17, 93, 15)))}
    pmw = session.query().publish.pmw(spec, epsilon=1, alpha=100)
    assert repr(pmw) == "SessionPMW(columns=[sex, age], ε = 1)"
