"""dpkit's mirror-descent driver and closed-form Lipschitz constant for Private-PGM fits
(dpkit.release.synthetic.mst) agree with mbi 1.1.0's own (power iteration; two-pass loop), and the
quick-compile block restores the caller's JAX setting. Deterministic: no noise is drawn."""

from __future__ import annotations

import numpy as np
import pytest

from dpkit.release.synthetic.domain import Domain
from dpkit.release.synthetic.mst import Measured, loss_lipschitz, pgm_estimate
from dpkit.release.synthetic.pgm_sample import quick_compile

mbi = pytest.importorskip("mbi")
jnp = pytest.importorskip("jax.numpy")

DOM = Domain.from_dict({"a": 3, "b": 4, "c": 5, "d": 2})


def _truth() -> np.ndarray:
    """A fixed joint table over DOM (deterministic, 500 records in all)."""
    a, b, c, d = np.meshgrid(*(np.arange(n) for n in DOM.sizes), indexing="ij")
    p = 1.0 + a + ((2 * b * c) % 3) + 2.0 * d * (a == b)
    return 500.0 * p / p.sum()


def _measurements() -> list[Measured]:
    """Marginals of the truth, each off by a fixed ±5% pattern (no random noise)."""
    joint, out = _truth(), []
    for clique, sigma in ((("a",), 2.0), (("b",), 3.0), (("a", "b"), 1.5), (("b", "c"), 4.0),
                          (("c", "d"), 2.5), (("c",), 1.0), (("d",), 5.0)):
        drop = tuple(i for i, x in enumerate(DOM.attributes) if x not in clique)
        values = joint.sum(axis=drop).ravel()
        out.append(Measured(clique, values * (1 + 0.05 * np.cos(np.arange(values.size))),
                            sigma))
    return out


def _mbi_measurements(ms: list[Measured]) -> list:
    return [mbi.LinearMeasurement(jnp.asarray(m.values), m.clique, m.sigma) for m in ms]


def test_lipschitz_matches_power_iteration():
    ms = _measurements()
    dom = mbi.Domain(DOM.attributes, DOM.sizes)
    ref = mbi.marginal_loss.from_linear_measurements(_mbi_measurements(ms), domain=dom)
    assert loss_lipschitz(DOM, ms, ref.cliques) == pytest.approx(float(ref.lipschitz),
                                                                 rel=1e-4)
    # broken: the dropped cells' factor |C|/|c| forgotten (each measurement weighs 1/σ²)
    broken = max(sum(1 / m.sigma ** 2 for m in ms if set(m.clique) <= set(c))
                 for c in ref.cliques)
    assert broken != pytest.approx(float(ref.lipschitz), rel=1e-2)


def test_weighted_lipschitz_is_an_upper_bound():
    ms = _measurements()
    w = np.linspace(0.5, 2.0, 3)
    ms[0] = Measured(("a",), ms[0].values * w, 2.0, w)
    dom = mbi.Domain(DOM.attributes, DOM.sizes)
    lm = _mbi_measurements(ms)
    wj = jnp.asarray(w)
    lm[0] = mbi.LinearMeasurement(jnp.asarray(ms[0].values), ("a",), 2.0,
                                  lambda f: f.datavector() * wj)
    ref = mbi.marginal_loss.from_linear_measurements(lm, domain=dom)
    assert loss_lipschitz(DOM, ms, ref.cliques) >= float(ref.lipschitz) * (1 - 1e-4)


@pytest.mark.parametrize("iters", [50, 400])
def test_mirror_descent_matches_mbi(iters):
    ms = _measurements()
    dom = mbi.Domain(DOM.attributes, DOM.sizes)
    lm = _mbi_measurements(ms)
    loss = mbi.marginal_loss.from_linear_measurements(lm, domain=dom)
    ref = mbi.estimation.mirror_descent(dom, lm, known_total=500.0, iters=iters)
    ours = pgm_estimate(DOM, ms, 500.0, iters)
    assert float(loss(ours.marginals)) == pytest.approx(float(loss(ref.marginals)), rel=1e-3)
    for clique in (("a", "b"), ("c", "d")):
        np.testing.assert_allclose(ours.project(clique).datavector(),
                                   ref.project(clique).datavector(), rtol=1e-3, atol=1e-3)
    # and it is a fit: far below the loss of the uniform starting point
    start = mbi.estimation.mirror_descent(dom, lm, known_total=500.0, iters=0)
    assert float(loss(ours.marginals)) < 0.5 * float(loss(start.marginals))


def test_quick_compile_restores_the_setting():
    import jax

    jax.config.update("jax_disable_most_optimizations", False)
    with quick_compile():
        assert jax.config.values["jax_disable_most_optimizations"] is True
    assert jax.config.values["jax_disable_most_optimizations"] is False
    with pytest.raises(RuntimeError), quick_compile():
        raise RuntimeError("inside")
    assert jax.config.values["jax_disable_most_optimizations"] is False
