"""The requests endpoints (file, list, decide, wait, claim, report, cancel) and their errors."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio.to_thread
import httpx
import pytest

from signoff.server.app import API
from tests.server.calls import CALL, create
from tests.server.conftest import MakeClient


async def test_healthz_needs_no_token_and_everything_else_does(agent: httpx.AsyncClient) -> None:
    """/healthz answers anyone; API calls without a valid token get 401."""
    anonymous = httpx.AsyncClient(transport=agent._transport, base_url="http://signoff.test")
    async with anonymous:
        assert (await anonymous.get("/healthz")).json() == {"ok": True}
        for method, path in [
            ("GET", f"{API}/requests"),
            ("POST", f"{API}/requests"),
            ("GET", f"{API}/requests/x"),
            ("POST", f"{API}/requests/x/decision"),
            ("POST", f"{API}/decisions"),
            ("GET", f"{API}/requests/x/wait"),
            ("POST", f"{API}/requests/x/claim"),
            ("POST", f"{API}/requests/x/result"),
            ("POST", f"{API}/requests/x/cancel"),
            ("GET", f"{API}/audit"),
            ("GET", f"{API}/audit/verify"),
            ("GET", f"{API}/grants"),
        ]:
            response = await anonymous.request(method, path)
            assert response.status_code == 401, (method, path)
        bad = await anonymous.get(
            f"{API}/requests", headers={"Authorization": "Bearer so_not-a-token"}
        )
        assert bad.status_code == 401 and bad.json()["error"] == "Unauthenticated"


async def test_submit_is_idempotent_201_then_200(agent: httpx.AsyncClient) -> None:
    """The first POST is 201; the same session + tool_call_id or Idempotency-Key is 200."""
    first = await agent.post(f"{API}/requests", json=CALL)
    again = await agent.post(f"{API}/requests", json=CALL)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]
    body = {"session_id": "s", "kind": "questions", "questions": ["Why?"]}
    keyed = await agent.post(f"{API}/requests", json=body, headers={"Idempotency-Key": "k1"})
    keyed_again = await agent.post(f"{API}/requests", json=body, headers={"Idempotency-Key": "k1"})
    assert (keyed.status_code, keyed_again.status_code) == (201, 200)
    assert keyed.json()["id"] == keyed_again.json()["id"]


async def test_full_lifecycle_over_http(
    agent: httpx.AsyncClient, approver: httpx.AsyncClient
) -> None:
    """create, wait while an approver decides, claim, report: the contract end to end."""
    request = await create(agent)
    waiting = asyncio.create_task(agent.get(f"{API}/requests/{request['id']}/wait?timeout=10"))
    await asyncio.sleep(0.05)
    decided = await approver.post(
        f"{API}/requests/{request['id']}/decision",
        json={"type": "approve", "args": {"command": "ls -la"}},
    )
    assert decided.status_code == 200 and decided.json()["status"] == "approved"
    waited = await waiting
    assert waited.json()["status"] == "approved"
    mismatch = await agent.post(
        f"{API}/requests/{request['id']}/claim", json={"args": {"command": "ls"}}
    )
    assert mismatch.status_code == 409 and mismatch.json()["error"] == "ArgsMismatch"
    claimed = await agent.post(
        f"{API}/requests/{request['id']}/claim", json={"args": {"command": "ls -la"}}
    )
    assert claimed.json()["status"] == "executing"
    again = await agent.post(
        f"{API}/requests/{request['id']}/claim", json={"args": {"command": "ls -la"}}
    )
    assert again.status_code == 409
    done = await agent.post(
        f"{API}/requests/{request['id']}/result", json={"ok": True, "result": {"files": 3}}
    )
    assert done.json()["status"] == "completed"
    assert done.json()["result"]["result"] == {"files": 3}


async def test_decision_errors(agent: httpx.AsyncClient, approver: httpx.AsyncClient) -> None:
    """404 unknown, 403 an agent deciding, 422 an invalid decision, 409 not pending."""
    request = await create(agent)
    url = f"{API}/requests/{request['id']}/decision"
    assert (
        await approver.post(f"{API}/requests/req_nope/decision", json={"type": "approve"})
    ).status_code == 404
    assert (await agent.post(url, json={"type": "approve"})).status_code == 403
    invalid = await approver.post(url, json={"type": "choose", "choice": "a"})
    assert invalid.status_code == 422
    assert "not allowed" in invalid.json()["detail"]
    unknown_type = await approver.post(url, json={"type": "teleport"})
    assert unknown_type.status_code == 422
    assert (await approver.post(url, json={"type": "reject", "reason": "no"})).status_code == 200
    late = await approver.post(url, json={"type": "approve"})
    assert late.status_code == 409 and "not pending" in late.json()["detail"]


async def test_choice_answer_must_be_an_option(
    agent: httpx.AsyncClient, approver: httpx.AsyncClient
) -> None:
    """A choice outside the options is 422 and changes nothing; a valid one is 200."""
    choice = await create(
        agent,
        kind="choice",
        prompt="Deploy where?",
        options=["staging", "prod"],
        tool_name=None,
        tool_args=None,
        tool_call_id=None,
    )
    url = f"{API}/requests/{choice['id']}/decision"
    bad = await approver.post(url, json={"type": "choose", "choice": "moon"})
    assert bad.status_code == 422 and "not one of the options" in bad.json()["detail"]
    ok = await approver.post(url, json={"type": "choose", "choice": "staging"})
    assert ok.json()["decision"]["extra"] == {"choices": ["staging"]}


async def test_agents_see_only_their_own(
    agent: httpx.AsyncClient, make_client: MakeClient, approver: httpx.AsyncClient
) -> None:
    """Another agent's request is 404 to an agent; approvers see every request."""
    request = await create(agent)
    other = await make_client("other-bot", "agent")
    assert (await other.get(f"{API}/requests/{request['id']}")).status_code == 404
    assert (await other.get(f"{API}/requests")).json()["items"] == []
    claim = await other.post(f"{API}/requests/{request['id']}/claim", json={"args": {}})
    assert claim.status_code == 404
    assert (await approver.get(f"{API}/requests/{request['id']}")).status_code == 200


