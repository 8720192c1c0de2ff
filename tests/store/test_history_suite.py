"""History's filters and text search, run against every backend (the ``store`` fixture)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from signoff.domain.decisions import Approve, DecisionRecord, Reject, Respond
from signoff.domain.requests import ChoiceRequest, Question, QuestionsRequest, Request
from signoff.errors import InvalidRequest
from signoff.store.base import RequestQuery, Store, Write, encode_cursor, to_micros
from tests.store.test_store_suite import T0, approval, insert


def decided(by: str, decision: Any = None) -> DecisionRecord:
    """A person's decision record."""
    return DecisionRecord(decision=decision or Approve(), decided_by=by, decided_at=T0)


def at(n: int) -> dict[str, Any]:
    """Timestamps n seconds after T0 (later requests are newer)."""
    when = T0 + timedelta(seconds=n)
    return {"created_at": when, "updated_at": when}


def seed() -> list[Request]:
    """Requests of every kind, outcome, agent and person, oldest first."""
    return [
        approval(tool_args={"command": "rm -rf build"}, requested_by="agent:build", **at(1)),
        approval(
            tool_args={"command": "rm -rf build"},
            requested_by="agent:build",
            status="approved",
            decision=decided("alice"),
            **at(2),
        ),
        approval(
            tool_name="write_file",
            tool_args={"path": "notes.md", "text": "Deploy 50%_off Coupon"},
            requested_by="agent:docs",
            status="rejected",
            decision=decided("bob", Reject(reason="too risky")),
            **at(3),
        ),
        ChoiceRequest(
            id="req_choice",
            session_id="s2",
            requested_by="agent:docs",
            allowed_decisions=("choose", "reject"),
            prompt="Deploy where?",
            options=("Canary", "Prod"),
            **at(4),
        ),
        QuestionsRequest(
            id="req_questions",
            session_id="s2",
            requested_by="agent:build",
            allowed_decisions=("approve", "answer", "reject"),
            prompt=None,
            questions=(Question(id="q1", text='Which "NEAR(" quote?'),),
            status="expired",
            decision=DecisionRecord(
                decision=Reject(reason="expired"), decided_by="expiry", decided_at=T0, via="expiry"
            ),
            **at(5),
        ),
        approval(
            tool_args={"command": "ls -la ÉCOLE"},
            requested_by="agent:build",
            status="rejected",
            decision=decided("alice", Respond(feedback="use find")),
            **at(6),
        ),
    ]


async def seeded(store: Store) -> list[str]:
    """Store the seed in order; the ids newest first."""
    requests = seed()
    for request in requests:
        await store.commit(insert(request))
    return [r.id for r in reversed(requests)]


async def ids(store: Store, **query: Any) -> list[str]:
    """Every matching id, newest first, read two at a time through the cursors."""
    found: list[str] = []
    cursor: str | None = None
    while True:
        page = await store.list_requests(RequestQuery(limit=2, cursor=cursor, **query))
        found += [r.id for r in page.items]
        cursor = page.next_cursor
        if cursor is None:
            return found


async def test_each_filter_narrows_and_they_combine(store: Store) -> None:
    """Agent, person, tool, ended and their combinations, paged through cursors."""
    newest = await seeded(store)
    n = {i: newest[len(newest) - i] for i in range(1, 7)}  # n[k]: the k-th stored
    assert await ids(store) == newest
    assert await ids(store, requested_by="agent:docs") == [n[4], n[3]]
    assert await ids(store, decided_by="alice") == [n[6], n[2]]
    assert await ids(store, decided_by="expiry") == [n[5]]
    assert await ids(store, tool_name="write_file") == [n[3]]
    assert await ids(store, status="ended") == [n[6], n[5], n[3], n[2]]
    assert await ids(store, status="ended", requested_by="agent:build") == [n[6], n[5], n[2]]
    assert await ids(store, decided_by="alice", tool_name="shell", status="approved") == [n[2]]
    assert await ids(store, decided_by="nobody") == []


async def test_search_matches_words_in_any_case(store: Store) -> None:
    """Each word must occur (substring, any case) in tool, args, prompt, options, questions."""
    newest = await seeded(store)
    n = {i: newest[len(newest) - i] for i in range(1, 7)}
    assert await ids(store, text="rm build") == [n[2], n[1]]
    assert await ids(store, text="RM  -RF") == [n[2], n[1]]
    assert await ids(store, text="deploy") == [n[4], n[3]]
    assert await ids(store, text="deploy canary") == [n[4]]
    assert await ids(store, text="write_file coupon") == [n[3]]
    assert await ids(store, text="école") == [n[6]]
    assert await ids(store, text="shell", requested_by="agent:build", status="ended") == [
        n[6],
        n[2],
    ]
    assert await ids(store, text="rm nothing-like-this") == []


LITERAL: list[tuple[str, list[int]]] = [
    ("%", [3]),
    ("_", [3]),
    ("%_", [3]),
    ("50%_off", [3]),
    ("5_%", []),
    ('"', [5]),
    ('"NEAR("', [5]),
    ("NEAR(", [5]),
    ("*", []),
    ("build OR docs", []),
    ("-rf", [2, 1]),
    ("'", []),
    ("\\", []),
    ("x" * 200, []),
]
"""Searches made of LIKE wildcards, FTS5 syntax and quotes, and the seed requests (by the
order they were stored in) each finds."""


async def test_search_syntax_is_literal(store: Store) -> None:
    """LIKE wildcards, FTS5 syntax and quotes mean only themselves."""
    newest = await seeded(store)
    n = {i: newest[len(newest) - i] for i in range(1, 7)}
    for text, expected in LITERAL:
        assert await ids(store, text=text) == [n[k] for k in expected], text


@pytest.mark.parametrize(
    "query",
    [
        {"text": ""},
        {"text": "   "},
        {"text": "x" * 201},
        {"text": "a\x00b"},
        {"text": "\udcff"},
        {"decided_by": ""},
        {"tool_name": "t\x00"},
        {"requested_by": "a" * 201},
    ],
)
def test_bad_filters_are_invalid_requests(query: dict[str, Any]) -> None:
    """A value no store could compare is refused when the query is made."""
    with pytest.raises(InvalidRequest):
        RequestQuery(**query)


async def test_a_forged_cursor_pages_nothing_it_should_not(store: Store) -> None:
    """A cursor naming no request, or a far future, reads only what the filters allow."""
    newest = await seeded(store)
    nowhere = encode_cursor(to_micros(T0 + timedelta(days=1)), "req_unknown")
    for text in (None, "build"):
        page = await store.list_requests(
            RequestQuery(cursor=nowhere, text=text, requested_by="agent:docs")
        )
        assert {r.requested_by for r in page.items} <= {"agent:docs"}
    page = await store.list_requests(RequestQuery(cursor=nowhere))
    assert [r.id for r in page.items] == newest


async def test_a_decision_later_is_found_by_its_person(store: Store) -> None:
    """An update fills decided_by; the text found before is still found."""
    request = approval(tool_args={"command": "make deploy"}, **at(1))
    await store.commit(insert(request))
    assert await ids(store, decided_by="carol") == []
    done = request.model_copy(
        update={"status": "approved", "version": 2, "decision": decided("carol")}
    )
    await store.commit(Write(at=T0, update=done))
    assert await ids(store, decided_by="carol") == [request.id]
    assert await ids(store, text="deploy", decided_by="carol") == [request.id]
