"""Claude Code's ``http`` hook against a real ``signoff serve``: POST /api/v1/hooks/claude-code.

Claude Code POSTs the JSON a command hook reads on stdin and reads a 2xx answer's JSON like
a command hook's stdout; any other status, a timeout or a reset connection lets the tool
run. So every answer checked here is 200 with Claude Code's JSON: the person's allow, deny
(with the reason the model reads) and edit, and a deny for every failure (no decision in
time, a body that is not the hook's JSON, a missing or an approver's token, the server
stopping, the hook hanging up), with nothing left approvable behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serving import (
    Server,
    agent_token,
    api_as,
    bearer,
    free_port,
    new_token,
    serve_for_module,
    start_server,
)

API = "/api/v1"
HOOK = f"{API}/hooks/claude-code"
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One ``signoff serve`` for the module (each test uses its own session)."""
    yield from serve_for_module(tmp_path_factory.mktemp("http-hook"))


@pytest.fixture(scope="module")
def tokens(served: Server) -> dict[str, str]:
    """An agent's, an approver's and the admin's tokens."""
    approver = new_token(served, "pat", "approver")[0]
    assert served.admin_token is not None
    return {
        "agent": agent_token(served, "claude"),
        "approver": approver,
        "admin": served.admin_token,
    }


@pytest.fixture
async def admin(served: Server, tokens: dict[str, str]) -> AsyncIterator[httpx.AsyncClient]:
    """The server's API as the admin: the person deciding, and a view of every request."""
    async with api_as(served, tokens["admin"]) as client:
        yield client


def hook_input(event: str = "PreToolUse", **changes: Any) -> dict[str, Any]:
    """Claude Code's documented hook JSON for ``event``, in a session of its own."""
    body: dict[str, Any] = json.loads((FIXTURES / f"claude-code.{event}.json").read_text())
    body["session_id"] = f"cc-{uuid.uuid4().hex[:12]}"
    if "tool_use_id" in body:
        body["tool_use_id"] = f"toolu_{uuid.uuid4().hex[:16]}"
    body.update(changes)
    return body


async def post_hook(
    served: Server, token: str | None, body: bytes | dict[str, Any], query: str = ""
) -> httpx.Response:
    """POST the hook as Claude Code does (JSON, Authorization from its headers setting)."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **(bearer(token) if token else {})}
    async with httpx.AsyncClient(base_url=served.base, timeout=60) as client:
        return await client.post(f"{HOOK}{query}", content=content, headers=headers)


async def filed(admin: httpx.AsyncClient, session: str) -> list[dict[str, Any]]:
    """The requests in ``session``."""
    listed = await admin.get(f"{API}/requests", params={"session_id": session})
    assert listed.status_code == 200, listed.text
    items: list[dict[str, Any]] = listed.json()["items"]
    return items


async def pending_in(admin: httpx.AsyncClient, session: str) -> dict[str, Any]:
    """The request the hook filed in ``session``, once it is there."""
    for _ in range(400):
        items = [r for r in await filed(admin, session) if r["status"] == "pending"]
        if items:
            assert len(items) == 1, items
            return items[0]
        await asyncio.sleep(0.05)
    raise AssertionError("the hook filed no request")


async def decided_by_person(
    served: Server,
    admin: httpx.AsyncClient,
    token: str,
    body: dict[str, Any],
    decision: dict[str, Any],
) -> tuple[httpx.Response, dict[str, Any]]:
    """Post the hook, decide the request it files with ``decision``: the answer, the request."""
    call = asyncio.create_task(post_hook(served, token, body))
    request = await pending_in(admin, body["session_id"])
    decided = await admin.post(f"{API}/requests/{request['id']}/decision", json=decision)
    assert decided.status_code == 200, decided.text
    return await call, request


def pre_tool_use(answer: httpx.Response) -> dict[str, Any]:
    """The PreToolUse hookSpecificOutput of a 200 answer."""
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    output: dict[str, Any] = answer.json()["hookSpecificOutput"]
    assert output["hookEventName"] == "PreToolUse"
    return output


async def test_a_person_approving_allows_the_call_filed_as_the_agent(
    served: Server, tokens: dict[str, str], admin: httpx.AsyncClient
) -> None:
    """Approve: permissionDecision allow, no updatedInput; the request is the hook's call."""
    body = hook_input()
    answer, request = await decided_by_person(
        served, admin, tokens["agent"], body, {"type": "approve"}
    )
    output = pre_tool_use(answer)
    assert output["permissionDecision"] == "allow"
    assert "updatedInput" not in output
    assert request["requested_by"] == "claude"
    assert request["tool_name"] == "Write"
    assert request["tool_args"] == body["tool_input"]
    assert request["tool_call_id"] == body["tool_use_id"]
    assert request["context"]["via"] == "Claude Code hook (PreToolUse)"
    assert request["context"]["cwd"] == body["cwd"]


