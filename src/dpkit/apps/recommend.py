"""Private recommender systems: McSherry & Mironov, "Differentially private recommender
systems: building privacy into the Netflix Prize contenders", KDD 2009.

The privacy unit is a **user**: neighbouring rating sets differ in all the ratings of one
user (added or removed). Three noisy releases, each a vector whose per-user contribution is
bounded by a weight, are composed sequentially (Dwork & Roth Thm 3.16; Bun & Steinke 2016
Lemma 2.3 for ρ):

1. **Global effect** (M&M §3.1): with v = (r − m)/h ∈ [−1, 1] (m, h the declared bounds'
   midpoint and half-width) and user weight w_u = 1/n_u (n_u the user's number of ratings),
   the pair (Σ w_u·v, Σ w_u) moves by at most 1 in each coordinate: L1 sensitivity 2,
   L2 sensitivity √2. The global mean is G = m + h·S/C.
2. **Item effects** (M&M §3.1, "per-item effects"): x = clip(r − G, −B, B)/B (B the declared
   residual clip, default half the rating range);
   per-item sums Σ_u w_u·x_ui and weights Σ_u w_u. With w_u = 1/n_u one user's part of
   each vector has L1 norm ≤ 1 (Laplace); with w_u = 1/√n_u its L2 norm is ≤ 1 (Gaussian).
   L1 sensitivity 2, L2 √2. b_i = B·S_i / (max(C_i, 0) + β_item): the stabiliser β_item
   (plus ``noise_shrinkage`` noise standard deviations) shrinks an item with little (noisy)
   weight towards the global mean (M&M's β_m).
3. **Item–item covariance** (M&M §3.2): the user's residual y = clip(r − G − b_i − b_u, −B,
   B)/B (b_u the user's own effect, a function of the user's ratings and of released
   values only) and its indicator e; Cov = Σ_u w_u·y_u y_uᵀ and Wgt = Σ_u w_u·e_u e_uᵀ (upper
   triangles, diagonal included). One user adds w_u·(Σ|y|)² ≤ w_u·n_u² in L1 and
   w_u·‖y‖² ≤ w_u·n_u in Frobenius norm, so w_u = 1/n_u² (Laplace, "the survey's Laplace
   noise on the covariance matrix") or w_u = 1/n_u (Gaussian) bound each part by 1:
   L1 sensitivity 2, L2 √2.

Each release is one call of :func:`dpkit.mechanisms.make_noise` (Laplace on the 2^k grid for
pure ε; Gaussian on the grid for ρ-zCDP), at ε·split_k or ρ·split_k. Total: ε-DP
(= Σ ε·split_k) or ρ-zCDP, debited once before anything is computed. Sums are exact: every
weighted term is cut towards zero to a multiple of 2^-30 (covariance factors √w·y to
2^-16), so the float sums are exact sums of terms no larger than the bounded ones (DESIGN
§3.3; Casacuberta et al. 2022).

Cleaning (post-processing, M&M §3.2): Ĉ = (Cov + β_cov·c̄)/(max(Wgt, 0) + β_cov), c̄ the
released average covariance, diagonal and off-diagonal apart; then two recommenders on Ĉ:
item k-nearest neighbours on the correlations Ĉ_ij/√(Ĉ_ii Ĉ_jj), and a rank-r factorisation
Ĉ ≈ V Vᵀ (top eigenpairs) with each user's factor the ridge regression of their residuals on
V (the best linear predictor under the cleaned covariance). Predictions for a user use that
user's own ratings (user effect and neighbours), as in M&M: what is released is the model.

The floor (issue 34): a guard sends every item whose released weight is at most τ noise
standard deviations to the global mean (b_i = 0), and every item pair below the same
threshold to no coupling (Ĉ_ij = 0, similarity 0), so what the noise swamps falls back to the
baseline G + b_i + b_u instead of adding noise to it. It reads released values and public
noise scales only (post-processing). With the defaults (τ = 5, ``noise_shrinkage`` = 10,
chosen on held-out users) every method is below the private global mean's RMSE on MovieLens
100K at ε = 1 and 8 (``bench/recommend_floor.py``).

Zhu et al. (the survey's ref. 86, "Differential privacy for neighborhood-based collaborative
filtering", ASONAM 2013) select neighbours with the exponential mechanism on a "truncated
similarity" score whose sensitivity they bound by the *local* sensitivity of the similarity
at the given data (their "Recommendation-Aware Sensitivity"). A local sensitivity is data
dependent, so calibrating the exponential mechanism to it is not ε-DP (Nissim, Raskhodnikova
& Smith 2007, §1.2: the noise magnitude itself leaks); the argument does not hold on
inspection, and it is not built here.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from dpkit.apps.tables import require_columns
from dpkit.core.measures import ZCDP, PrivacyLoss, PureDP
from dpkit.core.numbers import Number, integer, non_negative, positive, sqrt_up, to_fraction
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, charge

__all__ = ["Recommender", "fit_recommender", "nonprivate_recommender", "MAX_ITEMS"]

MAX_ITEMS = 8192  # the covariance is dense: n_items² floats
GUARD = 5.0  # τ, in noise standard deviations (bench/recommend_floor.py --tune, tuning users)
_UNIT = 2.0**-30  # exact-sum grid of the weighted effect terms (values ≤ 1)
_FACTOR_UNIT = 2.0**-16  # exact-sum grid of the covariance factors √w·y (≤ 1)
_METHODS = ("knn", "factor", "baseline")


@dataclass(frozen=True)
class Recommender:
    """A released recommender model (everything in it is differentially private).

    Attributes
    ----------
    global_mean : float
        G, in rating units.
    item_effects : ndarray, shape (n_items,)
        b_i, in rating units.
    covariance : ndarray, shape (n_items, n_items)
        The cleaned residual covariance Ĉ (rating units squared).
    bounds : (float, float)
        The declared rating bounds; predictions are clipped to them.
    neighbours, rank : int
        k of the item kNN, r of the factorisation.
    user_shrinkage, ridge : float
        λ of the user effect Σ(r − G − b_i)/(n_u + λ); the factor regression's ridge.
    global_statistics : ndarray, shape (2,)
        The released (noisy) weighted sum and weight of stage 1 (normalised units).
    item_statistics : ndarray, shape (2, n_items)
        The released (noisy) per-item weighted sums and weights of stage 2.
    confidence : ndarray, shape (n_items, n_items), optional
        max(Wgt, 0)/(max(Wgt, 0) + β_cov) from the released weights: the kNN similarities
        are shrunk by it (Koren's shrunk correlations), so pairs with little released
        support fall back to the baseline.
    """

    global_mean: float
    item_effects: np.ndarray
    covariance: np.ndarray
    bounds: tuple[float, float]
    neighbours: int = 30
    rank: int = 20
    user_shrinkage: float = 5.0
    ridge: float = 1.0
    global_statistics: np.ndarray | None = None
    item_statistics: np.ndarray | None = None
    confidence: np.ndarray | None = None

    @property
    def n_items(self) -> int:
        return int(self.item_effects.size)

    @cached_property
    def similarity(self) -> np.ndarray:
        """Item–item correlations of Ĉ shrunk by their released support (``confidence``),
        shape (n_items, n_items), diagonal 0 (computed once)."""
        diag = np.maximum(np.diag(self.covariance), 1e-12)
        s = np.clip(self.covariance / np.sqrt(np.outer(diag, diag)), -1.0, 1.0)
        if self.confidence is not None:
            s = s * self.confidence
        np.fill_diagonal(s, 0.0)
        return s

    @cached_property
    def factors(self) -> np.ndarray:
        """V, shape (n_items, rank): Ĉ's top eigenvectors times √eigenvalue (positive part;
        computed once). An item with no supported pair (``confidence`` 0 off the diagonal)
        has a zero row: it is left out of the eigenproblem, so its prediction is the
        baseline's (a degenerate eigenspace could otherwise mix such items)."""
        keep = np.arange(self.n_items)
        if self.confidence is not None:
            keep = np.flatnonzero((self.confidence > 0).sum(axis=1) > (
                np.diag(self.confidence) > 0))
        v = np.zeros((self.n_items, min(self.rank, keep.size)))
        if keep.size:
            vals, vecs = np.linalg.eigh(self.covariance[np.ix_(keep, keep)])
            top = np.argsort(vals)[::-1][: v.shape[1]]
            v[keep] = vecs[:, top] * np.sqrt(np.maximum(vals[top], 0.0))
        return v

    def predict(self, history: pl.DataFrame, pairs: pl.DataFrame, *, method: str = "knn",
                columns: tuple[str, str, str] = ("user", "item", "rating")) -> np.ndarray:
        """Predicted ratings for ``pairs`` (columns user, item), from each user's own
        ``history`` (user, item, rating). Post-processing of the model: spends nothing.

        Returns
        -------
        ndarray, shape (len(pairs),)
            Ratings in the declared bounds; a user without history gets G + b_i.

        Raises
        ------
        DomainError
            Unknown ``method`` ("knn", "factor" or "baseline") or items outside the model.
        ColumnError
            Missing columns.
        """
        scores, users = self._scores(history, method, columns)
        u_col, i_col = columns[0], columns[1]
        _require(pairs, (u_col, i_col))
        items = _item_index(pairs[i_col], self.n_items, strict=True)
        rows = _lookup(users, pairs[u_col].to_numpy())
        base = self.global_mean + self.item_effects[items]
        known = scores[np.maximum(rows, 0), items] if users.size else base
        out = np.where(rows >= 0, known, base)
        return np.clip(out, *self.bounds)

    def top_k(self, history: pl.DataFrame, k: int = 10, *, method: str = "knn",
              columns: tuple[str, str, str] = ("user", "item", "rating")) -> pl.DataFrame:
        """The ``k`` highest predicted items per user of ``history`` among items the user
        has not rated: a frame (user, item, rank, score), at most k rows per user."""
        k = integer(k, "k", minimum=1)
        scores, users = self._scores(history, method, columns)
        _, rated_items, _, user_rows = _matrices(history, columns, self.n_items, users)
        scores = scores.copy()
        scores[user_rows, rated_items] = -np.inf
        k = min(k, self.n_items)
        top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return pl.DataFrame({
            columns[0]: np.repeat(users, k), columns[1]: top.reshape(-1),
            "rank": np.tile(np.arange(1, k + 1), users.size),
            "score": np.take_along_axis(scores, top, 1).reshape(-1)}).filter(
                pl.col("score") > -np.inf)  # fewer than k unrated items: fewer rows

    def _scores(self, history: pl.DataFrame, method: str, columns: tuple[str, str, str]
                ) -> tuple[np.ndarray, np.ndarray]:
        """Dense (n_users, n_items) predictions for the users of ``history``."""
        if method not in _METHODS:
            raise DomainError(f"method must be one of {_METHODS}; got {method!r}")
        users, items, ratings, rows = _matrices(history, columns, self.n_items, None)
        lo, hi = self.bounds
        ratings = np.clip(ratings, lo, hi)
        resid = ratings - self.global_mean - self.item_effects[items]
        n_u = np.bincount(rows, minlength=users.size)
        b_u = np.bincount(rows, resid, minlength=users.size) / (n_u + self.user_shrinkage)
        base = self.global_mean + b_u[:, None] + self.item_effects[None, :]
        if method == "baseline":
            return base, users
        shape = (users.size, self.n_items)
        e = sp.csr_matrix((resid - b_u[rows], (rows, items)), shape=shape)
        if method == "knn":
            s = self.similarity
            k = min(self.neighbours, self.n_items - 1)
            cut = -np.partition(-s, k - 1, axis=1)[:, k - 1 : k] if k > 0 else np.inf
            s = np.where((s >= cut) & (s > 0), s, 0.0)
            mask = sp.csr_matrix((np.ones(rows.size), (rows, items)), shape=shape)
            num = np.asarray(e @ s.T)
            den = np.asarray(mask @ s.T) + 1e-9
            return base + num / (den + 1.0), users  # +1 shrinks sparse neighbourhoods
        v = self.factors
        r = v.shape[1]
        if r == 0:  # no supported pair: the baseline
            return base, users
        gram = sp.csr_matrix((np.ones(rows.size), (rows, items)), shape=shape) @ (
            v[:, :, None] * v[:, None, :]).reshape(self.n_items, r * r)
        gram = np.asarray(gram).reshape(users.size, r, r) + self.ridge * np.eye(r)
        rhs = np.asarray(e @ v)
        p = np.linalg.solve(gram, rhs[:, :, None])[:, :, 0]
        return base + p @ v.T, users


