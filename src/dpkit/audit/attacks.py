"""The attacks differential privacy answers, as runnable checks.

Each attack asks counting questions of a table through an *oracle*: exact answers (a plain
curator, or one that refuses small query sets), or a :class:`~dpkit.frame.Session` that
answers each count through the one accountant at a stated ε. Each returns an
:class:`AttackResult`: the attack's success rate, what guessing from the prior achieves, the
claimed ε and the bound it implies.

- :func:`differencing` — count(first t + 1 rows with the secret) − count(first t rows with
  the secret) is row t's secret bit (Dwork & Roth 2014, §1.1; the survey's count(5) −
  count(4) example).
- :func:`tracker` — Denning, Denning & Schwartz (1979), the general tracker: a server that
  answers only query sets of size in [k, n − k] still reveals q(C) = q(C ∨ T) + q(C ∨ ¬T)
  − q(T) − q(¬T) for any characteristic C, T a tracker with k + 1 ≤ |T| ≤ n − k − 1 (for |C| ≤ 1).
- :func:`reconstruction` — Dinur & Nissim (PODS 2003), LP decoding as in Dwork, McSherry &
  Talwar (STOC 2007) and Dwork & Roth §8.1: m random subset sums of a hidden bit column,
  then min Σⱼ |aⱼ − Σ_{i∈Sⱼ} xᵢ| over x ∈ [0, 1]ⁿ, rounded at 1/2.
- :func:`linkage` — re-identification on quasi-identifiers (Sweeney 2002): rows unique on
  the quasi-identifiers, and the secret of each read off a released (quasi-identifiers ×
  secret) count table.

What DP guarantees against all four: a release that is ε-DP under the rows unit is
2ε-indistinguishable for two tables that differ in one row's secret (a substitution is a
removal and an addition), so any guess g of that secret from it has balanced accuracy
(P(g = 1 | s = 1) + P(g = 0 | s = 0))/2 ≤ e^{2ε}/(1 + e^{2ε}) (Kairouz, Oh & Viswanath
2015, Thm. 2.1: P(g = 1 | s = 1) ≤ e^{ε'} P(g = 1 | s = 0) and the same for g = 0).
:attr:`AttackResult.bound` states it. :func:`audit_differencing` measures the
distinguishability directly with the threshold-attack lower bound of
:func:`~dpkit.audit.audit_release` on a pair of tables one row apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import polars as pl

from dpkit.audit.release import ReleaseAudit, audit_release
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import PureDP
from dpkit.core.metrics import HammingDistance
from dpkit.core.numbers import Number, positive
from dpkit.errors import DomainError
from dpkit.frame import KeySet, PrivacyUnit, Session, count
from dpkit.mechanisms.frontend import noisy
from dpkit.mechanisms.registry import AuditCase, register

__all__ = ["AttackResult", "Oracle", "QueryRefusedError", "exact_oracle", "restricted_oracle",
           "session_oracle", "differencing", "tracker", "reconstruction", "linkage",
           "audit_differencing", "guessing_bound"]

Oracle = Callable[[pl.Expr], float]
"""``oracle(predicate)``: the (possibly noisy) number of rows where ``predicate`` holds."""


class QueryRefusedError(Exception):
    """A query-set-size-restricted server refused a query (its only defence)."""


@dataclass(frozen=True)
class AttackResult:
    """The outcome of one attack.

    Attributes
    ----------
    attack : str
        The attack's name.
    success_rate : float
        Fraction of the targets' secrets guessed right, in [0, 1].
    balanced_success : float
        (P(g = 1 | s = 1) + P(g = 0 | s = 0))/2 over the targets (0.5 for any guess that
        ignores the answers; the quantity DP bounds).
    baseline : float
        Success rate of guessing the targets' majority secret without asking anything.
    claimed_epsilon : Fraction or None
        Total ε of the answers under the rows unit (None: exact answers).
    bound : float
        e^{2ε}/(1 + e^{2ε}), the largest balanced success any attacker can have on an
        ε-DP release (1 for exact answers).
    queries : int
        Questions asked in all.
    targets : int
        Secrets guessed.
    parameters : dict
        The run's other parameters (sizes, seeds of the attacker's own choices).
    """

    attack: str
    success_rate: float
    balanced_success: float
    baseline: float
    claimed_epsilon: Fraction | None
    bound: float
    queries: int
    targets: int
    parameters: Mapping[str, object] = field(default_factory=dict)


def guessing_bound(epsilon: Number | None) -> float:
    """e^{2ε}/(1 + e^{2ε}): the best balanced accuracy of a guess of one row's secret bit from
    an ε-DP release under the rows unit (1 for ε = None, exact answers).

    A change of one row's secret is two steps of the add/remove-one relation, so the release
    is 2ε-DP for it; by Kairouz, Oh & Viswanath (ICML 2015), Thm. 2.1, any test then has
    P(g = 1 | s = 1) ≤ e^{2ε} P(g = 1 | s = 0), whence the bound.
    """
    if epsilon is None:
        return 1.0
    return 1.0 / (1.0 + math.exp(-2 * float(epsilon)))


# -- oracles --------------------------------------------------------------------------------
def exact_oracle(table: pl.DataFrame) -> Oracle:
    """Exact counts of ``table`` (a curator with no protection)."""
    def ask(predicate: pl.Expr) -> float:
        return float(table.filter(predicate).height)
    return ask


def restricted_oracle(table: pl.DataFrame, min_size: int) -> Oracle:
    """Exact counts, but only of query sets of size in [k, n − k] (query-set-size control,
    the defence Denning et al. 1979 defeat). Raises :class:`QueryRefusedError` otherwise."""
    n = table.height

    def ask(predicate: pl.Expr) -> float:
        size = table.filter(predicate).height
        if not min_size <= size <= n - min_size:
            raise QueryRefusedError(f"query set of size {size} is outside "
                                    f"[{min_size}, {n - min_size}]")
        return float(size)
    return ask


def session_oracle(session: Session, epsilon: Number) -> Oracle:
    """Counts released by ``session`` at ``epsilon`` each (discrete Laplace, debited by its
    accountant; its privacy unit applies)."""
    def ask(predicate: pl.Expr) -> float:
        out = session.query().filter(predicate).agg(count()).release(epsilon=epsilon)
        return float(out["count"][0])
    return ask


def _oracle(table: pl.DataFrame, session: Session | None, epsilon: Number | None,
            queries: int) -> tuple[Oracle, Fraction | None]:
    """Exact answers, or ``session``'s at ε/queries each (ε the attack's total)."""
    if session is None:
        return exact_oracle(table), None
    if epsilon is None:
        raise DomainError("through a Session, give the attack's total ε > 0")
    total = positive(epsilon, "epsilon")
    return session_oracle(session, total / queries), total


def _score(attack: str, guesses: np.ndarray, truth: np.ndarray, epsilon: Fraction | None,
           queries: int, parameters: Mapping[str, object]) -> AttackResult:
    guesses, truth = np.asarray(guesses, dtype=bool), np.asarray(truth, dtype=bool)
    if truth.size == 0:
        raise DomainError("the attack has no target")
    rates = [float(np.mean(guesses[truth == s] == s)) for s in (True, False) if (truth == s).any()]
    majority = float(max(truth.mean(), 1 - truth.mean()))
    return AttackResult(attack, float(np.mean(guesses == truth)), float(np.mean(rates)),
                        majority, epsilon, guessing_bound(epsilon), queries, int(truth.size),
                        dict(parameters))


def _secret_of(table: pl.DataFrame, secret: pl.Expr, ids: Sequence[int],
               id_column: str) -> np.ndarray:
    rows = table.filter(pl.col(id_column).is_in(list(ids)))
    found = dict(zip(rows[id_column].to_list(), rows.select(secret.fill_null(False))
                     .to_series().to_list(), strict=True))
    return np.array([bool(found[i]) for i in ids])


# -- (a) differencing -----------------------------------------------------------------------
@register(audit=lambda: _audit_cases())
def differencing(table: pl.DataFrame, targets: Sequence[int], *, secret: pl.Expr,
                 id_column: str = "rid", session: Session | None = None,
                 epsilon: Number | None = None) -> AttackResult:
    """The differencing attack: two counts one row apart reveal that row's secret.

    For target t, ask a₁ = #{i ≤ t : secret(i)} and a₀ = #{i < t : secret(i)} (rows ordered
    by ``id_column``) and guess secret(t) = [a₁ − a₀ ≥ 1/2]. Exact answers give
    a₁ − a₀ = secret(t): always right.

    Parameters
    ----------
    table : polars.DataFrame, n rows
        The private table, with an integer ``id_column``.
    targets : sequence of int
        Ids whose secrets are guessed.
    secret : polars.Expr
        The hidden bit (a boolean expression, e.g. ``pl.col("income") == ">50K"``).
    id_column : str
        The rows' public order.
    session : Session, optional
        Answer through this Session (its accountant debits every count); None: exact.
    epsilon : number, optional
        With ``session``: the total ε *per target* (ε/2 per count).

    Returns
    -------
    AttackResult
        ``queries`` = 2 · len(targets).

    Raises
    ------
    DomainError
        No target, or a session without ε > 0 (before any query).
    BudgetExceededError
        The session's budget is spent (from the session).

    Notes
    -----
    Guarantee through dpkit: the two counts at ε/2 each are ε-DP under the rows unit
    (sequential composition, Dwork & Roth Thm 3.16), so the balanced success is at most
    e^{2ε}/(1 + e^{2ε}) (:func:`guessing_bound`). Source: Dwork & Roth (2014), §1.1.
    """
    ask, claim = _oracle(table, session, epsilon, 2)
    ids = [int(t) for t in targets]
    guesses = [ask((pl.col(id_column) <= t) & secret) - ask((pl.col(id_column) < t) & secret)
               >= 0.5 for t in ids]
    return _score("differencing", np.array(guesses), _secret_of(table, secret, ids, id_column),
                  claim, 2 * len(ids), {"n": table.height, "epsilon_per_target": claim})


# -- (b) tracker ----------------------------------------------------------------------------
def tracker(table: pl.DataFrame, targets: Sequence[int], *, secret: pl.Expr,
            tracker_set: pl.Expr, min_size: int, id_column: str = "rid",
            session: Session | None = None, epsilon: Number | None = None) -> AttackResult:
    """Denning's general tracker against query-set-size control.

    For target t let C = (id = t) ∧ secret. The server (exact answers) answers only query
    sets of size in [k, n − k], so q(C) ∈ {0, 1} is refused; with a tracker T,
    k + 1 ≤ |T| ≤ n − k − 1, the four sets C ∨ T, C ∨ ¬T, T, ¬T are all answered and

        q(C) = q(C ∨ T) + q(C ∨ ¬T) − q(T) − q(¬T)

    (|C ∨ T| = |T| + |C ∖ T| and |C ∨ ¬T| = |¬T| + |C ∩ T|). Guess secret(t) = [q(C) ≥ 1/2].

    Parameters
    ----------
    table : polars.DataFrame, n rows
        The private table, with an integer ``id_column``.
    targets : sequence of int
        Ids whose secrets are guessed.
    secret : polars.Expr
        The hidden bit.
    tracker_set : polars.Expr
        T, a predicate with k + 1 ≤ |T| ≤ n − k − 1 (e.g. ``pl.col("rid") < n // 2``).
    min_size : int
        k, the server's smallest answered query set (exact answers only).
    id_column : str
        The rows' identifiers (the characteristic of a target).
    session : Session, optional
        Answer through this Session (no size restriction: DP needs none); None: exact
        answers from the size-restricted server.
    epsilon : number, optional
        With ``session``: the total ε per target (ε/4 per count).

    Returns
    -------
    AttackResult
        ``parameters["direct_refused"]``: whether the server refused q(C) for every target
        (exact answers only).

    Raises
    ------
    DomainError
        T's size is outside [k + 1, n − k − 1], or a session without ε > 0 (before any query).

    Notes
    -----
    Guarantee through dpkit: four counts at ε/4 are ε-DP under the rows unit; balanced
    success ≤ e^{2ε}/(1 + e^{2ε}). Source: Denning, Denning & Schwartz, ACM TODS 4(1), 1979,
    the general tracker (their 2k ≤ |T| ≤ n − 2k for |C| ≤ k; here |C| ≤ 1).
    """
    n, size = table.height, table.filter(tracker_set).height
    if not min_size + 1 <= size <= n - min_size - 1:  # then all four sets are answered
        raise DomainError(f"|T| = {size} is outside [{min_size + 1}, {n - min_size - 1}]")
    if session is None:
        ask, claim = restricted_oracle(table, min_size), None
    else:
        ask, claim = _oracle(table, session, epsilon, 4)
    ids = [int(t) for t in targets]
    refused, guesses = 0, []
    for t in ids:
        c = (pl.col(id_column) == t) & secret
        if session is None:
            try:
                ask(c)
            except QueryRefusedError:
                refused += 1
        q = ask(c | tracker_set) + ask(c | ~tracker_set) - ask(tracker_set) - ask(~tracker_set)
        guesses.append(q >= 0.5)
    params = {"n": n, "tracker_size": size, "min_size": min_size, "epsilon_per_target": claim,
              "direct_refused": session is None and refused == len(ids)}
    return _score("tracker", np.array(guesses), _secret_of(table, secret, ids, id_column),
                  claim, 4 * len(ids), params)


# -- (c) Dinur–Nissim reconstruction --------------------------------------------------------
def lp_decode(subsets: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """LP decoding: argmin over x ∈ [0, 1]ⁿ of Σⱼ |aⱼ − (A x)ⱼ|, A the m × n 0/1 matrix.

    Variables (x, e) ∈ [0, 1]ⁿ × [0, ∞)ᵐ, minimise Σ e subject to A x − e ≤ a and
    −A x − e ≤ −a (Dwork, McSherry & Talwar 2007, §2; solved by HiGHS).
    """
    from scipy.optimize import linprog  # here: the audit's import stays light without it

    m, n = subsets.shape
    a = subsets.astype(np.float64)
    eye = np.eye(m)
    cost = np.concatenate([np.zeros(n), np.ones(m)])
    upper = np.block([[a, -eye], [-a, -eye]])
    rhs = np.concatenate([answers, -answers])
    bounds = [(0.0, 1.0)] * n + [(0.0, None)] * m
    out = linprog(cost, A_ub=upper, b_ub=rhs, bounds=bounds, method="highs")
    if not out.success:  # the LP is always feasible and bounded (x = 0, e = |a|)
        raise DomainError(f"the LP solver failed: {out.message}")
    return np.asarray(out.x[:n])


def reconstruction(table: pl.DataFrame, *, secret: pl.Expr, queries: int | None = None,
                   attacker: np.random.Generator, id_column: str = "rid",
                   session: Session | None = None,
                   epsilon: Number | None = None) -> AttackResult:
    """Dinur–Nissim reconstruction of the whole secret column by LP decoding.

    Ask m random subset sums aⱼ = #{i ∈ Sⱼ : secret(i)}, each row in Sⱼ with probability
    1/2, solve :func:`lp_decode` and guess secretᵢ = [xᵢ ≥ 1/2]. With exact answers and
    m ≥ n the LP's solution is the secret column (with high probability over the subsets);
    Dinur & Nissim show any answers within o(√n) of the truth let an attacker recover all
    but o(n) bits.

    Parameters
    ----------
    table : polars.DataFrame, n rows
        The private table, with an integer ``id_column``.
    secret : polars.Expr
        The hidden bit column.
    queries : int, optional
        m (default 4n).
    attacker : numpy.random.Generator
        The attacker's own randomness (the subsets; not the release's noise).
    id_column : str
        The rows' identifiers (the subsets name rows by them).
    session : Session, optional
        Answer through this Session; None: exact.
    epsilon : number, optional
        With ``session``: the total ε (ε/m per subset sum, composed by the accountant).

    Returns
    -------
    AttackResult
        Over all n rows.

    Raises
    ------
    DomainError
        m < 1, or a session without ε > 0 (before any query).

    Notes
    -----
    Guarantee through dpkit: m counts at ε/m each are ε-DP under the rows unit, so every
    row's balanced success is ≤ e^{2ε}/(1 + e^{2ε}). Source: Dinur & Nissim, PODS 2003,
    Theorem 2 (the polynomial-time attack); LP decoding: Dwork, McSherry & Talwar, STOC 2007;
    Dwork & Roth (2014), §8.1, Theorem 8.1.
    """
    ids = np.asarray(table[id_column].to_list())
    n = ids.size
    m = 4 * n if queries is None else queries
    if m < 1:
        raise DomainError("need at least one query")
    ask, claim = _oracle(table, session, epsilon, m)
    subsets = attacker.random((m, n)) < 0.5
    answers = np.array([ask(pl.col(id_column).is_in(ids[row].tolist()) & secret)
                        for row in subsets])
    guesses = lp_decode(subsets, answers) >= 0.5
    truth = _secret_of(table, secret, ids.tolist(), id_column)
    return _score("reconstruction", guesses, truth, claim, m,
                  {"n": n, "m": m, "epsilon_per_query": None if claim is None else claim / m})


# -- (d) linkage on quasi-identifiers -------------------------------------------------------
def linkage(table: pl.DataFrame, *, quasi_identifiers: Sequence[str], secret: pl.Expr,
            domains: Mapping[str, Sequence[object]], session: Session | None = None,
            epsilon: Number | None = None) -> AttackResult:
    """Re-identification by linkage on quasi-identifiers, then attribute disclosure.

    The curator releases the counts of every (quasi-identifier combination × secret) cell
    over the public ``domains``. The attacker knows a target's quasi-identifiers (from a
    voter list, say) and guesses their secret as the larger of the two cells of that
    combination. The targets are the rows unique on the quasi-identifiers: in an exact
    table their cell is a single person, so the guess is always right.

    Parameters
    ----------
    table : polars.DataFrame, n rows
        The private table.
    quasi_identifiers : sequence of str
        The linkable columns (e.g. age, sex, race, native-country).
    secret : polars.Expr
        The hidden bit.
    domains : mapping column → values
        The public domain of every quasi-identifier (the release's keys: a data-free
        codebook, never the table's own values).
    session : Session, optional
        Release the table through this Session (one group-by over public keys); None: exact.
    epsilon : number, optional
        With ``session``: the release's ε (the cells are disjoint: parallel composition).

    Returns
    -------
    AttackResult
        Over the rows unique on the quasi-identifiers (none of them missing);
        ``parameters["unique_fraction"]``: their share of the table.

    Raises
    ------
    DomainError
        A quasi-identifier without a domain, no unique row, or a session without ε > 0.

    Notes
    -----
    Guarantee through dpkit: the count table is ε-DP under the rows unit (each row is in one
    cell, Dwork & Roth Thm 3.6 and parallel composition), so each target's balanced success
    is ≤ e^{2ε}/(1 + e^{2ε}). Source: Sweeney, "k-anonymity", IJUFKS 10(5), 2002 (87% of the
    US population unique on ZIP, sex and date of birth).
    """
    qi = list(quasi_identifiers)
    if set(qi) - set(domains):
        raise DomainError(f"no public domain for {sorted(set(qi) - set(domains))}")
    marked = table.with_columns(secret.fill_null(False).alias("_secret"))
    sizes = marked.group_by(qi).len()
    # a row with a missing quasi-identifier links to nothing (the attacker's list has it)
    unique = marked.join(sizes.filter(pl.col("len") == 1).drop("len"), on=qi, how="semi")
    unique = unique.drop_nulls(qi)
    if unique.height == 0:
        raise DomainError("no row is unique on the quasi-identifiers")
    if session is None:
        cells, claim = marked.group_by([*qi, "_secret"]).len().rename({"len": "count"}), None
    else:
        if epsilon is None:
            raise DomainError("through a Session, give the release's ε > 0")
        claim = positive(epsilon, "epsilon")
        keys = KeySet({**{c: list(domains[c]) for c in qi}, "_secret": [False, True]})
        cells = (session.query().with_columns(secret.fill_null(False).alias("_secret"))
                 .group_by(*qi, "_secret", keys=keys).agg(count()).release(epsilon=claim))
    guesses = _read_cells(unique.select(qi), cells.select([*qi, "_secret", "count"]), qi)
    return _score("linkage", guesses, unique["_secret"].to_numpy(), claim, 1,
                  {"n": table.height, "quasi_identifiers": tuple(qi),
                   "unique_fraction": unique.height / table.height})


def _read_cells(targets: pl.DataFrame, cells: pl.DataFrame, qi: list[str]) -> np.ndarray:
    """For each target, [count(q, secret) > count(q, no secret)] (a missing cell is 0)."""
    wide = [cells.filter(pl.col("_secret") == s).drop("_secret").rename({"count": name})
            for s, name in ((True, "yes"), (False, "no"))]
    joined = targets.join(wide[0], on=qi, how="left").join(wide[1], on=qi, how="left")
    yes, no = joined["yes"].fill_null(0).to_numpy(), joined["no"].fill_null(0).to_numpy()
    return np.asarray(yes > no)


# -- distinguishability ---------------------------------------------------------------------
def audit_differencing(table: pl.DataFrame, target: int, *, secret: pl.Expr,
                       epsilon: Number, id_column: str = "rid", samples: int = 400,
                       false_positive_rate: float = 1e-6,
                       answer: Callable[[Session, Number], Oracle] = session_oracle
                       ) -> ReleaseAudit:
    """The differencing pair's distinguishability, measured through two Sessions.

    x = ``table``, x′ = ``table`` without row ``target`` (one row apart under the rows
    unit). Each sample is one run of the differencing release a₁ − a₀ (two counts at ε/2
    through a Session's accountant) on x or x′; :func:`~dpkit.audit.audit_release` certifies
    a lower bound on ε with the threshold attack, which must not exceed ε.

    Parameters
    ----------
    table : polars.DataFrame
        The private table, with an integer ``id_column``; row ``target``'s secret should
        hold (else the two tables give the same differencing answers).
    target : int
        The removed row's id.
    secret : polars.Expr
        The hidden bit.
    epsilon : number
        The claimed ε of one differencing release.
    id_column : str
        The rows' public order.
    samples : int
        Releases per table (≥ 200).
    false_positive_rate : float
        Probability that a correct release fails (the lower bound's confidence is 1 − it).
    answer : callable
        ``answer(session, ε)`` → an oracle (default :func:`session_oracle`; a test passes a
        broken one).

    Returns
    -------
    ReleaseAudit
        ``passed`` when the certified lower bound is ≤ ε.

    Raises
    ------
    DomainError
        From :func:`~dpkit.audit.audit_release`.
    """
    claim = positive(epsilon, "epsilon")
    # the sessions are the audit's instruments: each release's claim is ε, and the budget
    # only has to outlast the samples (a broken ``answer`` may spend more than ε)
    budget = PureDP(64 * claim * (samples + 1))
    neighbours = {"x": table, "x'": table.filter(pl.col(id_column) != target)}
    asks = {key: answer(Session(t, PrivacyUnit.rows(), budget), claim / 2)
            for key, t in neighbours.items()}
    upto, before = (pl.col(id_column) <= target) & secret, (pl.col(id_column) < target) & secret

    def release(key: str) -> float:  # one differencing release on x or x′
        return asks[key](upto) - asks[key](before)

    return audit_release(release, "x", "x'", float(claim), samples=samples,
                         histogram_share=0, false_positive_rate=false_positive_rate)


# -- the audit battery's case ---------------------------------------------------------------
def _audit_cases() -> list[AuditCase]:
    """Differencing, ε = 1 (ε/2 per count), on x = bits (1, 0, 1, 1, 1) and its neighbour
    without the fifth row; the output is a₁ − a₀ for the fifth row. Broken: each count's
    noise calibrated for ε = 4 while the claim stays 1."""
    eps = Fraction(1)

    def sampler(per_count: Fraction) -> Callable[[object, int], np.ndarray]:
        def sample(data: object, n: int) -> np.ndarray:
            bits = np.asarray(data, dtype=np.int64)
            a1 = noisy(np.full(n, int(bits[:5].sum())), 1, PureDP(per_count)).value
            a0 = noisy(np.full(n, int(bits[:4].sum())), 1, PureDP(per_count)).value
            return np.asarray(a1 - a0, dtype=np.float64)
        return sample

    claim = Measurement(lambda d: sampler(eps / 2)(d, 1), HammingDistance(), PureDP,
                        lambda d: PureDP(eps * d), "differencing",
                        input_domain=VectorDomain(AtomDomain(Kind.INTEGER)))
    return [AuditCase("differencing", claim, sampler(eps / 2), sampler(Fraction(4)),
                      np.array([1, 0, 1, 1, 1]), np.array([1, 0, 1, 1]))]