async def test_a_rejection_denies_with_the_persons_reason_for_the_model(
    served: Server, tokens: dict[str, str], admin: httpx.AsyncClient
) -> None:
    """Reject: permissionDecision deny, and the reason Claude reads says the person's words."""
    reason = "not the rate limit file, use config/limits.toml"
    answer, _ = await decided_by_person(
        served, admin, tokens["agent"], hook_input(), {"type": "reject", "reason": reason}
    )
    output = pre_tool_use(answer)
    assert output["permissionDecision"] == "deny"
    assert reason in output["permissionDecisionReason"]


async def test_an_edit_comes_back_as_the_whole_updated_input(
    served: Server, tokens: dict[str, str], admin: httpx.AsyncClient
) -> None:
    """Approve with edited args: allow + updatedInput holding every field (it replaces the
    input); a PermissionRequest gets decision.behavior allow with the same updatedInput."""
    body = hook_input()
    edited = {**body["tool_input"], "content": "LIMIT = 50\n"}
    answer, _ = await decided_by_person(
        served, admin, tokens["agent"], body, {"type": "approve", "args": edited}
    )
    output = pre_tool_use(answer)
    assert output["permissionDecision"] == "allow"
    assert output["updatedInput"] == edited

    asked = hook_input("PermissionRequest")
    changed = {**asked["tool_input"], "command": "rm -rf node_modules/.cache"}
    answer, request = await decided_by_person(
        served, admin, tokens["agent"], asked, {"type": "approve", "args": changed}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow", "updatedInput": changed},
        }
    }
    assert request["context"]["via"] == "Claude Code hook (PermissionRequest)"


async def test_no_decision_in_time_denies_and_withdraws_the_request(
    served: Server, tokens: dict[str, str], admin: httpx.AsyncClient
) -> None:
    """?timeout=1 with nobody deciding: a deny (200), and the request is canceled, not left
    for someone to approve a call that is not going to run."""
    body = hook_input()
    answer = await post_hook(served, tokens["agent"], body, "?timeout=1")
    output = pre_tool_use(answer)
    assert output["permissionDecision"] == "deny"
    assert "no decision came in time" in output["permissionDecisionReason"].lower()
    [request] = await filed(admin, body["session_id"])
    assert request["status"] == "canceled"


async def test_a_permission_request_timeout_denies_in_its_own_shape(
    served: Server, tokens: dict[str, str], admin: httpx.AsyncClient
) -> None:
    """A deny for PermissionRequest names that event (another name makes Claude Code treat
    the answer as a failed hook and show its own prompt) and carries the message."""
    body = hook_input("PermissionRequest")
    answer = await post_hook(served, tokens["agent"], body, "?timeout=1")
    assert answer.status_code == 200, answer.text
    output = answer.json()["hookSpecificOutput"]
    assert output["hookEventName"] == "PermissionRequest"
    assert output["decision"]["behavior"] == "deny"
    assert output["decision"]["message"]
    [request] = await filed(admin, body["session_id"])
    assert request["status"] == "canceled"


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1, 2]",
        json.dumps({"hook_event_name": "PreToolUse", "session_id": "s"}).encode(),
        json.dumps({**hook_input(), "tool_input": "not an object"}).encode(),
        json.dumps(hook_input(hook_event_name="Stop")).encode(),
    ],
    ids=["not-json", "not-an-object", "no-tool", "input-not-object", "unanswered-event"],
)
async def test_a_body_that_is_not_the_hooks_json_is_a_200_deny_and_files_nothing(
    served: Server, tokens: dict[str, str], admin: httpx.AsyncClient, raw: bytes
) -> None:
    """Malformed input: 200 and a deny saying why (never a 4xx, which lets the tool run)."""
    before = await admin.get(f"{API}/requests", params={"limit": 1})
    answer = await post_hook(served, tokens["agent"], raw)
    output = pre_tool_use(answer)
    assert output["permissionDecision"] == "deny"
    assert "could not read the hook input" in output["permissionDecisionReason"]
    after = await admin.get(f"{API}/requests", params={"limit": 1})
    assert after.json()["items"] == before.json()["items"]