def _require(frame: Any, names: tuple[str, ...]) -> None:
    require_columns(frame, names, what="ratings", accepts=lambda t: t.is_numeric(),
                    kind="be numeric")


def _item_index(col: pl.Series, n_items: int, *, strict: bool) -> np.ndarray:
    items = col.cast(pl.Int64, strict=False).fill_null(-1).to_numpy()
    if strict and (items.size and (items.min() < 0 or items.max() >= n_items)):
        raise DomainError(f"items must be integers in [0, {n_items})")
    return items


def _lookup(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Index of each value in the sorted unique ``keys`` (−1 when absent)."""
    if keys.size == 0:
        return np.full(values.shape, -1)
    pos = np.clip(np.searchsorted(keys, values), 0, keys.size - 1)
    return np.where(keys[pos] == values, pos, -1)


def _matrices(frame: pl.DataFrame, columns: tuple[str, str, str], n_items: int,
              users: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(sorted user ids, item index, rating, user row) of the valid rows, one row per
    (user, item): duplicates averaged; rows with an item outside [0, n_items) or a missing
    rating dropped (documented, never an error)."""
    u_col, i_col, r_col = columns
    _require(frame, columns)
    df = (frame.select(pl.col(u_col).alias("u"), pl.col(i_col).cast(pl.Int64, strict=False)
                       .alias("i"), pl.col(r_col).cast(pl.Float64).alias("r"))
          .filter(pl.col("i").is_between(0, n_items - 1) & pl.col("r").is_finite()
                  & pl.col("u").is_not_null())
          .group_by("u", "i").agg(pl.col("r").mean()).sort("u", "i"))
    u = df["u"].to_numpy()
    keys = np.unique(u) if users is None else users
    return keys, df["i"].to_numpy(), df["r"].to_numpy(), np.searchsorted(keys, u)


def _budget(epsilon: Number | None, rho: Number | None, split: Any
            ) -> tuple[PrivacyLoss, list[Fraction], str]:
    if (epsilon is None) == (rho is None):
        raise DomainError("pass epsilon= (pure ε-DP, Laplace) or rho= (ρ-zCDP, Gaussian)")
    value = epsilon if rho is None else rho
    assert value is not None  # exactly one was given
    total = positive(value, "epsilon" if rho is None else "rho", up=False)
    try:
        parts = [to_fraction(s) for s in split]
    except (TypeError, ValueError):
        raise DomainError("split must be three positive numbers summing to 1") from None
    if len(parts) != 3 or any(p <= 0 for p in parts) or sum(parts) != 1:
        raise DomainError("split must be three positive numbers summing to 1 (exactly)")
    kind = "laplace" if rho is None else "gaussian"
    loss: PrivacyLoss = PureDP(total) if rho is None else ZCDP(total)
    return loss, [total * p for p in parts], kind


def _exact(values: np.ndarray, unit: float) -> np.ndarray:
    """Values cut towards zero to multiples of ``unit`` (|result| ≤ |value|)."""
    return np.trunc(values / unit) * unit


@dataclass(frozen=True)
class _Config:
    n_items: int
    lo: float
    hi: float
    neighbours: int
    rank: int
    beta_item: float
    beta_cov: float
    user_shrinkage: float
    ridge: float
    noise_shrinkage: float
    clip: float
    item_prior: float | None = None
    guard: float = 0.0


MAX_BOUND = 2.0**256  # |rating bound| and clip: their squares stay finite floats


def _config(n_items: Any, bounds: Any, neighbours: Any, rank: Any, beta_item: Any,
            beta_cov: Any, user_shrinkage: Any, ridge: Any, noise_shrinkage: Any,
            clip: Any, item_prior: Any = None, guard: Any = 0) -> _Config:
    n = integer(n_items, "n_items", minimum=2)
    if n > MAX_ITEMS:
        raise DomainError(f"n_items must be at most {MAX_ITEMS} (the covariance is dense)")
    try:
        lo, hi = float(bounds[0]), float(bounds[1])
    except (TypeError, ValueError, IndexError):
        raise DomainError("bounds must be (lower, upper) numbers") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise DomainError("bounds must be finite with lower < upper")
    if max(abs(lo), abs(hi)) > MAX_BOUND:
        raise DomainError(f"bounds must be within ±2^256 (the model squares the half-range); "
                          f"got ({lo:g}, {hi:g})")
    clip_value = (hi - lo) / 2 if clip is None else float(positive(clip, "clip"))
    if clip_value > MAX_BOUND:
        raise DomainError("clip must be at most 2^256 (the model squares it)")
    return _Config(n, lo, hi, integer(neighbours, "neighbours", minimum=1),
                   min(integer(rank, "rank", minimum=1), n),
                   float(positive(beta_item, "beta_item")), float(positive(beta_cov, "beta_cov")),
                   float(positive(user_shrinkage, "user_shrinkage")),
                   float(positive(ridge, "ridge")),
                   float(non_negative(noise_shrinkage, "noise_shrinkage")),
                   clip_value,
                   None if item_prior is None else float(positive(item_prior, "item_prior")),
                   float(non_negative(guard, "guard")))


def fit_recommender(ratings: pl.DataFrame, *, n_items: int, bounds: tuple[Number, Number],
                    epsilon: Number | None = None, rho: Number | None = None,
                    accountant: AccountantLike = None,
                    split: Any = (Fraction(1, 10), Fraction(2, 5), Fraction(1, 2)),
                    neighbours: int = 30, rank: int = 20, beta_item: float = 1.0,
                    beta_cov: float = 1.0, user_shrinkage: float = 5.0, ridge: float = 1.0,
                    noise_shrinkage: float = 10.0, clip: float | None = None,
                    item_prior: float | None = None, guard: float = GUARD,
                    columns: tuple[str, str, str] = ("user", "item", "rating")
                    ) -> Recommender:
    """Fit McSherry & Mironov's private recommender (module docstring: the algorithm, its
    sensitivities and the privacy argument).

    Parameters
    ----------
    ratings : polars.DataFrame
        One row per rating: user id (any numeric), item index in [0, n_items), rating.
        Rows with an item outside the universe or a missing/non-finite rating are dropped,
        duplicate (user, item) rows averaged, ratings clipped to ``bounds`` — per-user
        transformations, documented, never an error.
    n_items : int
        The declared item universe (public), 2 ≤ n_items ≤ MAX_ITEMS.
    bounds : (lower, upper)
        The declared rating range (public), finite, within ±2^256.
    epsilon, rho : number
        Exactly one: ε (pure ε-DP, nats; Laplace) or ρ (ρ-zCDP; Gaussian).
    accountant : Session, PrivacyFilter, Accountant or None
        Charged the total once before anything is computed.
    split : three numbers summing to 1
        The budget's shares for the global effect, the item effects and the covariance.
    neighbours, rank : int
        k of the item kNN; r of the factorisation (post-processing).
    beta_item, beta_cov : float
        The stabilisers (M&M's β_m, β_p), in weight units (public hyper-parameters).
    noise_shrinkage : float
        Each stabiliser is raised by this many standard deviations of its release's noise
        (public: the noise scale is), so a noisier release shrinks more.
    clip : float, optional
        C: residuals r − G and r − G − b_i − b_u are clipped to [−C, C] (default: half the
        rating range); the sensitivities above hold with B replaced by C.
    item_prior : float, optional
        τ > 0, the prior standard deviation of the item effects (rating units, public):
        b_i = C·S_i·Ĉ/(Ĉ² + β_item·Ĉ + (σC/τ)²) with Ĉ = max(released weight, 0) and σ
        the noise's standard deviation — the empirical-Bayes shrinkage of a N(0, τ²) prior
        (post-processing). None: M&M's b_i = C·S_i/(Ĉ + β_item + noise_shrinkage·σ).
    user_shrinkage, ridge : float
        The user effect's λ and the factor regression's ridge (post-processing).
    guard : float
        τ ≥ 0, in noise standard deviations σ_k of the release (public): an item whose
        released weight is ≤ τ·σ₂ gets b_i = 0 (it predicts the global mean G, plus the
        user's own effect), and an item pair whose released weight is ≤ τ·σ₃ gets
        Ĉ_ij = 0 and no kNN similarity (a weak diagonal entry is c̄); an item with no
        supported pair is left out of the factorisation. The decision reads released values
        and public scales only: post-processing, nothing more is debited. Default 5 (with
        ``noise_shrinkage`` 10), chosen on held-out tuning users of MovieLens 100K
        (``bench/recommend_floor.py``); on the other users every method's test RMSE is
        below the private global mean's at ε = 1 and 8 (``bench/results/recommend_floor.md``).
        A measured floor, not a theorem: where the guard falls back the prediction is
        exactly the baseline's G + b_i + b_u. 0 keeps every item and pair (the old model).

    Returns
    -------
    Recommender
        The released model; privacy: ε-DP or ρ-zCDP for add/remove of one user's ratings.

    Raises
    ------
    DomainError, ColumnError
        Bad parameters or frame schema, before any debit.
    BudgetExceededError
        The accountant cannot pay (nothing computed).
    """
    cfg = _config(n_items, bounds, neighbours, rank, beta_item, beta_cov, user_shrinkage,
                  ridge, noise_shrinkage, clip, item_prior, guard)
    loss, budgets, kind = _budget(epsilon, rho, split)
    _require(ratings, columns)
    n_cov = cfg.n_items * (cfg.n_items + 1) // 2
    # a vector whose per-user part has L1 norm ≤ 2 (Laplace) or L2 norm ≤ √2 (Gaussian)
    sens, as_loss = ((Fraction(2), PureDP) if kind == "laplace" else
                     (sqrt_up(Fraction(2)), ZCDP))
    planned = [(frontend.calibrate(sens, as_loss(b), output="grid", size=size), stat)
               for b, size, stat in
               zip(budgets, (2, 2 * cfg.n_items, 2 * n_cov),
                   ("global effect", "item effects", "covariance"), strict=True)]
    rows = [frontend.row_of(m, stat) for m, stat in planned]
    description = (f"apps.recommend(McSherry-Mironov, {kind}, {loss}, n_items={cfg.n_items}, "
                   f"bounds=({cfg.lo:g}, {cfg.hi:g}), unit=user)")
    noises = [m for m, _ in planned]
    stds = [float(r.scale or 0) * (np.sqrt(2.0) if kind == "laplace" else 1.0) for r in rows]

    def compute() -> Recommender:
        with np.errstate(all="ignore"):  # an overflow to ±inf is clipped, never printed
            return _fit(ratings, columns, cfg, kind, lambda k, v: np.asarray(noises[k](v)),
                        stds)

    return charge(accountant, loss, description, compute, rows)


def nonprivate_recommender(ratings: pl.DataFrame, *, n_items: int,
                           bounds: tuple[Number, Number], kind: str = "gaussian",
                           neighbours: int = 30, rank: int = 20, beta_item: float = 1.0,
                           beta_cov: float = 1.0, user_shrinkage: float = 5.0,
                           ridge: float = 1.0, clip: float | None = None,
                           columns: tuple[str, str, str] = ("user", "item", "rating")
                           ) -> Recommender:
    """The same pipeline without noise (**not private**): the baseline of the benchmark.
    ``kind`` picks the weights ("laplace": 1/n_u and 1/n_u²; "gaussian": 1/√n_u, 1/n_u)."""
    if kind not in ("laplace", "gaussian"):
        raise DomainError("kind must be 'laplace' or 'gaussian'")
    cfg = _config(n_items, bounds, neighbours, rank, beta_item, beta_cov, user_shrinkage,
                  ridge, 0, clip)
    return _fit(ratings, columns, cfg, kind, lambda k, v: v, [0.0, 0.0, 0.0])


def _fit(ratings: pl.DataFrame, columns: tuple[str, str, str], cfg: _Config, kind: str,
         noisy: Any, stds: list[float]) -> Recommender:
    users, items, r, rows = _matrices(ratings, columns, cfg.n_items, None)
    lo, hi = cfg.lo, cfg.hi
    r = np.clip(r, lo, hi)
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    n_users, n = users.size, cfg.n_items
    n_u = np.maximum(np.bincount(rows, minlength=n_users), 1).astype(np.float64)
    # 1. global effect, weights 1/n_u
    w1 = _weight(n_u, kind, 0)[rows]
    g = noisy(0, np.array([_exact(w1 * (r - mid) / half, _UNIT).sum(),
                           _exact(w1, _UNIT).sum()]))
    glob = float(np.clip(mid + half * g[0] / max(g[1], 1.0), lo, hi))
    # 2. item effects
    w2 = _weight(n_u, kind, 1)[rows]
    clip = cfg.clip
    x = np.clip(r - glob, -clip, clip) / clip
    sums = np.bincount(items, _exact(w2 * x, _UNIT), minlength=n)
    wts = np.bincount(items, _exact(w2, _UNIT), minlength=n)
    out = item_out = noisy(1, np.concatenate([sums, wts]))
    weight = np.maximum(out[n:], 0.0)
    if cfg.item_prior is None:
        beta = cfg.beta_item + cfg.noise_shrinkage * stds[1]
        b_i = clip * out[:n] / (weight + beta)
    else:  # empirical-Bayes shrinkage: a N(0, τ²) prior on b_i, noise std σ on S
        kappa = (stds[1] * clip / cfg.item_prior) ** 2
        b_i = clip * out[:n] * weight / (weight**2 + cfg.beta_item * weight + kappa + 1e-300)
    # the guard: an item whose released support is below its noise falls back to G
    b_i = np.where(weight > cfg.guard * stds[1], np.clip(b_i, -clip, clip), 0.0)
    # 3. covariance of the residuals, weights 1/n_u² (Laplace) or 1/n_u (Gaussian)
    resid = r - glob - b_i[items]
    b_u = np.bincount(rows, resid, minlength=n_users) / (n_u + cfg.user_shrinkage)
    y = np.clip(resid - b_u[rows], -clip, clip) / clip
    root_w = _weight(n_u, kind, 2)[rows]
    shape = (n_users, n)
    z = sp.csr_matrix((_exact(root_w * y, _FACTOR_UNIT), (rows, items)), shape=shape)
    e = sp.csr_matrix((_exact(root_w, _FACTOR_UNIT), (rows, items)), shape=shape)
    upper = np.triu_indices(n)
    cov = np.asarray((z.T @ z).todense())[upper]
    wgt = np.asarray((e.T @ e).todense())[upper]
    out = noisy(2, np.concatenate([cov, wgt]))
    beta = cfg.beta_cov + cfg.noise_shrinkage * stds[2]
    c, confidence = _clean(out[: upper[0].size], out[upper[0].size :], upper, n, beta,
                           cfg.guard * stds[2])
    return Recommender(glob, b_i, c * clip**2, (lo, hi), cfg.neighbours, cfg.rank,
                       cfg.user_shrinkage, cfg.ridge, np.asarray(g, dtype=np.float64),
                       np.asarray(item_out, dtype=np.float64).reshape(2, n), confidence)


def _weight(n_u: np.ndarray, kind: str, stage: int) -> np.ndarray:
    """Per-user weights (module docstring): 1/n_u for the global effect; 1/n_u (Laplace) or
    1/√n_u (Gaussian) for the item effects; the covariance's √w, 1/n_u or 1/√n_u."""
    if stage == 0 or kind == "laplace":
        return 1.0 / n_u
    return 1.0 / np.sqrt(n_u)


def _clean(cov: np.ndarray, wgt: np.ndarray, upper: tuple[np.ndarray, np.ndarray], n: int,
           beta: float, floor: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Ĉ = (Cov + β·c̄)/(max(Wgt, 0) + β), c̄ the average covariance (diagonal and
    off-diagonal apart), mirrored to a symmetric (n, n) matrix (M&M §3.2); and the
    confidence max(Wgt, 0)/(max(Wgt, 0) + β). The guard: an entry whose released weight is
    at most ``floor`` (τ noise standard deviations) is c̄ on the diagonal and 0 off it, its
    confidence 0, so the pair adds nothing to the baseline."""
    diag = upper[0] == upper[1]
    avg = np.empty_like(cov)
    weight = np.maximum(wgt, 0.0)
    for part in (diag, ~diag):
        avg[part] = cov[part].sum() / max(weight[part].sum(), 1e-12)
    vals = (cov + beta * avg) / (weight + beta)
    weak = weight <= floor if floor > 0 else np.zeros(weight.shape, dtype=bool)
    vals = np.where(weak, np.where(diag, avg, 0.0), vals)
    vals[diag] = np.maximum(vals[diag], 1e-6)
    confidence = np.where(weak, 0.0, weight / (weight + beta))
    return _mirror(vals, upper, n), _mirror(confidence, upper, n)


def _mirror(vals: np.ndarray, upper: tuple[np.ndarray, np.ndarray], n: int) -> np.ndarray:
    c = np.zeros((n, n))
    c[upper] = vals
    return c + np.triu(c, 1).T
