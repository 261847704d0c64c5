"""Synthetic Adult records by MWEM, and how close their marginals are to the real ones.

    python examples/synthetic_adult.py
"""

import dpkit as dp
from dpkit.release.synthetic.domain import Bins
from dpkit.release.synthetic.synthesize import evaluate, synthesize

table = dp.datasets.load_adult("train").select("sex", "age", "income")
spec = {"sex": ["Female", "Male"], "income": ["<=50K", ">50K"],
        "age": Bins(tuple(range(17, 93, 5)))}    # declared: bins of 5 years, 17–92
synthetic = synthesize(table, spec, method="mwem", epsilon=1)
print(synthetic.head())
print(evaluate(table, synthetic, spec))          # total variation of the marginals
