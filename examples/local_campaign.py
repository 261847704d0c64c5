"""A local-DP collection campaign on Adult's education column (dpkit.local).

Every person of the UCI Adult census extract (48,842 people, train + test) is a "device"
that randomises its own education level before sending it; the collector never sees a true
value and estimates the distribution from the reports. Three protocols run side by side:

* ``auto`` (GRR or OLH by Wang et al.'s rule) over the 16 education levels, one report each;
* RAPPOR, with the education level as a string (the collector decodes against the list of
  levels, as Chrome's collector decoded against candidate URLs), over two rounds: each
  person reports again a month later, and the memoised permanent response means the second
  round costs nothing beyond the longitudinal ε∞;
* Apple's count-mean sketch.

    python examples/local_campaign.py [--epsilon 2] [--out local_campaign.png]

Prints the estimates with their 95% intervals and plots estimated vs true frequencies.
"""

from __future__ import annotations

import argparse

import numpy as np
import polars as pl

import dpkit.local as ldp
from dpkit.datasets import load_adult


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epsilon", type=float, default=2.0)
    ap.add_argument("--out", default="local_campaign.png")
    args = ap.parse_args()
    eps = args.epsilon

    education = load_adult("all")["education"].drop_nulls()
    levels = sorted(education.unique().to_list())
    values = education.to_numpy()
    n = values.size
    truth = np.array([(values == lv).mean() for lv in levels])

    # 1. a frequency oracle over the declared domain (indices of the 16 levels)
    index = {lv: i for i, lv in enumerate(levels)}
    oracle = ldp.auto(len(levels), eps)
    reports = oracle.randomize(np.array([index[v] for v in values]))
    fo = oracle.estimate(reports, postprocess="norm-sub")

    # 2. RAPPOR over the strings, two rounds by the same users (memoised permanent response)
    rappor = ldp.RAPPOR(m=64, h=2, cohorts=8, f=0.5, p=0.25, q=0.75)
    users = np.arange(n)
    first = rappor.randomize(values, users=users)
    second = rappor.randomize(values, users=users)  # same values: nothing new is revealed
    # each round is decoded on its own: the two rounds share the permanent responses, so
    # pooling them would understate the standard errors
    rp = rappor.estimate(second, levels)
    assert np.array_equal(first.cohort, second.cohort)

    # 3. Apple's count-mean sketch
    cms = ldp.CountMeanSketch(eps, k=64, m=256)
    cm = cms.estimate(cms.randomize(values), levels)

    table = pl.DataFrame({"education": levels, "true": truth,
                          oracle.name: fo["estimate"], "rappor": rp["estimate"],
                          "rappor_detected": rp["detected"], "cms": cm["estimate"],
                          "cms_ci_low": cm["ci_low"], "cms_ci_high": cm["ci_high"]})
    with pl.Config(tbl_rows=20, float_precision=4):
        print(table.sort("true", descending=True))
    print(f"\n{n:,} people; {oracle.name} and CMS at ε = {eps}; RAPPOR: one report "
          f"ε1 = {float(rappor.epsilon_one):.2f}, any number of reports of the same value "
          f"ε∞ = {float(rappor.epsilon_inf):.2f}")
    print("RAPPOR detected:", ldp.RAPPOR.detection_report(rp)["values"])

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = np.argsort(-truth)
    x = np.arange(len(levels))
    fig, ax = plt.subplots(figsize=(11, 4.5))
    ax.bar(x, truth[order], color="lightgray", label="true")
    for off, (name, col) in zip((-0.25, 0, 0.25), ((oracle.name, fo), ("rappor (round 2)", rp),
                                                   ("cms", cm)), strict=True):
        ax.errorbar(x + off, col["estimate"].to_numpy()[order],
                    yerr=1.96 * np.nan_to_num(col["std_error"].to_numpy()[order]), fmt="o",
                    ms=4, capsize=2, label=name)
    ax.set_xticks(x, [levels[i] for i in order], rotation=60, fontsize=8)
    ax.set_ylabel("frequency")
    ax.set_title(f"Adult education collected under local DP ({n:,} people)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print("plot:", args.out)


if __name__ == "__main__":
    main()
