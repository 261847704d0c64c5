"""Counts and means by sex on UCI Adult, with 95% intervals beside the true values.

    python examples/first_release.py
"""

import polars as pl

import dpkit as dp

adult = dp.datasets.load_adult("train")
session = dp.Session(adult, privacy_unit=dp.PrivacyUnit.rows(), budget=dp.PureDP(1))
query = (session.query()
         .group_by("sex", keys=["Female", "Male"])
         .agg(dp.count(), dp.mean("age", bounds=(17, 90)),
              dp.mean("hours-per-week", bounds=(1, 99))))
print(query.explain(epsilon=0.5))
released = query.release(epsilon=0.5)
truth = adult.group_by("sex").agg(pl.len().alias("true_count"),
                                   pl.col("age").mean().alias("true_age_mean"))
columns = ["sex", "count", "count_ci_low", "count_ci_high", "true_count", "age_mean",
           "age_mean_ci_low", "age_mean_ci_high", "true_age_mean"]
with pl.Config(tbl_cols=-1, tbl_width_chars=160):   # true values only: Adult is public
    print(released.join(truth, on="sex").select(columns))
print("spent", session.spent, "remaining", session.remaining)
