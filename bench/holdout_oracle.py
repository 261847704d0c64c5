"""Issue 30 (1): the Thresholdout exception oracle, re-run on today's code.

``PYTHONPATH=src python bench/holdout_oracle.py``. 1,000 holdout rows (id, label); for each
id, one row function that raises on that row if and only if its label is 1. On the old
``query(f)`` the exception reached the analyst (1,000 of 1,000 labels, nothing spent); now a
row that fails counts as lo inside the mechanism, so the attacker's guesses are chance.
"""

import numpy as np

from dpkit.apps.holdout import ReusableHoldout
from dpkit.core import rng

n = 1000
labels = np.frombuffer(rng.random_bytes(n), dtype=np.uint8) % 2
ids = np.arange(n)
holdout = np.stack([ids, labels], axis=1).astype(float)
train = np.stack([ids, np.zeros(n)], axis=1).astype(float)
h = ReusableHoldout(train, holdout, epsilon=1, threshold=0.05, max_over=100, bounds=(0, 1))
correct = raised = probed = 0
for i in range(n):
    if h.exhausted:
        break  # c over-threshold answers spent: the holdout answers no more
    probed += 1

    def f(row: np.ndarray, i: int = i) -> float:
        if row[0] == i and row[1] == 1:
            raise ValueError("label 1")
        return 0.0

    try:
        h.query_rows(f)
        guess = 0
    except Exception:
        raised += 1
        guess = 1
    correct += int(guess == labels[i])
print(f"labels probed before the holdout closed: {probed}; guessed right: {correct} "
      f"(chance ≈ {probed / 2:.0f}); calls that raised: {raised}; "
      f"over-threshold answers spent: {h.over_answers}")
