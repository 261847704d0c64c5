"""A hosted stream's request takes its steps from the language registry, as a release does
(issue 31, item 4): the same step models, the same allow-list, before anything is read."""

import json

import pytest

pytest.importorskip("fastapi")

from pydantic import ValidationError  # noqa: E402

from dpkit.frame import language  # noqa: E402
from dpkit.server import protocol, streams  # noqa: E402

BODY = {"aggregation": {"agg": "count"}, "time": "day", "horizon": 10,
        "budget": {"rho": "1/4"}}


def _models(model: type) -> set[str]:
    return set(json.loads(json.dumps(model.model_json_schema())).get("$defs", {}))


def test_every_registered_step_is_in_the_stream_request() -> None:
    steps = {"".join(w.title() for w in (*tag.split("_"), "step")) for tag in language.STEPS}
    assert steps <= _models(streams.StreamRequest)
    assert steps <= _models(protocol.QueryRequest)


def test_a_step_outside_the_registry_is_refused_by_the_model() -> None:
    with pytest.raises(ValidationError):
        streams.StreamRequest.model_validate({**BODY, "steps": [{"step": "select_rows"}]})
    with pytest.raises(ValidationError):  # a registered step with a parameter it lacks
        streams.StreamRequest.model_validate(
            {**BODY, "steps": [{"step": "filter", "expr": {"col": "a"}, "rows": 1}]})
    ok = streams.StreamRequest.model_validate(
        {**BODY, "steps": [{"step": "drop_nulls", "columns": ["a"]}]})
    dumped = ok.model_dump(include={"steps"}, exclude_unset=True)["steps"]
    assert dumped == [{"step": "drop_nulls", "columns": ["a"]}]
