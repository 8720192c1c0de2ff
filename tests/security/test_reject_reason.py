"""A person's rejection must say why, on every HTTP path of a real ``signoff serve``.

The decision route, the batch route, a hosted task's resume and an AG-UI resume each
refuse a rejection whose reason is missing, empty or only whitespace with 422 ``{error,
detail}`` naming the rule, and nothing changes: the request stays pending, no audit entry
is written and the agent waiting on it sees nothing. With a reason, the same call rejects
and the agent is told the reason. An outcome made by no person (a cancel) needs none.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from signoff.domain.decisions import REASON_REQUIRED
from signoff.server.app import API
from tests.server.agui_serving import (
    Chat,
    interrupts,
    post_run,
    resolved,
    run_input,
    serve_chat,
    stored,
)
from tests.serving import agent_token, api_as

BLANKS: tuple[dict[str, Any], ...] = (
    {"type": "reject"},
    {"type": "reject", "reason": ""},
    {"type": "reject", "reason": " \t\n\u3000 "},
)
"""A rejection with no reason, an empty one, and one of whitespace only."""


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chat]:
    """One server for the module, hosting the scripted ``chat`` agent."""
    yield from serve_chat(tmp_path_factory.mktemp("reject-reason"))


@pytest.fixture(scope="module")
def bot(chat: Chat) -> str:
    """One agent's token for the module."""
    return agent_token(chat.server, "reasons-bot")


def _refused(answer: httpx.Response) -> None:
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert set(body) == {"error", "detail"}, body
    assert body["error"] == "InvalidDecision" and REASON_REQUIRED in body["detail"], body


async def _submit(agent: httpx.AsyncClient, tool: str) -> str:
    made = await agent.post(
        f"{API}/requests", json={"session_id": "reasons", "tool_name": tool, "tool_args": {}}
    )
    assert made.status_code == 201, made.text
    request_id: str = made.json()["id"]
    return request_id


async def _untouched(http: httpx.AsyncClient, request_id: str) -> None:
    """Still pending, undecided, and no decision in its audit trail."""
    request = (await http.get(f"{API}/requests/{request_id}")).json()
    assert request["status"] == "pending" and request.get("decision") is None, request
    audit = (await http.get(f"{API}/audit", params={"request_id": request_id})).json()
    assert [e["action"] for e in audit["items"]] == ["submit"], audit


async def test_the_decision_route_refuses_a_blank_reason_and_changes_nothing(
    chat: Chat, bot: str
) -> None:
    """422 for each blank reason, also over an MCP link's channel; a reason rejects, and
    the agent's long poll gets it as given."""
    async with api_as(chat.server, bot) as agent, api_as(chat.server, chat.person("ann")) as ann:
        request_id = await _submit(agent, "shell")
        url = f"{API}/requests/{request_id}/decision"
        for body in BLANKS:
            _refused(await ann.post(url, json=body))
            _refused(await ann.post(url, json=body, params={"via": "mcp-url"}))
        await _untouched(ann, request_id)
        decided = await ann.post(url, json={"type": "reject", "reason": "Not safe to run"})
        assert decided.status_code == 200, decided.text
        waited = (
            await agent.get(f"{API}/requests/{request_id}/wait", params={"timeout": 5})
        ).json()
        assert waited["status"] == "rejected"
        assert waited["decision"]["decision"]["reason"] == "Not safe to run"


async def test_a_batch_with_a_blank_reason_is_refused_whole(chat: Chat, bot: str) -> None:
    """The batch route refuses the whole batch (not each id) and decides none of it."""
    async with api_as(chat.server, bot) as agent, api_as(chat.server, chat.person("ann")) as ann:
        ids = [await _submit(agent, "shell"), await _submit(agent, "deploy")]
        for blank in ({}, {"reason": ""}, {"reason": "   "}):
            _refused(
                await ann.post(f"{API}/decisions", json={"ids": ids, "type": "reject", **blank})
            )
        for request_id in ids:
            await _untouched(ann, request_id)
        done = await ann.post(
            f"{API}/decisions", json={"ids": ids, "type": "reject", "reason": "Not needed"}
        )
        assert [r["status"] for r in done.json()["results"]] == ["rejected", "rejected"], done.text


async def test_a_cancel_needs_no_reason(chat: Chat, bot: str) -> None:
    """The rule is a person's: the agent withdrawing its own request says nothing and may."""
    async with api_as(chat.server, bot) as agent:
        request_id = await _submit(agent, "shell")
        canceled = await agent.post(f"{API}/requests/{request_id}/cancel")
        assert canceled.json()["status"] == "canceled", canceled.text


async def test_resumes_refuse_a_rejection_without_a_reason(chat: Chat) -> None:
    """An AG-UI resume ``{"approved": false}`` with no, empty or blank reason, and the task
    resume route's ``action=reject`` without one: 422, the conversation still waits; a
    reason rejects, and the agent's run ends without the call."""
    async with api_as(chat.server, chat.person("alice")) as alice:
        frames = await post_run(alice, run_input("reasonless", "write r.txt=x"))
        (interrupt,) = interrupts(frames)
        runs_url = f"{API}/agents/chat/runs"
        for payload in (
            {"approved": False},
            {"approved": False, "reason": ""},
            {"approved": False, "reason": "  "},
            {"type": "reject", "reason": "\n"},
        ):
            entry = [resolved(interrupt["id"], payload)]
            _refused(await alice.post(runs_url, json=run_input("reasonless", resume=entry)))
        _refused(await alice.post(f"{API}/resume/{interrupt['id']}", params={"action": "reject"}))
        _refused(
            await alice.post(
                f"{API}/resume/{interrupt['id']}", json={"action": "reject", "reason": " "}
            )
        )
        assert (await stored(alice, "reasonless"))["status"] == "Paused"
        await _untouched(alice, interrupt["id"])
        no = [resolved(interrupt["id"], {"approved": False, "reason": "Wrong arguments"})]
        frames = await post_run(alice, run_input("reasonless", resume=no))
        assert frames[-1].data["outcome"] == {"type": "success"}
        request = (await alice.get(f"{API}/requests/{interrupt['id']}")).json()
        assert request["status"] == "rejected"
        assert request["decision"]["decision"]["reason"] == "Wrong arguments"
