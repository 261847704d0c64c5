"""Privacy loss distribution (PLD) accounting through Google's ``dp-accounting`` package.

dpkit does not re-implement PLD accounting (Koskela, Jälkö & Honkela 2020; Meiser & Mohammadi
2018; Doroshenko et al. 2022, *Connect the dots*): install the optional extra
(``pip install "dpkit[pld]"``) and these functions compose with its pessimistic
discretisation, which rounds every privacy loss up. Results are converted to exact
fractions rounding up.
"""

from __future__ import annotations

from typing import Any

from dpkit.core.measures import ApproxDP
from dpkit.core.numbers import Number, fraction_down, fraction_up, integer
from dpkit.core.renamed import renamed
from dpkit.errors import DomainError

__all__ = ["pld_gaussian", "pld_laplace"]


def _pld() -> Any:
    try:
        from dp_accounting.pld import privacy_loss_distribution
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise DomainError("PLD accounting needs the optional extra: pip install "
                          "'dpkit[pld]' (Google's dp-accounting)") from exc
    return privacy_loss_distribution


def _compose(factory: str, parameter: float, k: int, delta: Number, sensitivity: float,
             discretization: float) -> ApproxDP:
    if parameter <= 0 or sensitivity <= 0:
        raise DomainError("the noise parameter and the sensitivity must be > 0")
    k = integer(k, "k", minimum=1)
    dlt = fraction_down(delta)
    if not 0 < dlt < 1:
        raise DomainError("delta must be in (0, 1)")
    pld = getattr(_pld(), factory)(parameter, sensitivity=sensitivity,
                                   value_discretization_interval=discretization)
    epsilon = pld.self_compose(k).get_epsilon_for_delta(float(dlt))
    return ApproxDP(fraction_up(epsilon), dlt)


@renamed(sigma="scale")
def pld_gaussian(scale: float, k: int, delta: Number, sensitivity: float = 1.0,
                 discretization: float = 1e-3) -> ApproxDP:
    """(ε, δ) of k Gaussian mechanisms (scale = standard deviation σ, L2 sensitivity Δ) by
    PLD (``sigma=``, deprecated, is ``scale``)."""
    return _compose("from_gaussian_mechanism", scale, k, delta, sensitivity, discretization)


def pld_laplace(scale: float, k: int, delta: Number, sensitivity: float = 1.0,
                discretization: float = 1e-3) -> ApproxDP:
    """(ε, δ) of k Laplace mechanisms (scale b, L1 sensitivity Δ) by PLD."""
    return _compose("from_laplace_mechanism", scale, k, delta, sensitivity, discretization)
