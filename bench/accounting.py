"""Composed ε of 1,000 Gaussian mechanisms (σ = 1, Δ = 1) at δ = 1e-6, by every accountant,
beside dp-accounting and OpenDP on the same inputs.

    python bench/accounting.py [--peers-python /work/peers-venv/bin/python]

basic and advanced compose per-mechanism (ε, δ) pairs (each Gaussian converted from its
ρ = 1/2 at δ/1000, resp. δ/2000 with slack δ/2); zCDP and RDP compose curves and convert once;
PLD goes through dp-accounting (dpkit's optional extra). Writes bench/results/accounting.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from fractions import Fraction
from pathlib import Path

from outdir import add_flag, results_dir

from dpkit.core import ZCDP, RenyiDP, advanced_composition, zcdp_to_epsilon
from dpkit.core.measures import ApproxDP
from dpkit.core.numbers import float_up
from dpkit.core.pld import pld_gaussian

HERE = Path(__file__).resolve().parent
K, DELTA = 1000, Fraction(1, 10**6)
RHO = Fraction(1, 2)  # one Gaussian, σ = Δ = 1


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return float_up(value.epsilon), time.perf_counter() - start


def ours() -> dict[str, tuple[float, float]]:
    def basic() -> ApproxDP:
        eps = zcdp_to_epsilon(RHO, DELTA / K)
        return ApproxDP(K * eps, DELTA)

    def advanced() -> ApproxDP:
        each = ApproxDP(zcdp_to_epsilon(RHO, DELTA / (2 * K)), DELTA / (2 * K))
        return advanced_composition(each, K, DELTA / 2)

    def rdp() -> ApproxDP:
        curve = sum([RenyiDP.from_zcdp(ZCDP(RHO))] * K, RenyiDP.zero())
        return curve.to_approx(DELTA)

    return {
        "basic": timed(basic),
        "advanced": timed(advanced),
        "zCDP": timed(lambda: ZCDP(K * RHO).to_approx(DELTA)),
        "RDP": timed(rdp),
        "PLD (dp-accounting)": timed(lambda: pld_gaussian(1.0, K, DELTA)),
    }


def references(peers_python: str) -> dict[str, tuple[float, float, str]]:
    import dp_accounting
    from dp_accounting import rdp as dpa_rdp

    refs: dict[str, tuple[float, float, str]] = {}
    start = time.perf_counter()
    acc = dpa_rdp.RdpAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(1.0), K)
    refs["RDP"] = (acc.get_epsilon(float(DELTA)), time.perf_counter() - start,
                   "dp-accounting RdpAccountant")
    start = time.perf_counter()
    pld = dp_accounting.pld.PLDAccountant()
    pld.compose(dp_accounting.GaussianDpEvent(1.0), K)
    refs["PLD (dp-accounting)"] = (pld.get_epsilon(float(DELTA)), time.perf_counter() - start,
                                   "dp-accounting PLDAccountant")
    refs["advanced"] = (float("nan"), 0.0, "— (no peer implements it)")
    refs["basic"] = (float("nan"), 0.0, "—")
    if Path(peers_python).exists():
        out = subprocess.run([peers_python, str(HERE / "peers" / "opendp_accounting.py"),
                              str(K), "1.0", str(float(DELTA))], capture_output=True, text=True)
        if out.returncode == 0:
            r = json.loads(out.stdout)
            refs["zCDP"] = (r["zcdp_epsilon"], r["seconds"], "OpenDP 0.16 zCDP → approxDP")
    return refs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers-python", default="/work/peers-venv/bin/python")
    add_flag(ap)
    args = ap.parse_args()
    mine, refs = ours(), references(args.peers_python)
    lines = ["| accountant | dpkit ε | seconds | reference | reference ε | dpkit / ref |",
             "|---|---|---|---|---|---|"]
    for name, (eps, secs) in mine.items():
        ref_eps, _, ref_name = refs.get(name, (float("nan"), 0.0, "—"))
        ratio = f"{eps / ref_eps:.9f}" if ref_eps == ref_eps else "—"
        ref_txt = f"{ref_eps:.6f}" if ref_eps == ref_eps else "—"
        lines.append(f"| {name} | {eps:.6f} | {secs:.4f} | {ref_name} | {ref_txt} | {ratio} |")
    table = "\n".join(lines)
    (results_dir(args.update_results) / "accounting.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
