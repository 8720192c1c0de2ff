"""domain.schemas and the transitions that apply a tool's args_schema (issue 16, item 2)."""

from __future__ import annotations

import socket
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import JsonValue, ValidationError

from signoff.domain.decisions import Approve
from signoff.domain.principals import Principal
from signoff.domain.requests import ApprovalRequest
from signoff.domain.schemas import (
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_STEPS,
    args_problem,
    check_args_schema,
    sendable_schema,
)
from signoff.domain.submission import NewRequest, build_request
from signoff.domain.transitions import apply_decision, claim, refuse_claim
from signoff.errors import ArgsMismatch, InvalidDecision, InvalidTransition

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = Principal(name="alice", role="approver")
AGENT = Principal(name="agent", role="agent")

SHELL: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
    "required": ["command"],
    "additionalProperties": False,
}


def shell_call(schema: dict[str, JsonValue] | None = SHELL) -> ApprovalRequest:
    """A pending ``shell`` call whose tool schema is ``schema``."""
    new = NewRequest(
        session_id="s", tool_name="shell", tool_args={"command": "ls"}, args_schema=schema
    )
    request = build_request(new, requested_by="agent", now=NOW)
    assert isinstance(request, ApprovalRequest)
    return request


@pytest.mark.parametrize(
    ("args", "where"),
    [
        ({"command": ["rm", "-rf", "/"]}, "args/command"),
        ({}, "'command' is a required property"),
        ({"command": "ls", "shell": True}, "Additional properties"),
        ({"command": "ls", "timeout": "soon"}, "args/timeout"),
    ],
)
def test_args_problem_names_what_breaks_the_schema(args: dict[str, JsonValue], where: str) -> None:
    """Args that break the schema get one line saying where and why."""
    problem = args_problem(SHELL, args)
    assert problem is not None
    assert where in problem
    assert "\n" not in problem


def test_args_that_fit_or_no_schema_have_no_problem() -> None:
    """Fitting args, and any args without a schema, pass."""
    assert args_problem(SHELL, {"command": "ls", "timeout": 3}) is None
    assert args_problem(None, {"command": ["anything"]}) is None


def test_a_remote_ref_is_never_fetched(monkeypatch: pytest.MonkeyPatch) -> None:
    """A $ref outside the schema fails closed without opening a connection."""

    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("validation tried to reach the network")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    problem = args_problem({"$ref": "https://example.com/schema.json"}, {"command": "ls"})
    assert problem is not None
    assert "cannot be applied" in problem


def test_a_schema_that_refers_to_itself_without_end_fails_closed() -> None:
    """{"$ref": "#"} cannot be applied; the args count as not fitting."""
    problem = args_problem({"$ref": "#"}, {"command": "ls"})
    assert problem is not None


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"type": "nope"}, "not a valid JSON Schema"),
        ({"properties": {"a": {"$ref": "http://example.com/x"}}}, "only refer inside itself"),
        ({"properties": {"a": {"minLength": -1}}}, "not a valid JSON Schema"),
        ({"properties": {"a": {"pattern": "^(a+)+$"}}}, "regular expressions"),
        ({"patternProperties": {"^x": {}}}, "regular expressions"),
        ({"enum": ["x" * 1000] * (MAX_SCHEMA_BYTES // 1000 + 1)}, "the limit is"),
    ],
)
def test_check_args_schema_refuses_bad_schemas(schema: dict[str, JsonValue], why: str) -> None:
    """Invalid, outside-pointing and oversized schemas are refused with one line."""
    with pytest.raises(ValueError, match=why):
        check_args_schema(schema)


def test_a_branching_schema_ends_as_a_misfit_within_its_budget() -> None:
    """anyOf doubling through shared $refs (2**30 paths) stops at the step budget, quickly."""
    defs: dict[str, JsonValue] = {
        f"a{n}": {"anyOf": [{"$ref": f"#/$defs/a{n + 1}"}, {"$ref": f"#/$defs/a{n + 1}"}]}
        for n in range(30)
    }
    defs["a30"] = {"type": "string"}
    bomb: dict[str, JsonValue] = {"$defs": defs, "$ref": "#/$defs/a0"}
    check_args_schema(bomb)
    started = time.monotonic()
    problem = args_problem(bomb, {"command": "ls"})
    assert problem is not None and f"more than {MAX_SCHEMA_STEPS} steps" in problem
    assert time.monotonic() - started < 5


def test_unique_items_is_checked_on_short_arrays_only() -> None:
    """uniqueItems finds duplicates, and a very long array is a misfit, not a long stall."""
    schema: dict[str, JsonValue] = {"properties": {"l": {"uniqueItems": True}}}
    assert args_problem(schema, {"l": [{"a": 1}, {"a": 2}]}) is None
    assert args_problem(schema, {"l": [{"a": 1}, {"a": 1}]}) is not None
    long: list[JsonValue] = [{"a": n} for n in range(5000)]
    assert args_problem(schema, {"l": long}) is not None


def test_sendable_schema_takes_regular_expressions_out() -> None:
    """pattern keywords are removed; a property named pattern stays."""
    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"p": {"type": "string", "pattern": "^(a+)+$"}, "pattern": {}},
        "patternProperties": {"^x": {}},
        "default": None,
    }
    assert sendable_schema(schema) == {
        "type": "object",
        "properties": {"p": {"type": "string"}, "pattern": {}},
        "default": None,
    }


