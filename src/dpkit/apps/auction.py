"""A digital-goods auction by the exponential mechanism: private, approximately truthful.

Source: McSherry & Talwar, *Mechanism Design via Differential Privacy*, FOCS 2007 (§3: the
exponential mechanism and its privacy theorem; the digital-goods auction as its
application); Dwork & Roth §3.4 (Thm 3.10, Thm 3.11) and §10.1 (approximate truthfulness).

n bidders each report a bid b_i ∈ [0, max_price]. A single price p is drawn from a public,
finite set P of prices with probability ∝ exp(Rev(p)/s), Rev(p) = p · #{i : b_i ≥ p}; every
bidder with b_i ≥ p buys at p (unlimited supply: everyone who can pay is served).

Privacy: changing one bid from b to b′ < b lowers Rev(p) by p for the prices in (b′, b] and
leaves the others unchanged (and the reverse for b′ > b); adding or removing a bidder does
the same. So every score moves by at most Δ = max P, all in the same direction, and the
monotone form of the exponential mechanism applies: with the one calibrated selection
entry (:func:`dpkit.mechanisms.make_selection`, ``monotonic=True``, s = Δ/ε) the price is
ε-DP (the exponential mechanism's privacy theorem, McSherry & Talwar 2007; Dwork & Roth
Thm 3.10, in its monotone form: the normaliser and the chosen weight cannot move in
opposite directions, so the factor 2 is not needed).

Truthfulness: for a fixed price, bidding one's value v is a dominant strategy, so a
bidder's expected utility under any misreport b′ is E_{b′}[(v − p)·1{b′ ≥ p}] ≤
E_{b′}[(v − p)⁺] ≤ e^ε · E_v[(v − p)⁺] = e^ε · (expected utility when truthful): no
misreport gains more than a factor e^ε (McSherry & Talwar 2007, §2; Dwork & Roth
§10.1). Revenue: with probability 1 − e^{−t}, Rev(p) ≥ OPT_P − (Δ/ε)(ln |P| + t), OPT_P
the best fixed price in P (Dwork & Roth Thm 3.11, at the monotone temperature); with P a
fine grid, OPT_P is within n × (grid step) of the best price overall.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.core import numbers, rng
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import PureDP
from dpkit.core.metrics import HammingDistance
from dpkit.core.numbers import Number
from dpkit.errors import DomainError
from dpkit.mechanisms import CalibratedNoise, frontend, make_selection
from dpkit.mechanisms.frontend import AccountantLike, charge, check_accountant
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["AuctionResult", "digital_goods_auction", "revenue_scores", "price_grid",
           "price_distribution", "audit_cases"]

MAX_PRICES = 100_000


@dataclass(frozen=True)
class AuctionResult:
    """The outcome of a digital-goods auction.

    Attributes
    ----------
    price : float
        The posted price p (ε-DP).
    winners : ndarray of bool, shape (n,)
        Who buys: b_i ≥ p (each bidder's own outcome; not a private release of the others).
    revenue : float
        p × the number of winners.
    epsilon : Fraction
        The price's ε.
    """

    price: float
    winners: np.ndarray
    revenue: float
    epsilon: Fraction


def price_grid(max_price: Number, steps: int = 100) -> list[Fraction]:
    """``steps`` evenly spaced prices max_price/steps, 2·max_price/steps, …, max_price
    (exact Fractions; public, chosen before the bids are seen)."""
    top = numbers.positive(max_price, "max_price")
    k = numbers.integer(steps, "steps", minimum=1)
    if k > MAX_PRICES:
        raise DomainError(f"at most {MAX_PRICES} prices")
    return [top * i / k for i in range(1, k + 1)]


def _check_prices(prices: Any) -> list[Fraction]:
    try:
        exact = sorted({numbers.to_fraction(p) for p in prices})
    except (TypeError, ValueError):
        raise DomainError("prices must be finite numbers") from None
    if not exact or exact[0] <= 0:
        raise DomainError("prices must be a non-empty set of positive numbers")
    if len(exact) > MAX_PRICES:
        raise DomainError(f"at most {MAX_PRICES} prices")
    return exact


def _check_bids(bids: Any) -> np.ndarray:
    try:
        arr = np.asarray(bids, dtype=np.float64)
    except (TypeError, ValueError):
        raise DomainError("bids must be numbers") from None
    if arr.ndim != 1:
        raise DomainError("bids must be a 1-D array, one bid per bidder")
    return arr


def revenue_scores(bids: np.ndarray, prices: list[Fraction]) -> list[Fraction]:
    """Rev(p) = p · #{i : b_i ≥ float(p)} for each price, exactly (NaN bids count as 0, so
    they never buy). One bid moves each count by at most 1, so Rev(p) by at most p.
    Vectorised counts; one Fraction product per price."""
    clean = np.sort(np.nan_to_num(bids, nan=0.0))
    cuts = np.array([float(p) for p in prices])
    counts = clean.size - np.searchsorted(clean, cuts, side="left")
    return [p * int(c) for p, c in zip(prices, counts, strict=True)]


@register(audit=lambda: audit_cases())  # the audit battery's case(s)
def digital_goods_auction(bids: npt.ArrayLike, *, epsilon: Number,
                          prices: npt.ArrayLike | None = None,
                          max_price: Number = 1, accountant: AccountantLike = None
                          ) -> AuctionResult:
    """Post one price for unlimited goods by the exponential mechanism on revenue.

    Parameters
    ----------
    bids : array-like, shape (n,)
        Each bidder's bid, in the units of the prices (NaN never buys).
    epsilon : number
        ε (nats) of the price (charged once).
    prices : sequence of numbers, optional
        The public candidate prices P (positive); default :func:`price_grid` of
        ``max_price`` with 100 steps.
    max_price : number
        The largest price when ``prices`` is not given.
    accountant : Accountant, PrivacyFilter, Session or None
        Charged PureDP(ε) before the bids are read.

    Returns
    -------
    AuctionResult
        The price, who buys (b_i ≥ float(p)), the revenue.

    Raises
    ------
    DomainError
        ε ≤ 0, an empty, non-positive or oversized price set, bids that are not a 1-D
        numeric array, a bad accountant — all before anything is debited.

    Notes
    -----
    Privacy map: substitute-one (or add/remove-one) bidders ↦ PureDP(ε): the exponential
    mechanism on monotone scores of sensitivity Δ = max P at temperature Δ/ε (McSherry &
    Talwar 2007; module docstring). Approximate truthfulness: no misreport raises a
    bidder's expected utility by more than a factor e^ε. Revenue ≥ OPT_P − (Δ/ε)(ln |P| + t)
    with probability 1 − e^{−t} (Dwork & Roth Thm 3.11).
    """
    rng.require_secure()
    eps = numbers.positive(epsilon, "epsilon", up=False)
    grid = price_grid(max_price) if prices is None else _check_prices(prices)
    arr = _check_bids(bids)
    check_accountant(accountant)
    selection = make_selection(grid[-1], eps, monotonic=True)
    rows = (frontend.row_of(selection, "revenue of each price"),)

    def compute() -> AuctionResult:
        index = int(selection(revenue_scores(arr, grid)))
        price = grid[index]
        winners = np.nan_to_num(arr, nan=0.0) >= float(price)
        return AuctionResult(float(price), winners, float(price) * int(winners.sum()), eps)

    return charge(accountant, PureDP(eps), f"digital goods auction: {len(grid)} prices, "
                  f"max {float(grid[-1])}", compute, rows)


def price_distribution(bids: npt.ArrayLike, *, epsilon: Number, prices: npt.ArrayLike | None = None,
                       max_price: Number = 1) -> tuple[np.ndarray, np.ndarray]:
    """The exact law of the posted price (floats): (prices, probabilities). Reads the bids
    without noise: for analysis of public or synthetic bids (benchmarks, tests), never for
    a release."""
    eps = numbers.positive(epsilon, "epsilon", up=False)
    grid = price_grid(max_price) if prices is None else _check_prices(prices)
    scale = frontend.selection_row(grid[-1], eps, monotonic=True).scale
    assert scale is not None
    scores = np.array([float(r / scale) for r in revenue_scores(_check_bids(bids), grid)])
    weights = np.exp(scores - scores.max())
    return np.array([float(p) for p in grid]), weights / weights.sum()


def audit_cases() -> list[AuditCase]:
    """The auction's audit case: ε = 1, prices {1/4, 1/2, 3/4, 1}, 6 bidders; the neighbour
    changes one bid from 1 to 0.9: Rev(1) drops by Δ = 1 and no other revenue moves (the
    worst case of a monotone shift). Broken: the temperature for Δ = 1/4 (the smallest
    price instead of the largest) while the claim stays ε = 1."""
    prices = [Fraction(i, 4) for i in range(1, 5)]
    x = np.array([1.0, 1.0, 1.0, 0.5, 0.5, 0.5])
    x_prime = np.array([0.9, 1.0, 1.0, 0.5, 0.5, 0.5])
    good = make_selection(1, 1, monotonic=True)

    def sampler(selection: CalibratedNoise) -> Sampler:
        return lambda bids, n: np.asarray(
            frontend.draw(selection, revenue_scores(np.asarray(bids), prices), size=n))

    claim = Measurement(lambda b: sampler(good)(b, 1), HammingDistance(), PureDP,
                        lambda d: PureDP(Fraction(d)), "digital_goods_auction",
                        input_domain=VectorDomain(AtomDomain(Kind.FLOAT, nan=True)))
    broken = make_selection(Fraction(1, 4), 1, monotonic=True)  # a quarter of the noise
    return [AuditCase("digital_goods_auction", claim, sampler(good), sampler(broken),
                      x, x_prime)]
