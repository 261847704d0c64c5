"""The SQL conformance battery on UCI Adult (issue 32), shared by tests/test_sql.py and
tests/test_sql_conformance.py: a session with a declared schema, the public table SQL may
join, each supported statement with the builder query it must equal, and each refused
statement with the span its error must point at."""

from __future__ import annotations

from fractions import Fraction
from functools import cache

import polars as pl

import dpkit as dp
from dpkit.datasets import load_adult
from dpkit.frame.language import Expr, case, col

AGE, HOURS, GAIN = (17, 90), (1, 99), (0, 50_000)
SEXES = ["Female", "Male"]
RACES = ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"]
INCOMES = ["<=50K", ">50K"]
UNIONS = ["no", "yes"]
REGIONS = pl.DataFrame({
    "native-country": ["United-States", "Canada", "Mexico", "India", "Germany"],
    "region": ["North America", "North America", "North America", "Asia", "Europe"]})
PUBLIC = {"regions": REGIONS}
SELECTION = dp.PartitionSelection(1, Fraction(1, 10**6))


@cache
def adult() -> pl.DataFrame:
    """Adult with a privacy-unit column ``pid`` (one row each) and a column named by a SQL
    keyword, ``union``."""
    df = load_adult().with_row_index("pid").with_columns(pl.col("pid").cast(pl.Int64))
    return df.with_columns(union=pl.when(pl.col("age") % 3 == 0).then(pl.lit("yes"))
                           .otherwise(pl.lit("no")))


SCHEMA = dp.Schema({
    "age": dp.Numeric(*AGE, integer=True),
    "hours-per-week": dp.Numeric(*HOURS, integer=True),
    "capital-gain": dp.Numeric(*GAIN, integer=True),  # clamps: the data reach 99,999
    "sex": dp.Categorical(SEXES),
    "race": dp.Categorical(RACES),
    "income": dp.Categorical(INCOMES),
    "union": dp.Categorical(UNIONS),
    "education": dp.Text(),
}, privacy_unit=dp.PrivacyUnit.by("pid", 1))


def session(budget: float = 1e6) -> dp.Session:
    """A fresh (ε, δ) session on Adult with the declared schema."""
    return dp.Session({"adult": adult()}, budget=dp.ApproxDP(budget, Fraction(1, 1000)),
                      schema=SCHEMA)


def _q(s):
    return s.query()


def _notnull(name):
    return {f"{name} IS NOT NULL": ~col(name).is_null()}


