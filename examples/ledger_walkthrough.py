"""A ledger records every release against a dataset's lifetime cap; verify checks its hash
chain; a retired dataset takes no more releases. Runs in a temporary directory.

    python examples/ledger_walkthrough.py
"""

import tempfile
from pathlib import Path

import dpkit as dp
from dpkit.errors import BudgetExceededError

adult = dp.datasets.load_adult("train")
with tempfile.TemporaryDirectory() as tmp:
    ledger = dp.Ledger(Path(tmp) / "ledger.sqlite")
    session = dp.Session(adult, budget=dp.PureDP(1), ledger=ledger, dataset="adult")
    for _ in range(3):
        session.query().agg(dp.count()).release(epsilon=0.25)
    print("spent", ledger.spent("adult"), "of", ledger.cap("adult"))
    try:
        session.query().agg(dp.count()).release(epsilon=0.5)   # 0.75 + 0.5 > 1
    except BudgetExceededError as exc:
        print("refused:", exc)
    for release in ledger.releases("adult"):
        print(release["id"], release["time"], release["loss"], release["status"])
    print("problems:", ledger.verify())
    ledger.retire("adult")
    try:
        session.query().agg(dp.count()).release(epsilon=0.1)
    except BudgetExceededError as exc:
        print("refused:", exc)
    ledger.dispose()