def test_a_deep_schema_is_refused() -> None:
    """A schema nested past the depth limit is refused at submit."""
    deep: dict[str, JsonValue] = {"type": "object"}
    for _ in range(40):
        deep = {"type": "object", "properties": {"a": deep}}
    with pytest.raises(ValidationError, match="nests deeper"):
        NewRequest(session_id="s", tool_name="t", args_schema=deep)


def test_args_schema_is_for_approval_requests_only() -> None:
    """A choice request with args_schema is refused."""
    with pytest.raises(ValidationError, match="args_schema is not a field of choice"):
        NewRequest(session_id="s", kind="choice", prompt="p", options=["a"], args_schema=SHELL)


def test_the_schema_is_stored_on_the_request() -> None:
    """build_request keeps args_schema on the approval request."""
    assert shell_call().args_schema == SHELL


def test_approving_an_edit_that_breaks_the_schema_is_refused() -> None:
    """An edit from a string to a list is InvalidDecision; nothing changes."""
    with pytest.raises(InvalidDecision, match="edited arguments do not fit"):
        apply_decision(shell_call(), Approve(args={"command": ["rm", "-rf", "/"]}), ALICE, NOW)


def test_the_agents_own_proposal_is_not_checked() -> None:
    """Approving the proposal as it is never meets the schema (its framework validates it);
    an edit back to the proposal is no edit either."""
    request = shell_call().model_copy(update={"tool_args": {"command": 1}})
    assert apply_decision(request, Approve(), ALICE, NOW).request.status == "approved"
    same = Approve(args={"command": 1})
    approved = apply_decision(request, same, ALICE, NOW).request
    assert isinstance(approved, ApprovalRequest)
    assert claim(approved, {"command": 1}, AGENT, NOW).request.status == "executing"


@pytest.mark.parametrize(
    "schema",
    [
        None,
        [],
        {},
        {"$ref": "https://example.com/x"},
        {"enum": ["x" * MAX_SCHEMA_BYTES]},
        {"const": float("nan")},
        {"default": object()},
    ],
)
def test_sendable_schema_leaves_out_what_signoff_would_refuse(schema: object) -> None:
    """An integration sends no schema rather than one that would fail the submit."""
    assert sendable_schema(schema) is None


def test_sendable_schema_keeps_a_good_schema() -> None:
    """A valid schema is sent as plain JSON."""
    assert sendable_schema(SHELL) == SHELL


def test_an_edit_that_fits_is_approved_and_without_schema_anything_is() -> None:
    """A fitting edit is approved; with no schema an edit is not checked (as before)."""
    fit = apply_decision(shell_call(), Approve(args={"command": "pwd"}), ALICE, NOW)
    assert fit.request.status == "approved"
    loose = apply_decision(shell_call(None), Approve(args={"command": ["x"]}), ALICE, NOW)
    assert loose.request.status == "approved"


def approved_unchecked(args: dict[str, JsonValue]) -> ApprovalRequest:
    """A call approved with ``args`` before the schema was checked (e.g. by an old server)."""
    request = apply_decision(shell_call(None), Approve(args=args), ALICE, NOW).request
    assert isinstance(request, ApprovalRequest)
    return request.model_copy(update={"args_schema": SHELL})


def test_a_claim_of_args_that_break_the_schema_is_refused() -> None:
    """claim refuses approved args that do not fit; refuse_claim fails the call unrun."""
    bad: dict[str, JsonValue] = {"command": ["rm", "-rf", "/"]}
    request = approved_unchecked(bad)
    with pytest.raises(InvalidDecision, match="must not run"):
        claim(request, bad, AGENT, NOW)
    change = refuse_claim(request, bad, AGENT, NOW)
    assert change.request.status == "failed"
    assert isinstance(change.request, ApprovalRequest)
    assert change.request.result is not None
    assert change.request.result.error is not None
    assert "not run" in change.request.result.error
    assert change.request.claimed_by is None
    assert change.audit.action == "fail"


def test_refuse_claim_fails_only_what_claim_refuses_for_the_schema() -> None:
    """Fitting args, other args than approved, or a pending call are not failed."""
    good = approved_unchecked({"command": "ls"})
    with pytest.raises(InvalidTransition, match="nothing to refuse"):
        refuse_claim(good, {"command": "ls"}, AGENT, NOW)
    with pytest.raises(ArgsMismatch):
        refuse_claim(good, {"command": ["x"]}, AGENT, NOW)
    with pytest.raises(InvalidTransition):
        refuse_claim(shell_call(), {"command": "ls"}, AGENT, NOW)