@pytest.mark.parametrize(
    ("who", "status", "says"),
    [
        (None, "401", "refused the hook's token"),
        ("nonsense", "401", "refused the hook's token"),
        ("approver", "403", "only an agent's token may file requests"),
    ],
    ids=["no-token", "wrong-token", "approver-token"],
)
async def test_a_token_that_may_not_file_is_a_200_deny_and_files_nothing(
    served: Server,
    tokens: dict[str, str],
    admin: httpx.AsyncClient,
    who: str | None,
    status: str,
    says: str,
) -> None:
    """No token (e.g. $SIGNOFF_TOKEN missing from allowedEnvVars, which Claude Code then
    sends empty), a wrong one, or an approver's: nothing is filed, and the answer is 200 + a
    deny naming the refusal (X-Signoff-Refused: 401/403); a 401 would let the tool run."""
    body = hook_input("PermissionRequest")
    token = tokens.get(who, who) if who else None
    answer = await post_hook(served, token, body)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-signoff-refused"] == status
    decision = answer.json()["hookSpecificOutput"]["decision"]
    assert decision["behavior"] == "deny"
    assert says in decision["message"]
    assert await filed(admin, body["session_id"]) == []


async def test_a_bad_timeout_is_a_200_deny(
    served: Server, tokens: dict[str, str], admin: httpx.AsyncClient
) -> None:
    """?timeout=0 (or over the maximum) is refused as a deny, not a 422."""
    body = hook_input()
    for query in ("?timeout=0", "?timeout=99999", "?timeout=soon"):
        answer = await post_hook(served, tokens["agent"], body, query)
        output = pre_tool_use(answer)
        assert output["permissionDecision"] == "deny"
        assert answer.headers["x-signoff-refused"] == "422"
    assert await filed(admin, body["session_id"]) == []


async def test_a_hook_that_hangs_up_withdraws_its_request(
    served: Server, tokens: dict[str, str], admin: httpx.AsyncClient
) -> None:
    """Claude Code giving up (its timeout, Esc) closes the connection: the request is
    canceled at once instead of waiting to be approved for a call that will not run."""
    body = hook_input()
    call = asyncio.create_task(post_hook(served, tokens["agent"], body))
    request = await pending_in(admin, body["session_id"])
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    for _ in range(400):
        now = (await admin.get(f"{API}/requests/{request['id']}")).json()
        if now["status"] != "pending":
            break
        await asyncio.sleep(0.05)
    assert now["status"] == "canceled"


async def test_a_server_stopping_answers_a_waiting_hook_with_a_deny(tmp_path: Path) -> None:
    """SIGTERM while a hook waits: the hook gets 200 + deny (a 503 would let the tool run)
    and the request is withdrawn before the server goes."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    stopping = start_server(db, free_port(), env)
    try:
        body = hook_input()
        call = asyncio.create_task(post_hook(stopping, agent_token(stopping), body))
        assert stopping.admin_token is not None
        async with httpx.AsyncClient(
            base_url=stopping.base, headers=bearer(stopping.admin_token), timeout=30
        ) as admin:
            request = await pending_in(admin, body["session_id"])
        stopping.process.terminate()
        output = pre_tool_use(await call)
        assert output["permissionDecision"] == "deny"
        assert "shutting down" in output["permissionDecisionReason"]
        await asyncio.to_thread(stopping.process.communicate, timeout=20)
    finally:
        if stopping.process.poll() is None:
            stopping.stop()
    shown = stopping.cli("show", request["id"], "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "canceled"
