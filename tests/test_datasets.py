import polars as pl
import pytest

from dpkit.datasets import ADULT_COLUMNS, load_adult
from dpkit.errors import DomainError


def test_adult_splits():
    train, test = load_adult("train"), load_adult("test")
    assert train.shape == (32_561, 15) and test.shape == (16_281, 15)
    assert load_adult("all").height == 48_842
    assert list(train.columns) == list(ADULT_COLUMNS)
    assert train.schema["age"] == pl.Int64 and train.schema["sex"] == pl.String
    assert dict(train["income"].value_counts().iter_rows()) == {"<=50K": 24_720, ">50K": 7_841}
    assert dict(test["income"].value_counts().iter_rows()) == {"<=50K": 12_435, ">50K": 3_846}
    assert train.filter(pl.any_horizontal(pl.all().is_null())).height == 2_399
    assert test.filter(pl.any_horizontal(pl.all().is_null())).height == 1_221
    assert train["workclass"].null_count() == 1_836
    assert not train["sex"].str.contains(" ").any()


def test_adult_bad_split():
    with pytest.raises(DomainError):
        load_adult("validation")  # type: ignore[arg-type]
