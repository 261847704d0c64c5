"""Rényi differential privacy (Mironov 2017): ε(α) curves on a fixed set of orders.

A mechanism is (α, ε(α))-RDP if D_α(M(x) ‖ M(x′)) ≤ ε(α) for neighbours x, x′. dpkit keeps
the curve at a fixed tuple of orders (as dp-accounting does), exactly, so that composition is
pointwise addition (Mironov 2017, Prop. 1) and comparison pointwise.

Conversions
-----------
- ρ-zCDP ⇒ ε(α) = ρα (Bun & Steinke 2016, Def. 1.1: zCDP is RDP on every order).
- ε-DP ⇒ ε(α) = min(ε, αε²/2) (Mironov 2017 Prop. 3 and Bun & Steinke 2016 Prop. 1.4).
- RDP ⇒ (ε, δ)-DP: min over orders of ε(α) + ln((α−1)/α) − (ln δ + ln α)/(α − 1)
  (Balle, Barthe, Gaboardi, Hsu & Sato 2020, Thm 21; never worse than Mironov 2017 Prop. 3's
  ε(α) + ln(1/δ)/(α − 1), which is also checked), evaluated with certified rounding.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP
from dpkit.core.numbers import Number, fraction_down, log_down, log_up
from dpkit.errors import DomainError, MeasureError

__all__ = ["RenyiDP", "DEFAULT_ORDERS"]

DEFAULT_ORDERS: tuple[Fraction, ...] = (
    *(1 + Fraction(j, 100) for j in range(1, 100)),  # dense near 1: large total losses
    *(Fraction(a) for a in ("2", "2.25", "2.5", "2.75", "3", "3.5", "4", "4.5", "5", "6",
                            "7", "8", "10", "12", "14", "16", "20", "24", "28", "32", "40",
                            "48", "56", "64", "96", "128", "192", "256", "384", "512",
                            "768", "1024")),
)


@dataclass(frozen=True)
class RenyiDP(PrivacyLoss):
    """An RDP curve ε(α) at fixed orders α > 1.

    Parameters
    ----------
    epsilons : sequence of numbers
        ε(α) ≥ 0 in nats, one per order.
    orders : sequence of numbers, optional
        The orders α > 1 (default :data:`DEFAULT_ORDERS`).

    Raises
    ------
    DomainError
        For orders ≤ 1, negative ε, or mismatched lengths.
    """

    orders: tuple[Fraction, ...]
    epsilons: tuple[Fraction, ...]

    def __init__(self, epsilons: Iterable[Number], orders: Iterable[Number] | None = None) -> None:
        ords = tuple(DEFAULT_ORDERS if orders is None else (
            o if isinstance(o, Fraction) else fraction_down(o) for o in orders))
        eps = tuple(e if isinstance(e, Fraction) else fraction_down(e) for e in epsilons)
        if len(ords) != len(eps) or not ords:
            raise DomainError("one ε per order is required")
        if any(a <= 1 for a in ords) or any(e < 0 for e in eps):
            raise DomainError("RDP orders must exceed 1 and ε(α) must be ≥ 0")
        object.__setattr__(self, "orders", ords)
        object.__setattr__(self, "epsilons", eps)

    @classmethod
    def zero(cls, orders: Iterable[Number] | None = None) -> RenyiDP:
        ords = DEFAULT_ORDERS if orders is None else tuple(orders)
        return cls([0] * len(ords), ords)

    @classmethod
    def from_zcdp(cls, loss: ZCDP, orders: Iterable[Number] | None = None) -> RenyiDP:
        """ρ-zCDP ⇒ ε(α) = ρα on every order."""
        ords = DEFAULT_ORDERS if orders is None else tuple(fraction_down(o) for o in orders)
        return cls([loss.rho * a for a in ords], ords)

    @classmethod
    def from_pure(cls, loss: PureDP, orders: Iterable[Number] | None = None) -> RenyiDP:
        """ε-DP ⇒ ε(α) = min(ε, αε²/2)."""
        ords = DEFAULT_ORDERS if orders is None else tuple(fraction_down(o) for o in orders)
        e = loss.epsilon
        return cls([min(e, a * e * e / 2) for a in ords], ords)

    @classmethod
    def of(cls, loss: PrivacyLoss, orders: Iterable[Number] | None = None) -> RenyiDP:
        """Any loss that has an RDP curve (RDP, zCDP, pure DP)."""
        if isinstance(loss, RenyiDP):
            return loss
        if isinstance(loss, ZCDP):
            return cls.from_zcdp(loss, orders)
        if isinstance(loss, PureDP):
            return cls.from_pure(loss, orders)
        raise MeasureError(f"{type(loss).__name__} has no RDP curve")

    def _aligned(self, other: Any) -> RenyiDP:
        o = RenyiDP.of(other, self.orders)
        if o.orders != self.orders:
            raise MeasureError("RDP curves on different orders cannot be combined")
        return o

    def __add__(self, other: Any) -> PrivacyLoss:
        if not isinstance(other, RenyiDP | ZCDP | PureDP):
            return NotImplemented
        o = self._aligned(other)  # composition: pointwise sum (Mironov 2017, Prop. 1)
        return RenyiDP([a + b for a, b in zip(self.epsilons, o.epsilons, strict=True)],
                       self.orders)

    def __radd__(self, other: Any) -> PrivacyLoss:
        return self if other == 0 else self.__add__(other)

    def __sub__(self, other: Any) -> RenyiDP:
        o = self._aligned(other)
        return RenyiDP([max(Fraction(0), a - b) for a, b in zip(self.epsilons, o.epsilons,
                                                                strict=True)], self.orders)

    def __le__(self, other: Any) -> bool:
        if not isinstance(other, RenyiDP | ZCDP | PureDP):
            return NotImplemented
        o = self._aligned(other)
        return all(a <= b for a, b in zip(self.epsilons, o.epsilons, strict=True))

    def epsilon_at(self, delta: Number) -> Fraction:
        """The smallest certified ε with (ε, δ)-DP over the orders (see module docstring)."""
        dlt = fraction_down(delta)
        if not 0 < dlt < 1:
            raise DomainError("delta must be in (0, 1)")
        best = None
        log_inv_delta = log_up(1 / dlt)
        for a, e in zip(self.orders, self.epsilons, strict=True):
            mironov = e + log_inv_delta / (a - 1)
            balle = e + log_up((a - 1) / a) + (log_inv_delta - log_down(a)) / (a - 1)
            candidate = min(mironov, balle)
            best = candidate if best is None else min(best, candidate)
        assert best is not None
        return max(Fraction(0), best)

    def to_approx(self, delta: Number) -> ApproxDP:
        """(ε, δ)-DP implied by this curve."""
        return ApproxDP(self.epsilon_at(delta), fraction_down(delta))

    def __str__(self) -> str:
        pairs = ", ".join(f"{float(a):g}: {float(e):.4g}" for a, e in
                          zip(self.orders[:4], self.epsilons[:4], strict=False))
        return f"RDP {{{pairs}, …}}"
