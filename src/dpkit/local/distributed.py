"""The distributed discrete Gaussian mechanism over secure aggregation.

Source: Kairouz, Liu & Steinke, "The Distributed Discrete Gaussian Mechanism for Federated
Learning with Secure Aggregation", ICML 2021 (arXiv:2102.06387): Algorithm 1 (client) and
Algorithm 2 (server), the conditional randomized rounding and its norm bound (their
Lemma 29 / §4.1), and the privacy of a sum of discrete Gaussians (their Proposition 14 and
Theorem 1: ½ε²-concentrated DP with ε² = Δ₂²/(nσ²) + 2τd,
τ = 10 Σ_{k=1}^{n−1} e^{−2π²σ²·k/(k+1)}, σ in integer units).

Client i, with public shared randomness (the signs of the rotation, drawn once):

1. clip: x ← x·min(1, c/‖x‖₂);
2. rotate: x ← H·D·x, D random ±1 signs, H the normalised Walsh–Hadamard matrix (d padded
   with zeros to a power of two, d′);
3. scale by 1/γ and round each coordinate randomly (floor + Bernoulli(fraction)), redrawn
   until ‖x̃‖₂² ≤ Δ₂² (conditional randomized rounding);
4. add discrete Gaussian noise N_ℤ(0, σ²/γ²) per coordinate
   (:func:`dpkit.mechanisms.make_discrete_gaussian`);
5. reduce modulo m.

Secure aggregation is the protocol of Bonawitz et al. (CCS 2017, §4, with dropouts;
:mod:`dpkit.local.secagg`): the server learns only Σ_{i ∈ U} y_i mod m, U the clients whose
masked vectors arrived (at least its threshold t). It maps the residues to [−m/2, m/2),
multiplies by γ and un-rotates (D·Hᵀ). Everything after step 4 is post-processing of the
sum of the noisy integer vectors, so the protocol changes nothing in the accounting; with
dropouts the sum holds at least t clients' noise (:meth:`DistributedDiscreteGaussian.rho`,
``least=``).
"""

from __future__ import annotations

import functools
import math
import warnings
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.core import rng
from dpkit.core.measures import ZCDP
from dpkit.core.numbers import (
    Number,
    exp_up,
    integer,
    log_up,
    positive,
    sqrt_up,
    to_fraction,
)
from dpkit.core.record import NoiseRow
from dpkit.core.renamed import renamed
from dpkit.errors import DomainError
from dpkit.local.secagg import check_round, secure_sum
from dpkit.local.values import bernoulli_float
from dpkit.mechanisms.frontend import AccountantLike, charge
from dpkit.mechanisms.gaussian import make_discrete_gaussian
from dpkit.mechanisms.registry import register

__all__ = ["DistributedDiscreteGaussian", "tau_bound"]

PI_LOW = Fraction(314159265358979, 10**14)  # π > 3.14159265358979
_EXACT_TERMS = 2000  # terms of τ computed one by one; the rest bounded by the last one
_RETRIES = 64  # rounding attempts before a client sends the zero vector


def tau_bound(sigma_int: Fraction, n: int) -> Fraction:
    """An upper bound (rational) on τ = 10 Σ_{k=1}^{n−1} exp(−2π²σ²·k/(k + 1)), σ the noise
    of one client in integer units: each term rounded up with π replaced by a rational
    below it; beyond 2000 terms, each is bounded by the last computed one (the terms shrink
    with k: they fall towards exp(−2π²σ²)), and once a term's exponent is below −250 it and
    all later terms are bounded by e^-250."""
    s2 = sigma_int * sigma_int
    head = min(n - 1, _EXACT_TERMS)
    total = Fraction(0)
    term = Fraction(0)
    k = 0
    for k in range(1, head + 1):
        exponent = -2 * PI_LOW**2 * s2 * Fraction(k, k + 1)
        if exponent <= _FLOOR:  # this and every later term is ≤ e^-250: bound them by it
            return 10 * (total + (n - k) * _tiny())
        term = exp_up(exponent, 30)
        total += term
    if n - 1 > head:
        total += (n - 1 - head) * term  # later terms are smaller (k/(k + 1) grows)
    return 10 * total


