"""DP-SGD's ε at δ = 1e-5 by dpkit (certified RDP of the sampled Gaussian, and PLD through
dp-accounting) beside Opacus' RDP accountant and dp-accounting's RDP and PLD accountants.

    python bench/dpsgd_accounting.py --update-results \
        [--opacus-python /work/venv-peers-opacus/bin/python]

Opacus runs in its own venv (``pip install numpy scipy && pip install --no-deps opacus``:
its RDP analysis file is loaded by path, so torch is not needed). dp-accounting is dpkit's
optional extra and runs in this interpreter. Settings: Abadi et al. 2016 §3.1 (q = 0.01,
σ = 4, T = 10,000: the paper's moments accountant gives ε ≈ 1.26), the same with σ = 1.1,
and Opacus' README ``make_private`` call (σ = 1.1) on MNIST at batch 256 of 60,000 for 60
epochs (the batch and epochs are ours: the README gives none). No data are read.
Writes bench/results/dpsgd_accounting.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from fractions import Fraction

from outdir import add_flag, results_dir

from dpkit.core.numbers import float_up
from dpkit.core.subsampling import dpsgd_epsilon, dpsgd_noise_multiplier

DELTA = Fraction(1, 10**5)
SETTINGS = [  # name, q, σ, T, the source's published ε (None: none published)
    ("Abadi et al. 2016 §3.1", Fraction(1, 100), Fraction(4), 10_000, 1.26),
    ("Abadi's q, T with σ = 1.1", Fraction(1, 100), Fraction(11, 10), 10_000, None),
    ("Opacus README, MNIST 256/60000 × 60 epochs", Fraction(256, 60_000), Fraction(11, 10),
     60 * 60_000 // 256, None),
]
OPACUS = """
import importlib.util, json, sys, glob
path = glob.glob(sys.prefix + "/lib/python3*/site-packages/opacus/accountants/analysis/rdp.py")[0]
spec = importlib.util.spec_from_file_location("opacus_rdp", path)
rdp = importlib.util.module_from_spec(spec); spec.loader.exec_module(rdp)
alphas = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))  # Opacus' defaults
out = []
for q, sigma, steps, delta in json.loads(sys.argv[1]):
    curve = rdp.compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=alphas)
    out.append(rdp.get_privacy_spent(orders=alphas, rdp=curve, delta=delta)[0])
print(json.dumps(out))
"""


def dp_accounting_eps(q: float, sigma: float, steps: int, delta: float) -> tuple[float, float]:
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(
        q, dp_accounting.GaussianDpEvent(sigma)), steps)
    rdp = rdp_privacy_accountant.RdpAccountant().compose(event).get_epsilon(delta)
    pld = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4).compose(
        event).get_epsilon(delta)
    return rdp, pld


def opacus_eps(python: str) -> list[float] | None:
    args = [[float(q), float(s), t, float(DELTA)] for _, q, s, t, _ in SETTINGS]
    try:
        done = subprocess.run([python, "-c", OPACUS, json.dumps(args)], capture_output=True,
                              text=True, check=True, timeout=600)
    except (OSError, subprocess.SubprocessError):
        return None
    return [float(x) for x in json.loads(done.stdout)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--opacus-python", default="/work/venv-peers-opacus/bin/python")
    add_flag(ap)
    args = ap.parse_args()
    opacus = opacus_eps(args.opacus_python)
    lines = ["# DP-SGD accounting: ε at δ = 1e-5", "",
             "`python bench/dpsgd_accounting.py --update-results` (Opacus in its own venv; "
             "see the script's docstring). dpkit RDP is certified (exact integer-order "
             "formula of Mironov, Talwar & Zhang 2019 §3.3, rounded up); every other column "
             "is a float estimate. σ⁻¹: dpkit's inverse at dpkit's RDP ε.", "",
             "| setting | q | σ | T | published | dpkit RDP | dpkit PLD | dp-accounting RDP "
             "| dp-accounting PLD | Opacus RDP | σ⁻¹ (dpkit) | dpkit RDP s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, (name, q, sigma, steps, published) in enumerate(SETTINGS):
        start = time.perf_counter()
        ours = dpsgd_epsilon(steps, q, sigma, DELTA)
        seconds = time.perf_counter() - start
        ours_pld = dpsgd_epsilon(steps, q, sigma, DELTA, method="pld")
        inverse = dpsgd_noise_multiplier(ours, DELTA, steps, q)
        their_rdp, their_pld = dp_accounting_eps(float(q), float(sigma), steps, float(DELTA))
        op = "not installed" if opacus is None else f"{opacus[i]:.4f}"
        pub = "—" if published is None else f"{published}"
        lines.append(f"| {name} | {float(q):.5g} | {float(sigma):g} | {steps} | {pub} | "
                     f"{float_up(ours):.4f} | {float_up(ours_pld):.4f} | {their_rdp:.4f} | "
                     f"{their_pld:.4f} | {op} | {float(inverse):.3f} | {seconds:.2f} |")
    table = "\n".join(lines)
    print(table)
    (results_dir(args.update_results) / "dpsgd_accounting.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