# (SQL, builder query of the session, options of to_query)
SUPPORTED = [
    ("SELECT COUNT(*) FROM adult", lambda s: _q(s).agg(dp.count()), {}),
    ("SELECT COUNT(*) AS n FROM adult", lambda s: _q(s).agg(dp.count(name="n")), {}),
    ("SELECT COUNT(1) n FROM adult", lambda s: _q(s).agg(dp.count(name="n")), {}),
    ("SELECT COUNT(workclass) FROM adult",
     lambda s: _q(s).with_columns(**_notnull("workclass")).agg(
         dp.sum("workclass IS NOT NULL", (0, 1), name="workclass_count")), {}),
    ("SELECT COUNT(DISTINCT pid) FROM adult", lambda s: _q(s).agg(dp.count_distinct()), {}),
    ("SELECT COUNT(DISTINCT education) AS e FROM adult",
     lambda s: _q(s).agg(dp.count_distinct("education", name="e")), {}),
    ("SELECT SUM(age) FROM adult", lambda s: _q(s).agg(dp.sum("age", AGE)), {}),
    ('SELECT SUM("capital-gain") FROM adult',
     lambda s: _q(s).agg(dp.sum("capital-gain", GAIN)), {}),
    ("SELECT AVG(age) FROM adult", lambda s: _q(s).agg(dp.mean("age", AGE)), {}),
    ('SELECT AVG("hours-per-week") AS h FROM adult',
     lambda s: _q(s).agg(dp.mean("hours-per-week", HOURS, name="h")), {}),
    ("SELECT VAR_SAMP(age) FROM adult", lambda s: _q(s).agg(dp.variance("age", AGE)), {}),
    ("SELECT VARIANCE(age) v FROM adult",
     lambda s: _q(s).agg(dp.variance("age", AGE, name="v")), {}),
    ("SELECT VAR_POP(age) FROM adult", lambda s: _q(s).agg(dp.variance("age", AGE)), {}),
    ("SELECT STDDEV(age) FROM adult", lambda s: _q(s).agg(dp.std("age", AGE)), {}),
    ("SELECT STDDEV_SAMP(age) a, STDDEV_POP(\"hours-per-week\") b FROM adult",
     lambda s: _q(s).agg(dp.std("age", AGE, name="a"),
                         dp.std("hours-per-week", HOURS, name="b")), {}),
    ("SELECT MIN(age), MAX(age) FROM adult",
     lambda s: _q(s).agg(dp.min("age", AGE), dp.max("age", AGE)), {}),
    ("SELECT MEDIAN(age) FROM adult", lambda s: _q(s).agg(dp.median("age", AGE)), {}),
    ("SELECT PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY age) AS p90 FROM adult",
     lambda s: _q(s).agg(dp.quantile("age", Fraction(9, 10), AGE, name="p90")),
     {"dialect": "postgres"}),
    ("SELECT PERCENTILE_DISC(0.1) WITHIN GROUP (ORDER BY age) FROM adult",
     lambda s: _q(s).agg(dp.quantile("age", Fraction(1, 10), AGE)), {}),
    ("SELECT QUANTILE_CONT(age, 0.25) FROM adult",
     lambda s: _q(s).agg(dp.quantile("age", Fraction(1, 4), AGE)), {}),
    ("SELECT APPROX_QUANTILES(age, 4)[OFFSET(1)] AS q1 FROM adult",
     lambda s: _q(s).agg(dp.quantile("age", Fraction(1, 4), AGE, name="q1")),
     {"dialect": "bigquery"}),
    ("SELECT percentile_approx(age, 0.5) FROM adult",
     lambda s: _q(s).agg(dp.quantile("age", Fraction(1, 2), AGE)), {"dialect": "spark"}),
    ("SELECT AVG(age * 2 + 1) FROM adult",
     lambda s: _q(s).with_columns(**{"(age * 2 + 1)": col("age") * 2 + 1}).agg(
         dp.mean("(age * 2 + 1)", (35, 181))), {}),
    ("SELECT AVG(age / 2) AS half FROM adult",
     lambda s: _q(s).with_columns(**{"(age / 2)": col("age") / 2}).agg(
         dp.mean("(age / 2)", (Fraction(17, 2), 45), name="half")), {}),
    ("SELECT SUM(CASE WHEN sex = 'Male' THEN 1 ELSE 0 END) AS males FROM adult",
     lambda s: _q(s).with_columns(**{
         "(CASE WHEN sex = 'Male' THEN 1 ELSE 0 END)": case((col("sex") == "Male", 1),
                                                            otherwise=0)}).agg(
         dp.sum("(CASE WHEN sex = 'Male' THEN 1 ELSE 0 END)", (0, 1), name="males")), {}),
    ("SELECT AVG(IF(age > 40, 1, 0)) AS share FROM adult",
     lambda s: _q(s).with_columns(**{"(CASE WHEN age > 40 THEN 1 ELSE 0 END)": case(
         (col("age") > 40, 1), otherwise=0)}).agg(
         dp.mean("(CASE WHEN age > 40 THEN 1 ELSE 0 END)", (0, 1), name="share")), {}),
    ("SELECT SUM(age > 40) AS n40 FROM adult",
     lambda s: _q(s).with_columns(**{"(age > 40)": col("age") > 40}).agg(
         dp.sum("(age > 40)", (0, 1), name="n40")), {}),
    ("SELECT AVG(LEAST(GREATEST(fnlwgt, 0), 500000)) AS w FROM adult",  # a clamp in SQL
     lambda s: _q(s).with_columns(**{"(LEAST(GREATEST(fnlwgt, 0), 500000))": Expr(
         {"op": "least", "args": [{"op": "greatest", "args": [{"col": "fnlwgt"}, {"lit": 0}]},
                                  {"lit": 500000}]})}).agg(
         dp.mean("(LEAST(GREATEST(fnlwgt, 0), 500000))", (0, 500000), name="w")), {}),
    ("SELECT SUM(LEAST(age, 50)) FROM adult",
     lambda s: _q(s).with_columns(**{"(LEAST(age, 50))": Expr(
         {"op": "least", "args": [{"col": "age"}, {"lit": 50}]})}).agg(
         dp.sum("(LEAST(age, 50))", (17, 50))), {}),
    ('SELECT COUNT(*) FROM adult WHERE GREATEST(age, "hours-per-week") > 60',
     lambda s: _q(s).filter(Expr({"op": "greatest", "args": [
         {"col": "age"}, {"col": "hours-per-week"}]}) > 60).agg(dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE age > 40",
     lambda s: _q(s).filter(col("age") > 40).agg(dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE age >= 30 AND sex = 'Female'",
     lambda s: _q(s).filter((col("age") >= 30) & (col("sex") == "Female")).agg(dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE age < 25 OR age > 60",
     lambda s: _q(s).filter((col("age") < 25) | (col("age") > 60)).agg(dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE NOT age < 30 AND age <> 45",
     lambda s: _q(s).filter(~(col("age") < 30) & (col("age") != 45)).agg(dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40",
     lambda s: _q(s).filter((col("age") >= 30) & (col("age") <= 40)).agg(dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE age NOT BETWEEN 30 AND 40",
     lambda s: _q(s).filter(~((col("age") >= 30) & (col("age") <= 40))).agg(dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE race IN ('White', 'Black')",
     lambda s: _q(s).filter(col("race").is_in("White", "Black")).agg(dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE race NOT IN ('White')",
     lambda s: _q(s).filter(~col("race").is_in("White")).agg(dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE workclass IS NULL",
     lambda s: _q(s).filter(col("workclass").is_null()).agg(dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE workclass IS NOT NULL",
     lambda s: _q(s).filter(~col("workclass").is_null()).agg(dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE education LIKE 'Bach%'",
     lambda s: _q(s).filter(col("education").like("Bach%")).agg(dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE education NOT LIKE '%grad'",
     lambda s: _q(s).filter(~col("education").like("%grad")).agg(dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE education ILIKE 'bach%'",
     lambda s: _q(s).filter(col("education").like("bach%", case_sensitive=False)).agg(
         dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE age * 2 > 100",
     lambda s: _q(s).filter(col("age") * 2 > 100).agg(dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE -age < -30",
     lambda s: _q(s).filter(0 - col("age") < -30).agg(dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE CASE WHEN age > 40 THEN 'old' ELSE 'young' END = 'old'",
     lambda s: _q(s).filter(case((col("age") > 40, "old"), otherwise="young") == "old").agg(
         dp.count()), {}),
    ("SELECT COUNT(*) /* every row */ FROM adult -- a comment\n",
     lambda s: _q(s).agg(dp.count()), {}),
    ("SELECT COUNT(*) FROM adult WHERE education = 'Bachelors—é'",
     lambda s: _q(s).filter(col("education") == "Bachelors—é").agg(dp.count()), {}),
    ("SELECT sex, COUNT(*) FROM adult GROUP BY sex",
     lambda s: _q(s).group_by("sex", keys={"sex": SEXES}).agg(dp.count()), {}),
    ("SELECT sex, race, AVG(age) FROM adult GROUP BY sex, race",
     lambda s: _q(s).group_by("sex", "race", keys={"sex": SEXES, "race": RACES}).agg(
         dp.mean("age", AGE)), {}),
    ("SELECT age >= 40 AS older, COUNT(*) FROM adult GROUP BY 1",
     lambda s: _q(s).with_columns(older=col("age") >= 40).group_by(
         "older", keys={"older": [False, True]}).agg(dp.count()), {}),
    ("SELECT CASE WHEN age < 30 THEN 'young' WHEN age < 60 THEN 'middle' ELSE 'old' END AS "
     "band, COUNT(*) AS n FROM adult GROUP BY band",
     lambda s: _q(s).with_columns(band=case((col("age") < 30, "young"),
                                            (col("age") < 60, "middle"), otherwise="old")
                                  ).group_by("band", keys={"band": ["young", "middle", "old"]}
                                             ).agg(dp.count(name="n")), {}),
    ('SELECT "union", COUNT(*) FROM adult GROUP BY "union"',
     lambda s: _q(s).group_by("union", keys={"union": UNIONS}).agg(dp.count()), {}),
    ("SELECT `union`, AVG(age) FROM adult GROUP BY `union`",
     lambda s: _q(s).group_by("union", keys={"union": UNIONS}).agg(dp.mean("age", AGE)),
     {"dialect": "spark"}),
    ('SELECT "hours-per-week" > 40 AS long, AVG(age) FROM adult GROUP BY 1',
     lambda s: _q(s).with_columns(long=col("hours-per-week") > 40).group_by(
         "long", keys={"long": [False, True]}).agg(dp.mean("age", AGE)),
     {"dialect": "postgres"}),
    ("SELECT sex AS gender, COUNT(*) n FROM adult GROUP BY sex ORDER BY n DESC",
     lambda s: _q(s).group_by("sex", keys={"sex": SEXES}).agg(dp.count(name="n")), {}),
    ("SELECT race, COUNT(*) AS n FROM adult GROUP BY race HAVING COUNT(*) > 1000 "
     "ORDER BY race LIMIT 3",
     lambda s: _q(s).group_by("race", keys={"race": RACES}).agg(dp.count(name="n")), {}),
    ("SELECT income, AVG(age) FROM adult GROUP BY income HAVING AVG(age) > 30 ORDER BY 2",
     lambda s: _q(s).group_by("income", keys={"income": INCOMES}).agg(dp.mean("age", AGE)),
     {}),
    ('SELECT region, COUNT(*) AS n FROM adult JOIN regions USING ("native-country") '
     "GROUP BY region",
     lambda s: _q(s).join(REGIONS, on="native-country", how="inner").group_by(
         "region", keys={"region": ["North America", "Asia", "Europe"]}).agg(
         dp.count(name="n")), {"public": PUBLIC}),
    ('SELECT COUNT(*) FROM adult a LEFT JOIN regions r ON a."native-country" = '
     "r.\"native-country\" WHERE r.region = 'North America'",
     lambda s: _q(s).join(REGIONS, on="native-country", how="left").filter(
         col("region") == "North America").agg(dp.count()), {"public": PUBLIC}),
    ("WITH t AS (SELECT age, sex FROM adult WHERE age > 30) "
     "SELECT sex, AVG(age) FROM t GROUP BY sex",
     lambda s: _q(s).filter(col("age") > 30).group_by("sex", keys={"sex": SEXES}).agg(
         dp.mean("age", AGE)), {}),
    ('WITH t AS (SELECT age * 2 AS a2, "hours-per-week" AS h FROM adult) '
     "SELECT AVG(a2), SUM(h) FROM t",
     lambda s: _q(s).with_columns(a2=col("age") * 2).agg(
         dp.mean("a2", (34, 180)), dp.sum("hours-per-week", HOURS)), {}),
    ("SELECT education, COUNT(*) FROM adult GROUP BY education",
     lambda s: _q(s).group_by("education", selection=SELECTION).agg(dp.count()),
     {"selection": SELECTION}),
]

# (SQL, line, column, fragment the error points at, options)
REFUSED = [
    ("SELECT COUNT(*) FROM adult UNION SELECT COUNT(*) FROM adult", 1, 28, "UNION", {}),
    ("SELECT COUNT(*) FROM adult\nINTERSECT SELECT COUNT(*) FROM adult", 2, 1, "INTERSECT",
     {}),
    ("SELECT COUNT(*) OVER () FROM adult", 1, 8, "COUNT(*)", {}),
    ("SELECT COUNT(*) FROM adult WHERE age > (SELECT AVG(age) FROM adult)", 1, 41,
     "SELECT AVG(age) FROM adult", {}),
    ("SELECT COUNT(*) FROM (SELECT * FROM adult)", 1, 23, "SELECT * FROM adult", {}),
    ("WITH t AS (SELECT COUNT(*) AS n FROM adult) SELECT SUM(n) FROM t", 1, 19, "COUNT(*)",
     {}),
    ("SELECT COUNT(*) FROM adult WHERE RANDOM() < 0.5", 1, 34, "RANDOM()", {}),
    ("SELECT COUNT(*) FROM adult WHERE now() > 1", 1, 34, "now()", {}),
    ("SELECT COUNT(*) FROM adult WHERE foo(age) > 1", 1, 34, "foo(age)", {}),
    ("SELECT COUNT(*) FROM adult a JOIN adult b ON a.pid = b.pid", 1, 35, "adult b", {}),
    ("SELECT COUNT(*) FROM adult CROSS JOIN regions", 1, 39, "regions",
     {"public": PUBLIC}),
    ('SELECT COUNT(*) FROM adult RIGHT JOIN regions USING ("native-country")', 1, 39,
     'regions USING ("native-country")', {"public": PUBLIC}),
    ("SELECT age, COUNT(*) FROM adult", 1, 8, "age", {}),
    ("SELECT * FROM adult", 1, 8, "*", {}),
    ("SELECT age FROM adult", 1, 8, "age", {}),
    ("SELECT education, COUNT(*) FROM adult GROUP BY education", 1, 48, "education", {}),
    ("SELECT AVG(fnlwgt) FROM adult", 1, 12, "fnlwgt", {}),
    ('SELECT AVG(age / "hours-per-week") FROM adult', 1, 12, 'age / "hours-per-week"', {}),
    ("SELECT SUM(DISTINCT age) FROM adult", 1, 8, "SUM(DISTINCT age)", {}),
    ("SELECT DISTINCT sex FROM adult", 1, 8, "DISTINCT", {}),
    ("SELECT COUNT(*) FROM adult LIMIT 1 OFFSET 2", 1, 36, "OFFSET", {}),
    ("SELECT sex, COUNT(*) FROM adult GROUP BY sex HAVING AVG(age) > 3", 1, 53, "AVG(age)",
     {}),
    ("SELECT SUM(age) / COUNT(*) FROM adult", 1, 8, "SUM(age) / COUNT(*)", {}),
    ("SELEC COUNT(*) FROM adult", 1, 12, "(", {}),
    ("SELECT COUNT(*) FROM adult WHERE age = 'x'", 1, 34, "age = 'x'", {}),
    ("SELECT COUNT(*) FROM adult WHERE age IN (SELECT 1)", 1, 42, "SELECT 1", {}),
    ("SELECT COUNT(*) FROM adult WHERE age = NULL", 1, 40, "NULL", {}),
    ("SELECT COUNT(*)\nFROM adult\nWHERE nosuch > 1", 3, 7, "nosuch", {}),
    ("SELECT COUNT(*) FROM nowhere", 1, 22, "nowhere", {}),
    ("SELECT COUNT(*) FROM adult WHERE union = 'yes'", 1, 38, "union", {}),  # quote it
    ("SELECT sex, COUNT(*) FROM adult GROUP BY ROLLUP (sex)", 1, 42, "ROLLUP", {}),
    ("SELECT COUNT(*) FROM adult LIMIT age", 1, 34, "age", {}),
    ("SELECT COUNT(*) FROM adult WHERE age > 30 AND", 1, 45, "AND", {}),
    ("SELECT COUNT(*) FROM adult WHERE education LIKE 'a!%' ESCAPE '!'", 1, 34,
     "education LIKE 'a!%' ESCAPE '!'", {}),
    ("SELECT MEDIAN(age) OVER (PARTITION BY sex) FROM adult", 1, 8,
     "MEDIAN(age) OVER (PARTITION BY sex)", {}),
    ("SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY AVG(age)", 1, 55, "AVG(age)", {}),
    ("SELECT SUM(LEAST(age, 50)) FROM adult", 1, 12, "LEAST(age, 50)",
     {"dialect": "bigquery"}),  # BigQuery's LEAST is null on a null argument
    ("SELECT COUNT(*) FILTER (WHERE age > 30) FROM adult", 1, 8,
     "COUNT(*) FILTER (WHERE age > 30)", {}),
    ('SELECT COUNT(*) FROM adult JOIN regions ON regions."native-country" = '
     'regions."native-country"', 1, 44, 'regions."native-country" = regions."native-country"',
     {"public": PUBLIC}),
]