_FLOOR = Fraction(-250)


@functools.lru_cache(maxsize=1)
def _tiny() -> Fraction:
    """A rational ≥ e^-250."""
    return exp_up(_FLOOR, 30)


def _audit() -> list[Any]:
    from dpkit.mechanisms.registry import AuditCase

    def sampler(sigma: Fraction) -> Any:
        mech = DistributedDiscreteGaussian(1, clip=1, scale=sigma, gamma=Fraction(1, 4),
                                           modulus=1 << 16)

        def sample(value: float, n: int) -> np.ndarray:
            """n independent runs of three clients (values: ``value``, 0, 0), vectorised:
            each run's modular sum decoded."""
            data = np.zeros((3 * n, 1))
            data[::3, 0] = value
            ints = mech.integers(data).reshape(n, 3, -1)
            return mech.decode(np.mod(ints, mech.m).sum(axis=1) % mech.m)[:, 0]

        return sample

    mech = DistributedDiscreteGaussian(1, clip=1, scale=1, gamma=Fraction(1, 4),
                                       modulus=1 << 16)
    # The sampler sums the messages mod m directly: secure aggregation's output is exactly
    # that sum (tests/test_local_secagg.py), and 30,000 protocol rounds per variant would
    # cost minutes; its own secrecy is computational, which no audit can measure (secagg).
    # the pair 0, 1 replaces client 0's vector by zero: the "zero-out" neighbours
    return [AuditCase("local_distributed_dg", mech.measurement(3, "zero-out"),
                      sampler(Fraction(1)),
                      sampler(Fraction(1, 4)), 0.0, 1.0)]


