"""domain.built: records made without validating again are the records validation makes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel, Field

from signoff.domain.built import filled, json_copy, replaced
from signoff.domain.previews import FilePreview
from signoff.domain.requests import ApprovalRequest, RequestAdapter
from signoff.domain.submission import NewRequest, build_request
from signoff.domain.terms import Terms, settle

NOW = datetime(2026, 1, 1, tzinfo=UTC)

SUBMITS: list[dict[str, Any]] = [
    {"session_id": "s", "tool_name": "shell", "tool_args": {"command": "ls", "n": [1, 2.5]}},
    {
        "session_id": "s",
        "tool_name": "write_file",
        "tool_args": {"path": "a.txt", "content": "x", "nested": {"deep": [None, True]}},
        "tool_call_id": "call_1",
        "editable": False,
        "args_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "context": {"why": ["tidy", {"up": 1}]},
        "idempotency_key": "key-1",
        "expires_in": 30,
    },
    {"session_id": "s", "tool_name": "noop"},
    {
        "session_id": "s",
        "kind": "choice",
        "prompt": "which?",
        "options": ["a", "b"],
        "multi_select": True,
        "default_choice": "a",
        "on_expire": "default",
    },
    {
        "session_id": "s",
        "kind": "questions",
        "prompt": "tell me",
        "questions": ["name?", {"id": "age", "text": "age?", "required": True}],
        "default_answers": {"q1": "x"},
        "on_expire": "default",
        "allowed_decisions": ["answer", "reject"],
    },
]


def validated(model: BaseModel) -> BaseModel:
    """``model`` as validation makes it from its own fields (its defaults left unset)."""
    fields = {name: getattr(model, name) for name in model.model_fields_set}
    return type(model)(**fields)


@pytest.mark.parametrize("body", SUBMITS)
def test_a_built_request_is_the_validated_one(body: dict[str, Any]) -> None:
    """Every kind of new request, built unvalidated, equals the request validation makes of
    the same fields, field for field and type for type, with the same fields set; and its
    JSON form reads back to it."""
    new = NewRequest.model_validate(body)
    preview = None
    if new.tool_name == "write_file":
        preview = FilePreview(path="a.txt", old="", new="x", diff="+x", exists=False)
    terms = Terms(on_expire="default", expires_in=60)
    request = build_request(
        new,
        requested_by="agent",
        now=NOW,
        approvers=("alice", "bob"),
        quorum=2,
        policy_note="rule 1",
        preview=preview,
        settled=settle(
            new.kind,
            terms,
            expires_in=new.expires_in,
            on_expire=new.on_expire,
            allowed_decisions=new.allowed_decisions,
        ),
    )
    again = validated(request)
    assert request == again
    # the same fields in the same order: stored and sent byte for byte as validation's
    assert RequestAdapter.dump_json(request) == RequestAdapter.dump_json(again)
    assert request.model_fields_set == again.model_fields_set
    for name in type(request).model_fields:
        assert type(getattr(request, name)) is type(getattr(again, name)), name
    assert RequestAdapter.validate_json(RequestAdapter.dump_json(request)) == request


def test_a_built_request_shares_no_json_with_the_submit() -> None:
    """The request's JSON values are its own: changing the submitted body's containers
    afterwards changes nothing the request holds."""
    new = NewRequest(
        session_id="s",
        tool_name="shell",
        tool_args={"argv": ["ls"], "env": {"A": "1"}},
        context={"k": ["v"]},
        args_schema={"type": "object"},
    )
    request = build_request(new, requested_by="agent", now=NOW)
    assert isinstance(request, ApprovalRequest)
    assert new.tool_args is not None and isinstance(new.context, dict)
    new.tool_args["argv"].append("-la")  # type: ignore[union-attr]
    new.tool_args["env"]["B"] = "2"  # type: ignore[index,call-overload]
    new.context["k"].append("w")  # type: ignore[union-attr]
    assert request.tool_args == {"argv": ["ls"], "env": {"A": "1"}}
    assert request.context == {"k": ["v"]}


def test_replaced_is_model_copy() -> None:
    """``replaced`` makes what ``model_copy(update=...)`` makes, fields set included, and
    leaves the original as it was."""
    request = build_request(
        NewRequest(session_id="s", tool_name="shell", tool_args={"a": 1}),
        requested_by="agent",
        now=NOW,
    )
    changes: dict[str, Any] = {"status": "approved", "version": 2, "grant_id": "g"}
    ours, theirs = replaced(request, **changes), request.model_copy(update=changes)
    assert ours == theirs
    assert ours.model_fields_set == theirs.model_fields_set
    assert request.status == "pending" and "grant_id" not in request.model_fields_set


def test_filled_refuses_a_default_factory() -> None:
    """A default made by a factory would be one object shared by every record ``filled``
    builds: refused, naming the field."""

    class Listed(BaseModel):
        items: list[int] = Field(default_factory=list)

    with pytest.raises(TypeError, match=r"Listed\.items has a default_factory"):
        filled(Listed)


def test_filled_refuses_missing_and_unknown_fields() -> None:
    """A record short of a required field, or with a field its class lacks, is not built."""
    missing = r"missing fields \['allowed_decisions', 'created_at', 'id'"
    with pytest.raises(TypeError, match=missing):
        filled(ApprovalRequest, tool_name="shell")
    with pytest.raises(TypeError, match=r"unknown fields \['colour'\]"):
        filled(FilePreview, path="a", old="", new="", diff="", exists=None, colour="red")


def test_json_copy_copies_containers_and_keeps_scalars() -> None:
    """New dicts and lists at every depth, equal to the original."""
    value: Any = {"a": [1, {"b": None}], "c": "x"}
    copy = json_copy(value)
    assert copy == value
    assert copy is not value and copy["a"] is not value["a"]
    assert copy["a"][1] is not value["a"][1]
