"""The wire error table (issue 31, item 4) is defined once: every error the server answers
with is a row of :data:`dpkit.server.errors.WIRE_ERRORS` (its status from there), and the
client raises what the same row says — so a new error cannot be added to one side only."""

import ast
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from dpkit.client import ServerError, _answer  # noqa: E402
from dpkit.errors import BudgetExceededError, DomainError, LedgerError  # noqa: E402
from dpkit.server.errors import WIRE_ERRORS, ApiError, client_exception, refusal  # noqa: E402

SERVER = Path(__file__).resolve().parents[1] / "src" / "dpkit" / "server"
CLIENT = SERVER.parent / "client.py"


class _Response:
    def __init__(self, status: int, body: dict) -> None:
        self.status_code, self._body, self.text = status, body, str(body)

    def json(self) -> dict:
        return self._body


@pytest.mark.parametrize("name", sorted(WIRE_ERRORS))
def test_the_client_raises_what_the_table_says(name: str) -> None:
    row = WIRE_ERRORS[name]
    expected = client_exception(name) or ServerError
    with pytest.raises(expected) as info:
        _answer(_Response(row.status, {"error": name, "detail": "x"}))
    if expected is ServerError:
        assert info.value.status == row.status


def _named_errors(path: Path) -> list[tuple[str, int]]:
    """The names of ``ApiError("Name", ...)`` and ``_reply(send, "Name", ...)`` calls."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            index = {"ApiError": 0, "_reply": 1}.get(node.func.id)
            if index is not None and len(node.args) > index:
                arg = node.args[index]
                if isinstance(arg, ast.Constant):
                    found.append((arg.value, node.lineno))
    return found


def test_every_error_the_server_names_is_in_the_table() -> None:
    named = [(p.name, n, line) for p in sorted(SERVER.glob("*.py"))
             for n, line in _named_errors(p)]
    assert len(named) > 15  # the scan sees the routes' and the middleware's errors
    assert [x for x in named if x[1] not in WIRE_ERRORS] == []


def test_the_client_keeps_no_table_of_its_own() -> None:
    """No wire name appears in the client's code (its docstrings may name exceptions)."""
    names = {n.value for n in ast.walk(ast.parse(CLIENT.read_text()))
             if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert names & set(WIRE_ERRORS) == set()


def test_refusals_keep_their_status_and_class_name() -> None:
    assert (refusal(BudgetExceededError("ledger /x/y.sqlite: over")).status,
            refusal(BudgetExceededError("ledger /x/y.sqlite: over")).detail) == (409, "over")
    assert refusal(LedgerError("no")).status == 409
    err = refusal(DomainError("bad"))
    assert (err.status, err.error) == (422, "DomainError")
    assert refusal(ValueError("a\nb")).error == "InvalidQuery"
    assert refusal(RuntimeError("secret")).detail == "internal error"
    with pytest.raises(KeyError):
        ApiError("NoSuchError", "x")  # a name outside the table needs its status