@register(audit=_audit)
class DistributedDiscreteGaussian:
    """Distributed discrete Gaussian sum of n clients' vectors (Kairouz, Liu & Steinke 2021).

    Privacy. Conditional rounding makes every client's integer vector satisfy
    ‖x̃‖₂ ≤ Δ₂ with (their Lemma 29, in integer units)

        Δ₂² = min{(c/γ + √d′)², c²/γ² + d′/4 + √(2 ln(1/β))·(c/γ + √d′/2)}

    (computed as a rational upper bound; the acceptance test compares the integer ‖x̃‖² with
    that same rational, so the bound holds exactly). The server sees a post-processing of
    Σ_i x̃_i + Z, Z a sum of n independent N_ℤ(0, σ_ℤ²)^{d′}, σ_ℤ = σ/γ. By their
    Proposition 14, for neighbouring inputs whose sums differ by at most Δ in ℓ2,
    D_α ≤ α·ρ for all α > 1 with

        ρ = Δ²/(2nσ_ℤ²) + τ·d′,   τ = 10 Σ_{k=1}^{n−1} exp(−2π²σ_ℤ²·k/(k + 1)),

    i.e. ρ-zCDP (their Theorem 1, ρ = ½ε²). Δ = 2Δ₂ when one client's vector is replaced
    by any other ("replace"), Δ₂ when it is replaced by zero ("zero-out": the client still
    adds its noise). τ is rounded up (:func:`tau_bound`), ρ is exact from there.

    Accuracy. Without modular wrap-around (every coordinate of the noisy sum in
    [−m/2, m/2)), the decoded sum's error has E‖·‖² ≤ n·d′·(γ²/4 + σ²) (rounding and noise;
    the rotation is orthogonal), up to the small bias of conditioning the rounding.

    Parameters
    ----------
    dim : int
        Dimension d of a client's vector (≥ 1).
    clip : number
        ℓ2 clipping norm c > 0 (data units).
    scale : number
        The noise's scale σ > 0, its standard deviation parameter per client per coordinate
        (data units; ``sigma=``, deprecated, is the same number, and so is the deprecated
        attribute ``.sigma``).
    gamma : number
        Rounding granularity γ > 0 (data units per integer step); σ/γ < 2^44.
    modulus : int
        m ≥ 2, the secure aggregation's modulus (int64: m ≤ 2^62).
    beta : number
        Conditional rounding's β ∈ (0, 1) (default e^{−1/2}, the paper's choice).

    Raises
    ------
    DomainError
        For a parameter outside its range.
    """

    @renamed(sigma="scale")
    def __init__(self, dim: int, clip: Number, scale: Number, gamma: Number,
                 modulus: int, beta: Number | None = None) -> None:
        self.d = integer(dim, "dim", minimum=1, maximum=1 << 24)
        self.d_pad = 1 << (self.d - 1).bit_length()
        self.clip = positive(clip, "clip")
        self.scale = positive(scale, "scale", up=False)
        self.gamma = positive(gamma, "gamma")
        self.m = integer(modulus, "modulus", minimum=2, maximum=1 << 62)
        b = Fraction(3, 5) if beta is None else to_fraction(beta)  # 3/5 ≥ e^{−1/2}: safer
        if not 0 < b < 1:
            raise DomainError(f"beta must be in (0, 1), got {beta!r}")
        self.beta = b
        self.sigma_int = self.scale / self.gamma
        if self.sigma_int >= 1 << 44:
            raise DomainError("scale/gamma must be below 2^44 (the exact sampler's range)")
        cg, d = self.clip / self.gamma, self.d_pad
        root_d = sqrt_up(Fraction(d))
        first = (cg + root_d) ** 2
        second = cg**2 + Fraction(d, 4) + sqrt_up(2 * log_up(1 / b)) * (cg + root_d / 2)
        self.delta2_sq = min(first, second)  # Δ₂², the acceptance bound and the sensitivity
        self.signs = np.where(rng.coins(self.d_pad), 1.0, -1.0)  # shared randomness D

    def __repr__(self) -> str:
        return (f"DistributedDiscreteGaussian(dim={self.d}, clip={float(self.clip):.6g}, "
                f"scale={float(self.scale):.6g}, gamma={float(self.gamma):.6g}, m={self.m})")

    @property
    def sigma(self) -> Fraction:
        """Deprecated name of :attr:`scale` (σ, the standard deviation parameter)."""
        warnings.warn("DistributedDiscreteGaussian.sigma is deprecated: use .scale",
                      DeprecationWarning, stacklevel=2)
        return self.scale

    # -- privacy ---------------------------------------------------------------------------

    def rho(self, n: int, neighbours: str = "replace", least: int | None = None) -> ZCDP:
        """ρ-zCDP of the sum of n clients (class docstring), rounded up.

        With dropouts (``least`` = ℓ: the sum holds the noise of k ∈ [ℓ, n] clients, as
        secure aggregation with threshold ℓ guarantees), ρ = Δ²/(2ℓσ_ℤ²) + τ(n)·d′, which
        bounds ρ(k) for every such k (the first term falls with k, τ grows with it).

        Raises
        ------
        DomainError
            If n < 1, ``least`` ∉ [1, n] or ``neighbours`` ∉ {"replace", "zero-out"}.
        """
        clients = integer(n, "n", minimum=1)
        fewest = clients if least is None else integer(least, "least", minimum=1,
                                                       maximum=clients)
        if neighbours not in ("replace", "zero-out"):
            raise DomainError("neighbours must be 'replace' or 'zero-out'")
        sens_sq = self.delta2_sq * (4 if neighbours == "replace" else 1)
        s2 = self.sigma_int**2
        return ZCDP(sens_sq / (2 * fewest * s2) + tau_bound(self.sigma_int, clients) * self.d_pad)

    def measurement(self, n: int, neighbours: str = "replace") -> Any:
        """The whole protocol for n clients as a Measurement on an (n, d) matrix: under
        HammingDistance (rows changed), d_in ↦ ZCDP(d_in²·ρ(n)) (group privacy of zCDP)."""
        from dpkit.core.component import Measurement
        from dpkit.core.domains import AnyDomain, VectorDomain
        from dpkit.core.metrics import HammingDistance
        from dpkit.core.numbers import non_negative

        rho = self.rho(n, neighbours).rho

        def privacy_map(d_in: Any) -> ZCDP:
            k = non_negative(d_in, "d_in")
            return ZCDP(k * k * rho)  # group privacy of zCDP: k² ρ

        return Measurement(function=self.run, input_metric=HammingDistance(),
                           output_measure=ZCDP, privacy_map=privacy_map,
                           name=f"local_distributed_dg(n={n})",
                           input_domain=VectorDomain(AnyDomain()))  # one row per client

    def mse_bound(self, n: int) -> float:
        """n·d′·(γ²/4 + σ²): the decoded sum's expected squared ℓ2 error without wrap-around."""
        return float(n * self.d_pad * (self.gamma**2 / 4 + self.scale**2))

    # -- clients ---------------------------------------------------------------------------

    def _rows(self, data: Any) -> np.ndarray:
        x = np.asarray(data, dtype=np.float64)
        x = x.reshape(1, -1) if x.ndim == 1 else x
        if x.ndim != 2 or x.shape[1] != self.d:
            raise DomainError(f"expected client vectors of shape (n, {self.d})")
        return np.where(np.isfinite(x), x, 0.0)  # NaN/inf coordinates count as 0

    def rotate(self, x: np.ndarray) -> np.ndarray:
        """H·D·x for each row (zero-padded to d′; H normalised, so the map is orthogonal)."""
        padded = np.zeros((x.shape[0], self.d_pad))
        padded[:, : self.d] = x
        return _fwht_rows(padded * self.signs) / math.sqrt(self.d_pad)

    def unrotate(self, z: np.ndarray) -> np.ndarray:
        """D·Hᵀ·z (H is symmetric and its own inverse once normalised), first d coordinates."""
        return (_fwht_rows(np.atleast_2d(z)) / math.sqrt(self.d_pad) * self.signs)[:, : self.d]

    def integers(self, data: npt.ArrayLike) -> np.ndarray:
        """Steps 1–4 for each client (rows of ``data``): the noisy integer vectors (n, d′),
        before the modular reduction. Non-finite coordinates are read as 0."""
        x = self._rows(data)
        norms = np.linalg.norm(x, axis=1)
        c = float(self.clip)
        scale = np.where(norms > c, c / np.where(norms > 0, norms, 1.0), 1.0)
        z = self.rotate(x * scale[:, None]) / float(self.gamma)
        rounded = self._round(z)
        noisy = make_discrete_gaussian(self.sigma_int)(rounded.reshape(-1))
        return np.asarray(noisy, dtype=np.int64).reshape(rounded.shape)

    def _round(self, z: np.ndarray) -> np.ndarray:
        """Conditional randomized rounding: redraw a row until ‖x̃‖² ≤ Δ₂² (exact integer
        test); after 64 failures (probability ≤ β^64) the row is the zero vector."""
        low = np.floor(z)
        frac = z - low
        base = low.astype(np.int64)
        out = np.zeros(z.shape, dtype=np.int64)
        todo = np.arange(z.shape[0])
        bound = self.delta2_sq
        for _ in range(_RETRIES):
            if not todo.size:
                break
            cand = base[todo] + bernoulli_float(frac[todo].reshape(-1)).reshape(-1, z.shape[1])
            ok = _norm_sq_at_most(cand, bound)
            out[todo[ok]] = cand[ok]
            todo = todo[~ok]
        return out

    def encode(self, data: npt.ArrayLike) -> np.ndarray:
        """What each client sends: its noisy integer vector mod m (int64 (n, d′) in [0, m))."""
        return np.mod(self.integers(data), self.m)

    # -- secure aggregation and server -----------------------------------------------------

    def aggregate(self, messages: np.ndarray, threshold: int | None = None) -> np.ndarray:
        """Secure aggregation of the clients' messages (rows): one round of
        :func:`dpkit.local.secagg.secure_sum` without dropouts; only Σ_i y_i mod m
        (int64 (d′,)) is revealed to the server.

        Raises
        ------
        DomainError
            For messages that are not an (n, d′) integer array or a threshold ∉ [1, n].
        """
        y = np.asarray(messages, dtype=np.int64) % self.m
        return secure_sum(y, self.m, threshold).total

    def decode(self, total: np.ndarray) -> np.ndarray:
        """Server: residues → [−m/2, m/2), times γ, un-rotated: the estimated sum (d,) (or
        (T, d) for T independent totals, rows of a (T, d′) array)."""
        t = np.asarray(total, dtype=np.int64) % self.m
        centred = np.where(t >= (self.m + 1) // 2, t - self.m, t).astype(np.float64)
        out = self.unrotate(centred * float(self.gamma))
        return out[0] if t.ndim == 1 else out

    def run(self, data: npt.ArrayLike) -> np.ndarray:
        """The whole protocol on an (n, d) matrix of client vectors: the estimated sum."""
        return self.decode(self.aggregate(self.encode(data)))

    def release(self, data: npt.ArrayLike, accountant: AccountantLike = None, *,
                neighbours: str = "replace", threshold: int | None = None,
                drop_before_input: tuple[int, ...] = (),
                drop_before_unmask: tuple[int, ...] = ()) -> np.ndarray:
        """The protocol for n clients with dropouts, charged through the one accountant.

        The debit is ``rho(n, neighbours, least=t)``: secure aggregation with threshold t
        refuses a sum of fewer than t clients, so at least t noises are in any sum it
        returns. Everything declared is checked before the debit; after it, the clients
        encode, the protocol runs (:func:`dpkit.local.secagg.secure_sum`) and the server
        decodes, and nothing depends on the data but the values.

        Parameters
        ----------
        data : array_like, shape (n, d)
            One row per client (data units; non-finite coordinates read as 0).
        accountant : AccountantLike
            None (unaccounted), an accountant, a filter or a Session.
        neighbours : {"replace", "zero-out"}
            The neighbouring relation (class docstring).
        threshold : int, optional
            t ∈ [1, n], default ⌊2n/3⌋ + 1.
        drop_before_input, drop_before_unmask : tuple of int
            Clients (1-based rows) that drop out after sharing their keys (their vector is
            not in the sum) or after sending it (it is); a simulation of who drops.

        Returns
        -------
        ndarray, shape (d,)
            The estimated sum of the surviving clients' clipped vectors.

        Raises
        ------
        DomainError
            For bad data shapes, parameters or drop sets (before the debit).
        ProtocolAbortError
            If fewer than t clients would remain (before the debit).
        BudgetExceededError
            Before anything runs.
        """
        x = self._rows(data)
        n = x.shape[0]
        # the protocol's checks, before the debit: nothing raises after it
        t, early, late = check_round(n, threshold, drop_before_input, drop_before_unmask)
        loss = self.rho(n, neighbours, least=t)

        def compute() -> np.ndarray:
            summed = secure_sum(self.encode(x), self.m, t, drop_before_input=early,
                                drop_before_unmask=late)
            return self.decode(summed.total)

        noise = (NoiseRow("distributed discrete Gaussian (per client)", self.scale,
                          None, "sum"),)
        return charge(accountant, loss, f"{self!r}.release(n={n}, t={t}, {neighbours})",
                      compute, noise)


def _norm_sq_at_most(v: np.ndarray, bound: Fraction) -> np.ndarray:
    """Per row, whether Σ v² ≤ bound, exactly (int64 when it cannot overflow, else Python
    integers)."""
    limit = math.floor(bound)
    big = int(np.abs(v).max(initial=0)) ** 2 * v.shape[1]
    if big < 1 << 62 and limit < 1 << 62:
        return (v * v).sum(axis=1) <= limit
    return np.array([sum(int(a) ** 2 for a in row) <= limit for row in v], dtype=bool)


def _fwht_rows(x: np.ndarray) -> np.ndarray:
    """The unnormalised Walsh–Hadamard transform of each row (float)."""
    if x.shape[1] == 1:
        return x.copy()
    out = np.array(x, dtype=np.float64)
    h = 1
    n, size = out.shape
    while h < size:
        view = out.reshape(n, -1, 2, h)
        a, b = view[:, :, 0, :].copy(), view[:, :, 1, :].copy()
        view[:, :, 0, :], view[:, :, 1, :] = a + b, a - b
        h *= 2
    return out
