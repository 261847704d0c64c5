"""Privacy amplification by subsampling, and DP-SGD's accounting.

A mechanism run on a random sample of the privacy units leaks less than on all of them: a
unit that is not sampled cannot be seen. The maps here turn a mechanism's loss into the loss
of the mechanism run on a sample, rounding every ε up (directed rounding, exact Fractions).

Maps
----
- Poisson sampling (each unit kept independently with probability p), add/remove-one
  neighbours (Balle, Barthe & Gaboardi, NeurIPS 2018, *Privacy amplification by
  subsampling: tight analyses via couplings and divergences*, Thm 8):
  ε-DP ⇒ ln(1 + p(e^ε − 1))-DP; (ε, δ)-DP ⇒ (ln(1 + p(e^ε − 1)), pδ)-DP.
- Sampling m of N units without replacement, substitute-one neighbours (the same paper,
  Thm 9; N is public under that relation, as both neighbours have N units): the same map
  with p = m/N (:func:`amplify_without_replacement`). It is not a map of add/remove-one
  neighbours, the relation a :class:`~dpkit.frame.Session` composes: there N is private, and
  with N ≤ m the "sample" is the whole table, so no amplification holds for every table
  (``Query.sample(n=…)`` is refused for that reason, naming ``sample(p=…)``).
- The sampled Gaussian (Poisson rate q, noise N(0, σ²Δ²) on a sum of L2 sensitivity Δ), at
  integer orders α ≥ 2 (Mironov, Talwar & Zhang 2019, *Rényi differential privacy of the
  sampled Gaussian mechanism*, §3.3, the integer-α formula):
  ε(α) = ln A_α / (α − 1),  A_α = Σ_{k=0}^{α} C(α, k) (1 − q)^{α−k} q^k e^{(k² − k)/(2σ²)}.
  Every term is positive and rounded up, so the computed ε(α) is an upper bound.
- DP-SGD (Abadi et al., CCS 2016, *Deep learning with differential privacy*, the moments
  accountant): T steps of the sampled Gaussian compose by adding RDP curves (Mironov 2017,
  Prop. 1), converted to (ε, δ) by :meth:`dpkit.core.renyi.RenyiDP.epsilon_at`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Literal

from dpkit.core.measures import ApproxDP, PrivacyLoss, PureDP
from dpkit.core.numbers import Number, as_typed, exp_up, fraction_up, integer, log_up
from dpkit.core.renyi import RenyiDP
from dpkit.errors import DomainError, MeasureError

__all__ = ["SGM_ORDERS", "check_rate", "amplified_epsilon", "amplify",
           "amplify_without_replacement",
           "sampled_gaussian_rdp", "dpsgd_epsilon", "dpsgd_noise_multiplier"]

#: Integer orders of the sampled Gaussian's RDP curve (the integer-α formula needs them).
SGM_ORDERS: tuple[int, ...] = (2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48,
                               56, 64, 80, 96, 128, 160, 192, 256)
_DIGITS = 40  # working digits of each exp_up term (each result is widened upward)


def check_rate(p: Number) -> Fraction:
    """A sampling probability read exactly as typed (0.01 is 1/100).

    Raises
    ------
    DomainError
        p not a number in (0, 1].
    """
    try:
        rate = as_typed(p)
    except (TypeError, ValueError, DomainError) as exc:
        raise DomainError(f"the sampling rate must be a number in (0, 1], got {p!r}") from exc
    if not 0 < rate <= 1:
        raise DomainError(f"the sampling rate must be in (0, 1], got {p!r}")
    return rate


def amplified_epsilon(epsilon: Number, p: Number) -> Fraction:
    """ε′ = ln(1 + p(e^ε − 1)), rounded up (Balle, Barthe & Gaboardi 2018, Thm 8).

    Parameters
    ----------
    epsilon : number
        The mechanism's ε ≥ 0 in nats, on the sample.
    p : number
        The sampling rate in (0, 1] (exact as typed).

    Returns
    -------
    Fraction
        A rational ≥ ε′; ε′ ≤ ε, increasing in ε and in p, and ε′ = ε at p = 1.

    Raises
    ------
    DomainError
        ε negative or p outside (0, 1].
    """
    rate = check_rate(p)
    eps = as_typed(epsilon)
    if eps < 0:
        raise DomainError("epsilon must be ≥ 0")
    if eps == 0:
        return Fraction(0)
    if rate == 1:
        return eps
    return min(eps, log_up(1 + rate * (exp_up(eps) - 1)))


def amplify(loss: PrivacyLoss, p: Number) -> PrivacyLoss:
    """The loss of a mechanism run on a Poisson sample of rate p (module docstring's maps).

    Parameters
    ----------
    loss : PureDP or ApproxDP
        The mechanism's loss on the sample (add/remove-one neighbours).
    p : number
        The sampling rate in (0, 1].

    Returns
    -------
    PrivacyLoss
        ``PureDP(ε′)`` or ``ApproxDP(ε′, pδ)``, ε′ = ln(1 + p(e^ε − 1)) rounded up.

    Raises
    ------
    MeasureError
        For another measure (zCDP does not amplify by a closed form; use
        :func:`sampled_gaussian_rdp` for the Gaussian).
    """
    rate = check_rate(p)
    if isinstance(loss, PureDP):
        return PureDP(amplified_epsilon(loss.epsilon, rate))
    if isinstance(loss, ApproxDP):
        return ApproxDP(amplified_epsilon(loss.epsilon, rate), rate * loss.delta)
    raise MeasureError(f"amplification by sampling has no closed form for "
                       f"{type(loss).__name__}; use ε-DP or (ε, δ)-DP")


def amplify_without_replacement(loss: PrivacyLoss, n: int, population: int) -> PrivacyLoss:
    """The loss of a mechanism run on n units drawn without replacement from a population
    of N units, for *substitute-one* neighbours (Balle, Barthe & Gaboardi 2018, Thm 9).

    ε-DP ⇒ ln(1 + (n/N)(e^ε − 1))-DP and (ε, δ)-DP ⇒ (ln(1 + (n/N)(e^ε − 1)), (n/N)δ)-DP,
    ε rounded up; ``loss`` is the mechanism's loss on the sample for substitute-one
    neighbours (an add/remove-one ε-DP mechanism is 2ε-DP for substitution, Dwork & Roth
    Thm 2.2 with k = 2). N is public: both neighbours hold exactly N units.

    Parameters
    ----------
    loss : PureDP or ApproxDP
        The mechanism's loss on the sample (substitute-one neighbours).
    n : int
        The sample size, 1 ≤ n ≤ N.
    population : int
        N ≥ 1, the declared (public) number of units.

    Returns
    -------
    PrivacyLoss
        The amplified loss (``loss`` itself at n = N).

    Raises
    ------
    DomainError
        n or N not an integer, n < 1 or n > N.
    MeasureError
        For a measure other than ε-DP or (ε, δ)-DP (no closed form for zCDP).
    """
    size = integer(n, "the sample size n", minimum=1)
    total = integer(population, "the population N", minimum=1)
    if size > total:
        raise DomainError(f"the sample size n = {size} exceeds the population N = {total}")
    return amplify(loss, Fraction(size, total))


def _positive(x: Number, name: str) -> Fraction:
    value = as_typed(x)
    if value <= 0:
        raise DomainError(f"{name} must be > 0, got {x!r}")
    return value


def _log_a(q: Fraction, sigma: Fraction, alpha: int) -> Fraction:
    """A rational ≥ ln A_α (module docstring), each term rounded up."""
    two_var = 2 * sigma * sigma
    total = Fraction(0)
    for k in range(alpha + 1):
        weight = math.comb(alpha, k) * (1 - q) ** (alpha - k) * q ** k
        if weight:
            total += weight * exp_up(Fraction(k * k - k) / two_var, _DIGITS)
    return log_up(total)


def sampled_gaussian_rdp(q: Number, noise_multiplier: Number,
                         orders: tuple[int, ...] = SGM_ORDERS) -> RenyiDP:
    """RDP curve of one step of the sampled Gaussian mechanism (Mironov, Talwar & Zhang
    2019, §3.3, integer α).

    ε(α) = ln A_α / (α − 1),  A_α = Σ_{k=0}^{α} C(α, k)(1 − q)^{α−k} q^k e^{(k²−k)/(2σ²)}:
    a sum of L2 sensitivity Δ over a Poisson sample of rate q with N(0, σ²Δ²) noise is
    (α, ε(α))-RDP for add/remove-one neighbours.

    Parameters
    ----------
    q : number
        The Poisson sampling rate in (0, 1] (exact as typed).
    noise_multiplier : number
        σ > 0, the noise's standard deviation in units of Δ (exact as typed).
    orders : tuple of int
        Integer orders α ≥ 2 (default :data:`SGM_ORDERS`).

    Returns
    -------
    RenyiDP
        ε(α) in nats, rounded up at every order; at q = 1 it is the Gaussian's α/(2σ²)
        (rounded up).

    Raises
    ------
    DomainError
        q outside (0, 1], σ ≤ 0 or an order that is not an integer ≥ 2.
    """
    rate = check_rate(q)
    sigma = _positive(noise_multiplier, "the noise multiplier")
    if not orders or any(not isinstance(a, int) or a < 2 for a in orders):
        raise DomainError("the sampled Gaussian's orders must be integers ≥ 2")
    if rate == 1:  # the Gaussian itself: α/(2σ²), exact
        return RenyiDP([Fraction(a) / (2 * sigma * sigma) for a in orders], orders)
    return RenyiDP([_log_a(rate, sigma, a) / (a - 1) for a in orders], orders)


def _checked(steps: int, delta: Number) -> tuple[int, Fraction]:
    count = integer(steps, "steps", minimum=1)
    dlt = as_typed(delta)
    if not 0 < dlt < 1:
        raise DomainError("delta must be in (0, 1)")
    return count, dlt


def dpsgd_epsilon(steps: int, sampling_rate: Number, noise_multiplier: Number,
                  delta: Number, *, method: Literal["rdp", "pld"] = "rdp") -> Fraction:
    """ε at δ of DP-SGD: T steps of the sampled Gaussian (any trainer: Opacus, Keras, JAX).

    ``rdp``: T · ε_SGM(α) (Mironov, Talwar & Zhang 2019, §3.3; composition Mironov 2017,
    Prop. 1), converted by min over α of the bounds of Mironov 2017 Prop. 3 and Balle et al.
    2020 Thm 21 (:meth:`dpkit.core.renyi.RenyiDP.epsilon_at`), every step rounded up.
    ``pld``: Google's dp-accounting PLD of ``PoissonSampledDpEvent(q, GaussianDpEvent(σ))``
    self-composed T times (pessimistic discretisation; needs the optional extra), rounded up.

    Parameters
    ----------
    steps : int
        T ≥ 1, the number of noisy gradient steps.
    sampling_rate : number
        q = batch size / dataset size in (0, 1], each example in a batch independently
        with probability q (Poisson sampling, as Opacus' and the paper's analysis).
    noise_multiplier : number
        σ > 0: the noise's standard deviation over the clipping norm.
    delta : number
        δ in (0, 1).
    method : {"rdp", "pld"}
        The accountant.

    Returns
    -------
    Fraction
        ε ≥ 0 in nats, an upper bound (rdp: certified; pld: dp-accounting's pessimistic
        estimate rounded up): the training is (ε, δ)-DP for add/remove-one neighbours.

    Raises
    ------
    DomainError
        T < 1, q outside (0, 1], σ ≤ 0, δ outside (0, 1), an unknown method, or pld
        without dp-accounting.
    """
    count, dlt = _checked(steps, delta)
    if method == "pld":
        return _pld_epsilon(count, sampling_rate, noise_multiplier, dlt)
    if method != "rdp":
        raise DomainError(f"method must be 'rdp' or 'pld', got {method!r}")
    one = sampled_gaussian_rdp(sampling_rate, noise_multiplier)
    return RenyiDP([count * e for e in one.epsilons], one.orders).epsilon_at(dlt)


def _pld_epsilon(steps: int, q: Number, sigma: Number, delta: Fraction) -> Fraction:
    try:
        import dp_accounting
        from dp_accounting.pld import pld_privacy_accountant
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise DomainError("method='pld' needs the optional extra: pip install "
                          "'dpkit[pld]' (Google's dp-accounting)") from exc
    rate, noise = float(check_rate(q)), float(_positive(sigma, "the noise multiplier"))
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(
        rate, dp_accounting.GaussianDpEvent(noise)), steps)
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    return fraction_up(accountant.compose(event).get_epsilon(float(delta)))


def _float_epsilon(steps: int, q: float, sigma: float, delta: float) -> float:
    """A float estimate of :func:`dpsgd_epsilon` (rdp) to search σ with; never charged."""
    best = math.inf
    for a in SGM_ORDERS:
        logs = [math.log(math.comb(a, k)) + (a - k) * math.log1p(-q) + k * math.log(q)
                + (k * k - k) / (2 * sigma * sigma) for k in range(a + 1)] if q < 1 else [
            a * (a - 1) / (2 * sigma * sigma)]
        top = max(logs)
        rdp = steps * (top + math.log(sum(math.exp(x - top) for x in logs))) / (a - 1)
        mironov = rdp + math.log(1 / delta) / (a - 1)
        balle = rdp + math.log((a - 1) / a) + (math.log(1 / delta) - math.log(a)) / (a - 1)
        best = min(best, mironov, balle)  # the conversions of RenyiDP.epsilon_at
    return best


def dpsgd_noise_multiplier(epsilon: Number, delta: Number, steps: int,
                           sampling_rate: Number, *, resolution: Number = Fraction(1, 1000)
                           ) -> Fraction:
    """The smallest σ on a grid of ``resolution`` whose DP-SGD run is (ε, δ)-DP by
    :func:`dpsgd_epsilon` (rdp): the inverse map, certified at the σ it returns.

    Parameters
    ----------
    epsilon : number
        The target ε > 0 in nats.
    delta : number
        δ in (0, 1).
    steps : int
        T ≥ 1.
    sampling_rate : number
        q in (0, 1].
    resolution : number
        The grid of σ (default 1/1000): σ is a multiple of it.

    Returns
    -------
    Fraction
        σ with ``dpsgd_epsilon(steps, q, σ, δ) ≤ ε`` (checked exactly), and σ − resolution
        fails the float search (so σ is within about one grid step of the smallest).

    Raises
    ------
    DomainError
        For inputs outside the domains of :func:`dpsgd_epsilon`, or when no σ ≤ 10⁴ meets ε.
    """
    count, dlt = _checked(steps, delta)
    target, rate = _positive(epsilon, "epsilon"), check_rate(sampling_rate)
    grid = _positive(resolution, "the resolution")
    lo, hi = 0, int(10 ** 4 / grid)  # σ = i · grid
    if _float_epsilon(count, float(rate), float(hi * grid), float(dlt)) > target:
        raise DomainError("no noise multiplier up to 10^4 meets this ε")
    while hi - lo > 1:  # the float map is decreasing in σ
        mid = (lo + hi) // 2
        ok = _float_epsilon(count, float(rate), float(mid * grid), float(dlt)) <= target
        lo, hi = (lo, mid) if ok else (mid, hi)
    while dpsgd_epsilon(count, rate, hi * grid, dlt) > target:  # certify (float ≠ exact)
        hi += 1
    if hi > 1 and dpsgd_epsilon(count, rate, (hi - 1) * grid, dlt) <= target:
        hi -= 1  # the float search's rounding can land one grid step high
    return hi * grid

