"""What no store can keep: lone surrogates, NUL in names, numbers JSON cannot write."""

from __future__ import annotations

import json
import math

import pytest

from signoff.domain.text import check_name, lone_surrogate_in, non_finite_in, refuse_unstorable


def test_a_non_finite_number_is_found_by_where_it_is() -> None:
    """NaN and infinities are found anywhere in a JSON value, named by their path."""
    assert non_finite_in({"a": [1, {"b": math.nan}]}) == "a.1.b"
    assert non_finite_in(json.loads('{"x": 1e999}')) == "x"
    assert non_finite_in(json.loads("[-Infinity]")) == "0"
    assert non_finite_in(math.inf) == "value"
    assert non_finite_in({"a": [1.5, 2**70, True, None, "NaN"]}) is None


def test_a_lone_surrogate_is_found_in_values_and_keys() -> None:
    """A lone surrogate in a value or a key is found; a surrogate pair written out is not."""
    assert lone_surrogate_in({"a": ["ok", "\ud800"]}) == "a.1"
    assert lone_surrogate_in({"a": {"\udc00": 1}}) == "a key of a"
    assert lone_surrogate_in({"a": json.loads('"\\ud83d\\ude00"')}) is None


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"tool_args": {"n": math.nan}}, "tool_args.n is not a finite number"),
        ({"result": [math.inf]}, "result.0 is not a finite number"),
        ({"context": "\udfff"}, "context holds a lone surrogate"),
    ],
)
def test_refuse_unstorable_names_the_field(body: object, detail: str) -> None:
    """A body holding what no store keeps is refused with the field's path in the message."""
    with pytest.raises(ValueError, match=detail):
        refuse_unstorable(body)


def test_refuse_unstorable_passes_everything_else_through() -> None:
    """Huge integers, NUL inside values, control and bidi characters are data, kept as given."""
    body = {"n": 2**70, "text": "a\x00b\x1b[2K\u202e", "f": 1e308}
    assert refuse_unstorable(body) is body


def test_a_name_refuses_nul_and_lone_surrogates() -> None:
    """Names, ids and filters refuse NUL and lone surrogates; other text passes."""
    with pytest.raises(ValueError, match="NUL"):
        check_name("a\x00")
    with pytest.raises(ValueError, match="surrogate"):
        check_name("a\ud800")
    assert check_name("\u202eok") == "\u202eok"


def test_a_decision_is_checked_when_it_comes_in_not_when_a_store_reads_it_back() -> None:
    """A decision from outside holding a number JSON cannot write is refused; the same text
    read back from a store (``stored_request``, context STORED) is parsed without the
    check, which only a record no store writes would fail."""
    from pydantic import ValidationError

    from signoff.domain.decisions import DecisionAdapter
    from signoff.domain.requests import RequestAdapter, stored_request
    from tests.store.test_store_suite import approval

    approve = '{"type": "approve", "args": {"n": 1e999}}'
    with pytest.raises(ValidationError, match="not a finite number"):
        DecisionAdapter.validate_json(approve)
    data = json.loads(approval(status="approved").model_dump_json())
    record = '{"decision": %s, "decided_by": "alice", "decided_at": "2026-01-01T00:00:00Z"}'
    text = json.dumps({**data, "decision": "RECORD"}).replace('"RECORD"', record % approve)
    with pytest.raises(ValidationError, match="not a finite number"):
        RequestAdapter.validate_json(text)
    stored = stored_request(text)
    assert stored.decision is not None and stored.decision.decision.type == "approve"
