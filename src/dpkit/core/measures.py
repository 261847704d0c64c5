"""Privacy definitions (measures) and their privacy-loss values.

Each class is both a measure (the type of a privacy guarantee) and a value in it: a privacy
loss spent by a release, or a budget that caps a sum of losses. Values are exact
:class:`~fractions.Fraction`; user floats are rounded *down* on construction because a number
a user passes is a cap or a target that a mechanism must not exceed.

- :class:`PureDP` — ε-DP (Dwork, McSherry, Nissim & Smith 2006), ε in nats.
- :class:`ApproxDP` — (ε, δ)-DP (Dwork, Kenthapadi, McSherry, Mironov & Naor 2006);
  pairs compare as pairs: (ε₁, δ₁) ≤ (ε₂, δ₂) iff ε₁ ≤ ε₂ and δ₁ ≤ δ₂.
- :class:`ZCDP` — ρ-zero-concentrated DP (Bun & Steinke 2016).
- :class:`CrowdBlending` — (k, ε)-crowd-blending privacy (Gehrke, Hay, Lui & Pass 2012): a
  guarantee a release states, not a loss an accountant debits (it does not compose);
  with pre-sampling it implies differential privacy (:meth:`CrowdBlending.presampled_epsilon`).
- :class:`ProbabilisticDP` — (ε, δ)-probabilistic DP (Machanavajjhala, Kifer, Abowd, Gehrke
  & Vilhuber, ICDE 2008, Def. 4): for every table, outside a disclosure set of output
  probability ≤ δ the ratio bound e^ε holds pointwise against every neighbour.
- :class:`Pufferfish` — ε-Pufferfish privacy for (secrets, secret pairs, a class Θ of data
  distributions) (Kifer & Machanavajjhala, TODS 2014): a guarantee a release
  states, not a loss an accountant debits (it does not compose in general).

Conversions: ε-DP ⇒ (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 1.4); ε-DP ⇒ (ε, 0)-DP;
(ε, δ)-probabilistic DP ⇒ (ε, δ)-DP (:meth:`ProbabilisticDP.to_approx`; the converse fails);
ρ-zCDP ⇒ (ε, δ)-DP by the better of Bun & Steinke 2016 Prop. 1.3,
ε = ρ + 2√(ρ ln(1/δ)), and Canonne, Kamath & Steinke 2020 Cor. 13,
ε = inf_{α>1} αρ + (ln(1/δ) + (α−1) ln(1 − 1/α) − ln α)/(α − 1).
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpkit.core.numbers import (
    SHOWN_DIGITS,
    Number,
    as_typed,
    dyadic_up,
    exp_up,
    float_up,
    integer,
    is_shown_exactly,
    log_down,
    log_up,
    non_negative,
    readable,
    shown,
    sqrt_up,
)
from dpkit.errors import DomainError, MeasureError

__all__ = ["PrivacyLoss", "PureDP", "ApproxDP", "ZCDP", "CrowdBlending", "ProbabilisticDP",
           "Pufferfish",
           "convert", "zcdp_to_epsilon", "largest_rho", "rounding_note"]


def _frac(x: Number | Fraction, name: str) -> Fraction:
    # a float is the decimal the user typed (0.1 → 1/10, 1e-06 → 1/10⁶): a budget is then
    # charged exactly as asked, never at the float's binary neighbour
    value = x if isinstance(x, Fraction) else as_typed(x)
    return non_negative(value, name)


class PrivacyLoss(abc.ABC):
    """Abstract base class of privacy-loss values; subclasses are frozen dataclasses.

    Every measure implements the same algebra, exactly: :meth:`zero` (the loss of a release
    that reads nothing), ``+`` (composition), ``-`` (what is left of a budget, floored at
    zero) and ``<=`` (whether a loss fits in a budget; pairs compare as pairs). A subclass
    that leaves one out cannot be instantiated (``TypeError``).
    """

    @classmethod
    @abc.abstractmethod
    def zero(cls) -> PrivacyLoss:
        """The zero loss of this measure."""

    @abc.abstractmethod
    def __add__(self, other: Any) -> PrivacyLoss:
        """The composed loss (``NotImplemented`` for an unknown type)."""

    @abc.abstractmethod
    def __sub__(self, other: Any) -> PrivacyLoss:
        """The budget left after spending ``other``, floored at zero."""

    @abc.abstractmethod
    def __le__(self, other: Any) -> bool:
        """Whether this loss is within ``other``."""

    def __radd__(self, other: Any) -> PrivacyLoss:
        if other == 0:  # lets builtin sum() compose losses
            return self
        return NotImplemented

    def as_dict(self) -> dict[str, str]:
        """Exact fields as strings (for storage)."""
        return {k: str(v) for k, v in vars(self).items()}

    def as_json(self) -> dict[str, object]:
        """The loss for people and auditors, the one JSON shape of every response::

            {"measure": "ZCDP", "rho": 0.1, "exact": {"rho": "1/10"}, "text": "ρ = 0.1"}

        Each field is a float of :data:`~dpkit.core.numbers.SHOWN_DIGITS` significant digits
        (:func:`~dpkit.core.numbers.shown`); ``exact`` holds the exact rationals as
        :meth:`as_dict` stores them; ``text`` is ``str(self)``.
        """
        fields: dict[str, Fraction] = dict(vars(self))
        return {"measure": type(self).__name__, **{k: shown(v) for k, v in fields.items()},
                "exact": self.as_dict(), "text": str(self)}

    def exact_text(self) -> str:
        """The exact rationals, for auditors: ``ρ = 864691128464227369/1152921504625031250``
        (``, ``-separated for (ε, δ))."""
        return ", ".join(f"{name} = {v}" for name, v in self._parts())

    def is_shown_exactly(self) -> bool:
        """Whether ``str(self)`` is exact (every field a short decimal)."""
        return all(is_shown_exactly(v) for _, v in self._parts())

    def _parts(self) -> list[tuple[str, Fraction]]:
        return [(_SYMBOLS[k], v) for k, v in vars(self).items()]

    def __str__(self) -> str:
        """Decimal text, ``=`` when it is the exact value and ``≈`` when it is rounded to
        :data:`~dpkit.core.numbers.SHOWN_DIGITS` digits: ``ρ = 0.1``, ``ε ≈ 0.333333``."""
        return ", ".join(f"{name} {_relation(v)} {readable(v)}" for name, v in self._parts())

    def __repr__(self) -> str:
        """Readable and exact: ``ZCDP(ρ=0.1)``; a value the decimal does not show exactly
        adds its exact rational, ``PureDP(ε≈0.333333, exact=1/3)``."""
        inner = []
        for name, v in self._parts():
            inner.append(f"{name}={readable(v)}" if is_shown_exactly(v)
                         else f"{name}≈{readable(v)}, exact={v}")
        return f"{type(self).__name__}({', '.join(inner)})"


_SYMBOLS = {"epsilon": "ε", "delta": "δ", "rho": "ρ"}


def _relation(v: Fraction) -> str:
    return "=" if is_shown_exactly(v) else "≈"


@dataclass(frozen=True, repr=False)
class PureDP(PrivacyLoss):
    """Pure ε-differential privacy: Pr[M(x) ∈ S] ≤ e^ε Pr[M(x′) ∈ S] for neighbours x, x′.

    Parameters
    ----------
    epsilon : number
        ε ≥ 0 in nats; floats are rounded down (a cap or target).
    """

    epsilon: Fraction

    def __init__(self, epsilon: Number) -> None:
        object.__setattr__(self, "epsilon", _frac(epsilon, "epsilon"))

    @classmethod
    def zero(cls) -> PureDP:
        return cls(0)

    def __add__(self, other: Any) -> PrivacyLoss:
        if isinstance(other, PureDP):
            return PureDP(self.epsilon + other.epsilon)
        if isinstance(other, ApproxDP | ZCDP):
            return convert(self, type(other)) + other
        return NotImplemented

    def __sub__(self, other: PureDP) -> PureDP:
        return PureDP(max(Fraction(0), self.epsilon - convert(other, PureDP).epsilon))

    def __le__(self, other: Any) -> bool:
        if isinstance(other, PureDP):
            return self.epsilon <= other.epsilon
        if isinstance(other, ApproxDP | ZCDP):
            return convert(self, type(other)) <= other
        return NotImplemented

    def __float__(self) -> float:
        return float_up(self.epsilon)

    def to_zcdp(self) -> ZCDP:
        """ε-DP ⇒ (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 1.4)."""
        return ZCDP(self.epsilon * self.epsilon / 2)

    def to_approx(self) -> ApproxDP:
        """ε-DP ⇒ (ε, 0)-DP."""
        return ApproxDP(self.epsilon, 0)



@dataclass(frozen=True, repr=False)
class ApproxDP(PrivacyLoss):
    """Approximate (ε, δ)-DP: Pr[M(x) ∈ S] ≤ e^ε Pr[M(x′) ∈ S] + δ.

    Parameters
    ----------
    epsilon : number
        ε ≥ 0 in nats.
    delta : number
        δ ∈ [0, 1], a probability. Floats are rounded down.
    """

    epsilon: Fraction
    delta: Fraction

    def __init__(self, epsilon: Number, delta: Number) -> None:
        eps, dlt = _frac(epsilon, "epsilon"), _frac(delta, "delta")
        if dlt > 1:
            raise DomainError(f"delta must be at most 1, got {delta!r}")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", dlt)

    @classmethod
    def zero(cls) -> ApproxDP:
        return cls(0, 0)

    def __add__(self, other: Any) -> PrivacyLoss:
        if isinstance(other, PureDP):
            other = other.to_approx()
        if isinstance(other, ApproxDP):  # basic composition (Dwork & Roth Thm 3.16)
            delta = min(Fraction(1), self.delta + other.delta)
            return ApproxDP(self.epsilon + other.epsilon, delta)
        if isinstance(other, ZCDP):
            raise MeasureError("convert the zCDP loss to (ε, δ) with a chosen δ before adding")
        return NotImplemented

    def __sub__(self, other: ApproxDP) -> ApproxDP:
        o = convert(other, ApproxDP)
        return ApproxDP(max(Fraction(0), self.epsilon - o.epsilon),
                        max(Fraction(0), self.delta - o.delta))

    def __le__(self, other: Any) -> bool:
        if isinstance(other, ApproxDP):
            return self.epsilon <= other.epsilon and self.delta <= other.delta
        if isinstance(other, PureDP):
            return self.delta == 0 and self.epsilon <= other.epsilon
        if isinstance(other, ZCDP):
            raise MeasureError("an (ε, δ) loss does not bound a zCDP loss")
        return NotImplemented

    def to_approx(self) -> ApproxDP:
        return self



@dataclass(frozen=True, repr=False)
class ZCDP(PrivacyLoss):
    """ρ-zero-concentrated DP: D_α(M(x) ‖ M(x′)) ≤ ρα for all α > 1 (Bun & Steinke 2016).

    Parameters
    ----------
    rho : number
        ρ ≥ 0; floats are rounded down.
    """

    rho: Fraction

    def __init__(self, rho: Number) -> None:
        object.__setattr__(self, "rho", _frac(rho, "rho"))

    @classmethod
    def zero(cls) -> ZCDP:
        return cls(0)

    def __add__(self, other: Any) -> PrivacyLoss:
        if isinstance(other, PureDP):
            other = other.to_zcdp()
        if isinstance(other, ZCDP):  # Bun & Steinke 2016, Lemma 2.3
            return ZCDP(self.rho + other.rho)
        if isinstance(other, ApproxDP):
            raise MeasureError("convert the zCDP loss to (ε, δ) with a chosen δ before adding")
        return NotImplemented

    def __sub__(self, other: ZCDP) -> ZCDP:
        return ZCDP(max(Fraction(0), self.rho - convert(other, ZCDP).rho))

    def __le__(self, other: Any) -> bool:
        if isinstance(other, ZCDP):
            return self.rho <= other.rho
        if isinstance(other, PureDP | ApproxDP):
            raise MeasureError("a zCDP loss needs a δ to be compared with an ε budget")
        return NotImplemented

    def __float__(self) -> float:
        return float_up(self.rho)

    def to_approx(self, delta: Number) -> ApproxDP:
        """(ε, δ)-DP implied by ρ-zCDP, with ε from :func:`zcdp_to_epsilon`."""
        dlt = _frac(delta, "delta")
        return ApproxDP(zcdp_to_epsilon(self.rho, dlt), dlt)



def _presampling(p: Number, k: int) -> Fraction:
    """The sampling probability of a pre-sampled crowd-blending mechanism, checked."""
    prob = as_typed(p)
    if not 0 < prob < 1:
        raise DomainError(f"p must be in (0, 1), got {p!r}")
    if k < 2:
        raise DomainError("pre-sampling amplifies crowd-blending privacy only for k ≥ 2")
    return prob


@dataclass(frozen=True)
class CrowdBlending:
    """(k, ε)-crowd-blending privacy (Gehrke, Hay, Lui & Pass, CRYPTO 2012, Def. of
    crowd-blending privacy): for every database D and every individual t ∈ D, either t
    ε-blends with at least k − 1 other individuals of D (replacing t's row by theirs
    changes the output law by at most a factor e^ε), or M(D) ≈_ε M(D ∖ {t}).

    Not a :class:`PrivacyLoss`: crowd-blending privacy does not compose, so no accountant
    takes it; a release states it beside the (ε, δ) it debits. ε-DP implies (k, ε)-crowd
    blending for every k (the second branch always holds).

    Parameters
    ----------
    k : int
        The crowd size, k ≥ 1 (an individual blends with k − 1 others).
    epsilon : number
        ε ≥ 0 in nats; floats are read as typed and rounded down like every measure's.

    Raises
    ------
    DomainError
        k not an integer ≥ 1, or ε negative or not a number.
    """

    k: int
    epsilon: Fraction

    def __init__(self, k: int, epsilon: Number) -> None:
        object.__setattr__(self, "k", integer(k, "k", minimum=1))
        object.__setattr__(self, "epsilon", _frac(epsilon, "epsilon"))

    def __le__(self, other: object) -> bool:
        """At least as private as ``other``: a crowd as large and an ε as small
        (k₁, ε₁) ≤ (k₂, ε₂) iff k₁ ≥ k₂ and ε₁ ≤ ε₂ (a partial order)."""
        if not isinstance(other, CrowdBlending):
            return NotImplemented
        return self.k >= other.k and self.epsilon <= other.epsilon

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, CrowdBlending):
            return NotImplemented
        return self <= other and self != other

    def presampled_epsilon(self, p: Number) -> Fraction:
        """ε′ of the pre-sampled mechanism: each row kept with probability p, then this
        (k, ε)-crowd-blending mechanism, rounded up.

        ε′ = ln( p · (2 − p)/(1 − p) · e^ε + (1 − p) )   (Gehrke et al. 2012, Thm. "pre-
        sampling + crowd-blending ⇒ DP", stated for k ≥ 2 and constant p ∈ (0, 1)).

        The theorem's δ′ = e^{−Ω(k(1 − p)²)} leaves its constant unstated; for crowds that
        are declared classes :meth:`presampled_delta` derives one, and
        :meth:`presampled_loss` is the (ε′, δ′) a release debits.

        Parameters
        ----------
        p : number
            The sampling probability, 0 < p < 1 (exact as typed).

        Returns
        -------
        Fraction
            A rational ≥ ε′, in nats; increasing in p and in ε.

        Raises
        ------
        DomainError
            p outside (0, 1), or k < 2 (the theorem needs a crowd).
        """
        prob = _presampling(p, self.k)
        return log_up(prob * (2 - prob) / (1 - prob) * exp_up(self.epsilon) + 1 - prob)

    def presampled_delta(self, p: Number) -> Fraction:
        """δ′ of the pre-sampled mechanism when each crowd is a declared class, rounded up:

            δ′ = p · exp(−2 (1 − p)² ((k − 1)p − (1 − p))² / (k − 1)),  for (k − 1)p > 1 − p.

        Setting (stronger than Gehrke et al.'s data-dependent crowds, which a mechanism that
        suppresses the values of a data-independent generalisation g below k satisfies with
        ε = 0): for every multiset X and rows t, u with g(t) = g(u),
        (H1) M(X + t) ≈_ε M(X + u) (t blends with every row of its class), and
        (H2) M(X + t) ≈_ε M(X) when X holds fewer than k − 1 rows of class g(t).
        Pre-sampling keeps each row with probability p, then runs M.

        Derivation (Gehrke, Hay, Lui & Pass, CRYPTO 2012, Thm. "pre-sampling + crowd-blending
        ⇒ DP" states δ′ = e^{−Ω(k(1 − p)²)} without the constant). D = D⁻ + t; N rows of
        D⁻ are in t's class C; S is the sample of D⁻, m = |S ∩ C| ~ Bin(N, p), q = 1 − p,
        γ = p(2 − p) = 1 − q², W = (2 − p)/(1 − p). Then
        P[San(D) ∈ O] = p·E[M(S + t)(O)] + q·E[M(S)(O)], and E[M(S + t)(O)] splits on m:
        (i) m < k − 1: ≤ e^ε M(S)(O) by (H2);
        (ii) k − 1 ≤ m < T := ⌊γ(N + 1)⌋ (so some c ∈ C is not in S): average (H1) over the
        N − m unsampled c, M(S + t) ≤ e^ε M(S + c); S′ = S + c is a sample with m′ = m + 1,
        P[S] = P[S′]·q/p, reached from m′ pairs (S, c), so this part is
        e^ε Σ_{S′} P[S′] M(S′)(O) · m′q/(p(N − m′ + 1)) and the weight is ≤ W exactly when
        m′ ≤ γ(N + 1) (m′q² ≤ γ(N − m′ + 1) ⟺ m′ ≤ γ(N + 1), as q² + γ = 1);
        (iii) m ≥ max(T, k − 1): bounded by its probability P[Bin(N, p) ≥ max(T, k − 1)].
        (i) and (ii) read disjoint samples and W ≥ 1, so
        P[San(D) ∈ O] ≤ (p e^ε W + q) P[San(D⁻) ∈ O] + p·max_N P[Bin(N, p) ≥ max(T, k − 1)],
        and p e^ε W + q = e^{ε′} (:meth:`presampled_epsilon`). The other way needs no δ:
        P[San(D) ∈ O] ≥ q P[San(D⁻) ∈ O] and e^{ε′} q = γ e^ε + q² ≥ 1. Closed form of the
        tail: it is 0 for N < k − 1; for N ≥ k − 1, T > γ(N + 1) − 1, so T − Np > Npq − q²
        > 0 and Hoeffding gives P ≤ exp(−2(Npq − q²)²/N) = exp(−2q²(Np − q)²/N), largest
        at N = k − 1 ((Np − q)²/N increases for Np > q). At ε = 0 the threshold γ and
        ε′ = −ln(1 − p) are Li, Qardaji & Su's (2012, Thm. 5) at their smallest ε.
        ``tests/test_crowd_blending.py`` checks the exact max over N (Fractions) against this
        closed form, and the whole bound on the exact laws of small tables.

        Parameters
        ----------
        p : number
            The sampling probability, 0 < p < 1 (exact as typed).

        Returns
        -------
        Fraction
            A rational ≥ δ′ (64 significant bits, rounded up); falls as k grows.

        Raises
        ------
        DomainError
            p outside (0, 1), k < 2, or (k − 1)p ≤ 1 − p (the bound needs k > 1/p).
        """
        prob = _presampling(p, self.k)
        q = 1 - prob
        m = self.k - 1
        if m * prob <= q:
            raise DomainError(f"δ′ needs (k − 1)p > 1 − p: k ≥ {math.floor(q / prob) + 2} "
                              f"at p = {prob}")
        exponent = 2 * q**2 * (m * prob - q) ** 2 / m
        bound = prob * exp_up(-exponent)
        shift = bound.denominator.bit_length() - bound.numerator.bit_length() + 64
        return dyadic_up(bound, max(0, shift))

    def presampled_loss(self, p: Number) -> ApproxDP:
        """(ε′, δ′) of the pre-sampled mechanism: :meth:`presampled_epsilon` and
        :meth:`presampled_delta` (declared crowds; see there). What a release debits.

        Raises
        ------
        DomainError
            As :meth:`presampled_delta`.
        """
        return ApproxDP(self.presampled_epsilon(p), self.presampled_delta(p))

    def __str__(self) -> str:
        return f"k = {self.k}, ε {_relation(self.epsilon)} {readable(self.epsilon)}"


@dataclass(frozen=True)
class Pufferfish:
    """ε-Pufferfish privacy (Kifer & Machanavajjhala, "Pufferfish: a framework for
    mathematical privacy definitions", TODS 2014, the definition of ε-PufferFish privacy):
    for every secret pair (s_i, s_j), every θ ∈ Θ with P(s_i | θ), P(s_j | θ) > 0 and every
    output set S,
    P(M(X) ∈ S | s_i, θ) ≤ e^ε · P(M(X) ∈ S | s_j, θ), X drawn from θ.

    Not a :class:`PrivacyLoss`: Pufferfish privacy does not compose in general, so no
    accountant takes it; a release states it beside the loss it debits (like
    :class:`CrowdBlending`). With secrets "record i has value a" and Θ every product
    distribution it is ε-DP (Kifer & Machanavajjhala 2014, their theorem relating
    Pufferfish to differential privacy); for a smaller Θ it says nothing about data drawn
    from outside Θ.

    Parameters
    ----------
    epsilon : number
        ε ≥ 0 in nats (rounded down like every measure's).
    secrets : str
        The secret pairs, in words (e.g. "X_t = a vs X_t = b, every t, a ≠ b").
    model_class : str
        Θ's canonical text (e.g. a Markov class's description with its digest).

    Raises
    ------
    DomainError
        ε negative or not a number, or an empty description.
    """

    epsilon: Fraction
    secrets: str
    model_class: str

    def __init__(self, epsilon: Number, secrets: str, model_class: str) -> None:
        if not (isinstance(secrets, str) and secrets and isinstance(model_class, str)
                and model_class):
            raise DomainError("Pufferfish needs the secret pairs and the class Θ as text")
        object.__setattr__(self, "epsilon", _frac(epsilon, "epsilon"))
        object.__setattr__(self, "secrets", secrets)
        object.__setattr__(self, "model_class", model_class)

    def __str__(self) -> str:
        return (f"ε {_relation(self.epsilon)} {readable(self.epsilon)}-Pufferfish "
                f"(secrets: {self.secrets}; Θ: {self.model_class})")


@dataclass(frozen=True, repr=False)
class ProbabilisticDP(PrivacyLoss):
    """(ε, δ)-probabilistic differential privacy (Machanavajjhala, Kifer, Abowd, Gehrke &
    Vilhuber, "Privacy: Theory meets Practice on the Map", ICDE 2008, Def. 4).

    For every table x the outputs split into Ω₁ ∪ Ω₂ with Pr[M(x) ∈ Ω₂] ≤ δ (Ω₂, the
    disclosure set, may depend on x) and, for every neighbour x′ and every output ω ∈ Ω₁,
    e^−ε ≤ Pr[M(x) = ω] / Pr[M(x′) = ω] ≤ e^ε. The probability is over the mechanism's
    coins, for every table (not over a distribution of tables).

    Conversion: (ε, δ)-probabilistic DP ⇒ (ε, δ)-DP (:meth:`to_approx`): for any event S,
    Pr[M(x) ∈ S] ≤ Pr[M(x) ∈ S ∩ Ω₁] + δ ≤ e^ε Pr[M(x′) ∈ S] + δ (Machanavajjhala et al.
    2008, §4; Meiser 2018, "Approximate and probabilistic differential privacy
    definitions", Lemma 1). The converse does not hold, so an accountant charges the
    converted (ε, δ); composition adds both parameters (the disclosure sets' union).

    Parameters
    ----------
    epsilon : number
        ε ≥ 0 in nats.
    delta : number
        δ ∈ [0, 1]. Floats are rounded down.
    """

    epsilon: Fraction
    delta: Fraction

    def __init__(self, epsilon: Number, delta: Number) -> None:
        approx = ApproxDP(epsilon, delta)  # the same checks
        object.__setattr__(self, "epsilon", approx.epsilon)
        object.__setattr__(self, "delta", approx.delta)

    @classmethod
    def zero(cls) -> ProbabilisticDP:
        return cls(0, 0)

    def __add__(self, other: Any) -> PrivacyLoss:
        if isinstance(other, ProbabilisticDP):  # the disclosure sets' union bound
            return ProbabilisticDP(self.epsilon + other.epsilon,
                                   min(Fraction(1), self.delta + other.delta))
        if isinstance(other, PureDP | ApproxDP):
            return self.to_approx() + other
        return NotImplemented

    def __sub__(self, other: ProbabilisticDP) -> ProbabilisticDP:
        if not isinstance(other, ProbabilisticDP):
            raise MeasureError("only a probabilistic-DP loss is taken from a probabilistic-DP "
                               "budget")
        return ProbabilisticDP(max(Fraction(0), self.epsilon - other.epsilon),
                               max(Fraction(0), self.delta - other.delta))

    def __le__(self, other: Any) -> bool:
        if isinstance(other, ProbabilisticDP):
            return self.epsilon <= other.epsilon and self.delta <= other.delta
        if isinstance(other, ApproxDP):
            return self.to_approx() <= other
        if isinstance(other, PureDP | ZCDP):
            raise MeasureError("a probabilistic-DP loss does not bound a pure or zCDP loss")
        return NotImplemented

    def to_approx(self) -> ApproxDP:
        """(ε, δ)-probabilistic DP ⇒ (ε, δ)-DP (class docstring)."""
        return ApproxDP(self.epsilon, self.delta)



def rounding_note(requested: PrivacyLoss, charged: PrivacyLoss, why: str) -> str | None:
    """What a person reads when a release is charged other than the budget it asked for:
    ``"requested ρ = 0.1; charged ρ = 0.09999999999845 (1.5e-12 less): <why>"``, or None
    when the charge is exactly the request (in the charged loss's measure).

    Parameters
    ----------
    requested : PrivacyLoss
        The budget the user asked for (converted to ``charged``'s measure to compare).
    charged : PrivacyLoss
        What is debited, exact.
    why : str
        The reason, in words (e.g. noise scales rounded up to an exact sampler's grid).

    Returns
    -------
    str or None
        Each differing field at enough significant digits to tell the two apart (at most
        17), with the difference; the exact values stay in the losses themselves.

    Raises
    ------
    MeasureError
        When ``requested`` does not convert to ``charged``'s measure.
    """
    if convert(requested, type(charged)) == charged:
        return None
    wanted, spent = requested._parts(), charged._parts()
    if [n for n, _ in wanted] != [n for n, _ in spent]:  # another measure: say both
        return f"requested {requested}; charged {charged}: {why}"
    shown_asked, shown_got = [], []
    for (name, a), (_, b) in zip(wanted, spent, strict=True):
        digits = next((d for d in range(SHOWN_DIGITS, 18) if readable(a, d) != readable(b, d)),
                      17)
        shown_asked.append(f"{name} = {readable(a)}")
        if a == b:
            shown_got.append(f"{name} = {readable(b)}")
            continue
        gap = f"{readable(abs(a - b), 2)} {'less' if b < a else 'more'}"
        shown_got.append(f"{name} {_relation_at(b, digits)} {readable(b, digits)} ({gap})")
    return f"requested {', '.join(shown_asked)}; charged {', '.join(shown_got)}: {why}"


def _relation_at(v: Fraction, digits: int) -> str:
    return "=" if is_shown_exactly(v, digits) else "≈"


def convert(loss: PrivacyLoss, target: type) -> Any:
    """``loss`` in the measure ``target`` (identity, pure ⇒ zCDP / (ε, 0), or probabilistic
    (ε, δ) ⇒ (ε, δ)).

    Raises
    ------
    MeasureError
        For conversions that need a δ (zCDP ⇒ (ε, δ)) or do not exist.
    """
    if isinstance(loss, target):
        return loss
    if isinstance(loss, PureDP) and target is ZCDP:
        return loss.to_zcdp()
    if isinstance(loss, PureDP) and target is ApproxDP:
        return loss.to_approx()
    if isinstance(loss, ProbabilisticDP) and target is ApproxDP:
        return loss.to_approx()
    raise MeasureError(f"cannot convert {type(loss).__name__} to {target.__name__} without a δ")


def zcdp_to_epsilon(rho: Fraction, delta: Fraction) -> Fraction:
    """Smallest certified ε such that ρ-zCDP implies (ε, δ)-DP; rounded up.

    The better of Bun & Steinke 2016 Prop. 1.3 and Canonne, Kamath & Steinke 2020 Cor. 13;
    the latter's α is searched in floating point and the bound then evaluated at that α
    with directed rational rounding, so the result is certified whatever α the search finds.
    """
    if not 0 < delta <= 1:
        raise DomainError("delta must be in (0, 1]")
    if rho == 0:
        return Fraction(0)
    log_inv_delta = log_up(1 / delta)
    bun_steinke = rho + 2 * sqrt_up(rho * log_inv_delta)
    alpha = _best_alpha(float(rho), float(log_inv_delta))
    alpha_q = Fraction(alpha).limit_denominator(1 << 20)
    if alpha_q <= 1:
        return max(Fraction(0), bun_steinke)
    cks = alpha_q * rho + (
        log_inv_delta + (alpha_q - 1) * log_up(1 - 1 / alpha_q) - log_down(alpha_q)
    ) / (alpha_q - 1)
    return max(Fraction(0), min(bun_steinke, cks))


def largest_rho(epsilon: Fraction, delta: Fraction) -> Fraction:
    """The largest ρ (to 2^-40 relative) with ``zcdp_to_epsilon(ρ, δ) ≤ ε``, by bisection.

    Raises
    ------
    DomainError
        If no positive ρ meets (ε, δ).
    """
    lo, hi = Fraction(0), epsilon  # ρ ≤ ε always suffices as an upper end: ε(ρ) ≥ ρ
    for _ in range(48):
        mid = Fraction((lo + hi) / 2).limit_denominator(1 << 48)
        if zcdp_to_epsilon(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    if lo == 0:
        raise DomainError(f"no zCDP budget meets (ε = {float(epsilon):g}, δ = {float(delta):g})")
    return lo


def _best_alpha(rho: float, log_inv_delta: float) -> float:
    def eps(a: float) -> float:
        return a * rho + (log_inv_delta + (a - 1) * math.log1p(-1 / a) - math.log(a)) / (a - 1)

    lo, hi = 1.0 + 1e-9, max(2.0, 1 + 2 * math.sqrt(log_inv_delta / max(rho, 1e-300)))
    while eps(hi * 2) < eps(hi) and hi < 1e12:
        hi *= 2
    for _ in range(200):  # ternary search: the bound is unimodal in α
        m1, m2 = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        if eps(m1) < eps(m2):
            hi = m2
        else:
            lo = m1
    return (lo + hi) / 2