async def test_listing_paginates_and_filters(
    agent: httpx.AsyncClient, approver: httpx.AsyncClient
) -> None:
    """GET /requests pages newest first with a cursor and filters by status and session."""
    ids = [(await create(agent, tool_call_id=f"c{n}"))["id"] for n in range(5)]
    await approver.post(
        f"{API}/requests/{ids[0]}/decision", json={"type": "reject", "reason": "no"}
    )
    page = (await approver.get(f"{API}/requests?limit=2")).json()
    assert len(page["items"]) == 2 and page["next_cursor"]
    seen = [r["id"] for r in page["items"]]
    while page["next_cursor"]:
        page = (
            await approver.get(
                f"{API}/requests", params={"limit": 2, "cursor": page["next_cursor"]}
            )
        ).json()
        seen += [r["id"] for r in page["items"]]
    assert sorted(seen) == sorted(ids) and len(seen) == 5
    pending = (await approver.get(f"{API}/requests?status=pending&session_id=s1")).json()
    assert len(pending["items"]) == 4
    assert (await approver.get(f"{API}/requests?status=bogus")).status_code == 422
    assert (await approver.get(f"{API}/requests?limit=0")).status_code == 422
    assert (await approver.get(f"{API}/requests?cursor=%%%")).status_code == 422


async def test_batch_decisions_report_each_id(
    agent: httpx.AsyncClient, approver: httpx.AsyncClient
) -> None:
    """POST /decisions gives every id its status or its error; one failure undoes nothing."""
    a = await create(agent, tool_call_id="a")
    b = await create(agent, tool_call_id="b")
    await approver.post(
        f"{API}/requests/{b['id']}/decision", json={"type": "reject", "reason": "no"}
    )
    response = await approver.post(
        f"{API}/decisions", json={"ids": [a["id"], b["id"], "req_x"], "type": "approve"}
    )
    results = {r["id"]: r for r in response.json()["results"]}
    assert results[a["id"]] == {"id": a["id"], "status": "approved"}
    assert results[b["id"]]["code"] == 409
    assert results["req_x"]["code"] == 404
    assert (
        await approver.post(f"{API}/decisions", json={"ids": [], "type": "approve"})
    ).status_code == 422


async def test_cancel_and_results_errors(
    agent: httpx.AsyncClient, approver: httpx.AsyncClient
) -> None:
    """cancel by the asker, 409 twice; a result for a call not executing is 409."""
    request = await create(agent)
    assert (
        await agent.post(f"{API}/requests/{request['id']}/result", json={"ok": True})
    ).status_code == 409
    assert (await approver.post(f"{API}/requests/{request['id']}/cancel")).status_code == 403
    cancel = await agent.post(f"{API}/requests/{request['id']}/cancel", json={"reason": "nah"})
    assert cancel.json()["status"] == "canceled"
    assert (await agent.post(f"{API}/requests/{request['id']}/cancel")).status_code == 409


async def test_malformed_input_is_422_naming_the_field(agent: httpx.AsyncClient) -> None:
    """Bad JSON, wrong types and unknown fields get 422 with the field in the message."""
    broken = await agent.post(
        f"{API}/requests", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert broken.status_code == 422
    wrong = await agent.post(f"{API}/requests", json={**CALL, "tool_args": "ls"})
    assert wrong.status_code == 422 and "tool_args" in wrong.json()["detail"]
    extra = await agent.post(f"{API}/requests", json={**CALL, "surprise": True})
    assert extra.status_code == 422 and "surprise" in extra.json()["detail"]
    long = await agent.post(f"{API}/requests", json={**CALL, "session_id": "x" * 5000})
    assert long.status_code == 422 and "session_id" in long.json()["detail"]


async def test_a_lifecycle_over_http_takes_no_worker_thread(
    agent: httpx.AsyncClient, approver: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every endpoint and dependency of a lifecycle runs on the event loop: a plain ``def``
    dependency (the service's, once) cost a thread hop and a loop wake-up per request."""
    hops: list[object] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(func: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(func)
        return await run_sync(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    request = await create(agent)
    waiting = asyncio.create_task(agent.get(f"{API}/requests/{request['id']}/wait?timeout=10"))
    decided = await approver.post(
        f"{API}/requests/{request['id']}/decision", json={"type": "approve"}
    )
    assert decided.status_code == 200
    assert (await waiting).json()["status"] == "approved"
    claimed = await agent.post(
        f"{API}/requests/{request['id']}/claim", json={"args": request["tool_args"]}
    )
    assert claimed.json()["status"] == "executing", claimed.text
    done = await agent.post(f"{API}/requests/{request['id']}/result", json={"ok": True})
    assert done.json()["status"] == "completed"
    assert (
        await approver.get(f"{API}/requests", params={"status": "completed"})
    ).status_code == 200
    assert hops == []
