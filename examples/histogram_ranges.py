"""Release a histogram of age once, then answer range queries from it for free.

    python examples/histogram_ranges.py
"""

import numpy as np

import dpkit as dp
import dpkit.release as rel

adult = dp.datasets.load_adult("train")
ages = adult["age"].to_numpy()
counts = np.bincount(ages - 17, minlength=74)          # one bin per age, 17–90
out = rel.release_histogram(counts, epsilon=0.5, non_negative=True)
prefix = out.answer(rel.prefix(len(counts)))           # people aged ≤ 17, ≤ 18, …
for age in (25, 40, 65):
    print(f"aged ≤ {age}: DP {prefix[age - 17]:9.1f}   true {int((ages <= age).sum()):6d}")
