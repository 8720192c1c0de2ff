"""Attack: an agent reads another agent's requests off the live streams the hub fans out.

Several agents file requests in sessions of their own and in a session id they share; each
agent's WebSocket and SSE streams (with and without ``session_id`` and ``since``) must carry
its own requests' events only, all of them; an approver's carry everyone's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from signoff.server.app import API
from tests.serving import Server, agent_token, bearer, new_token, serve_for_module

Message = dict[str, Any]
Done = Callable[[Message], bool]

AGENTS = ("ann", "bob", "cyd")
SHARED = "shared-session"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One ``signoff serve`` for the module."""
    yield from serve_for_module(tmp_path_factory.mktemp("isolation"))


def queries(since: int) -> list[dict[str, str]]:
    """The stream parameters tried: plain, the shared session, a replay, both."""
    return [
        {},
        {"session_id": SHARED},
        {"since": str(since)},
        {"session_id": SHARED, "since": str(since)},
    ]


async def ws_events(
    server: Server, token: str, params: dict[str, str], done: Done
) -> list[Message]:
    """A WebSocket's events (no heartbeats) until ``done``, that one included."""
    query = "&".join(f"{k}={v}" for k, v in params.items())
    url = server.base.replace("http", "ws") + f"{API}/ws" + (f"?{query}" if query else "")
    seen: list[Message] = []
    async with connect(url, additional_headers=bearer(token)) as ws:
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if message["type"] != "heartbeat":
                seen.append(message)
                if done(message):
                    return seen


async def sse_events(
    http: httpx.AsyncClient, token: str, params: dict[str, str], done: Done
) -> list[Message]:
    """An SSE stream's events until ``done``, that one included."""
    seen: list[Message] = []
    async with http.stream("GET", f"{API}/events", params=params, headers=bearer(token)) as r:
        assert r.status_code == 200
        lines: AsyncIterator[str] = r.aiter_lines()
        async for line in lines:
            if line.startswith("data: "):
                seen.append(json.loads(line[6:]))
                if done(seen[-1]):
                    return seen
    raise AssertionError("the stream ended")


async def test_each_agent_sees_its_own_events_only_and_an_approver_all(served: Server) -> None:
    """On every stream form, an agent gets exactly its own requests' events, in both its
    session and the one it shares with other agents; an approver gets every event."""
    assert served.admin_token is not None
    tokens = {name: agent_token(served, name) for name in AGENTS}
    approver = new_token(served, "pat", "approver")[0]
    async with httpx.AsyncClient(base_url=served.base, timeout=30) as http:

        async def create(name: str, session: str, **args: Any) -> Message:
            answer = await http.post(
                f"{API}/requests",
                json={"session_id": session, "tool_name": "t", "tool_args": args},
                headers=bearer(tokens[name]),
            )
            assert answer.status_code == 201, answer.text
            created: Message = answer.json()
            return created

        warm = await create("ann", "warm-up")
        since = await first_seq(http, served.admin_token, warm["id"]) - 1

        def end_of(name: str) -> Done:
            return lambda e: e["request"]["tool_args"].get("end") == name

        readers: list[tuple[str, dict[str, str], asyncio.Task[list[Message]]]] = []
        for name in (*AGENTS, "pat"):
            token = approver if name == "pat" else tokens[name]
            done = end_of("cyd" if name == "pat" else name)
            for params in queries(since):
                readers.append(
                    (name, params, asyncio.create_task(ws_events(served, token, params, done)))
                )
                readers.append(
                    (name, params, asyncio.create_task(sse_events(http, token, params, done)))
                )
        await asyncio.sleep(0.3)  # most streams are live before the events; the rest replay
        filed: dict[str, list[str]] = {name: [] for name in AGENTS}
        for round_ in range(3):
            for name in AGENTS:
                for session in (SHARED, f"{name}-own"):
                    request = await create(name, session, round=round_)
                    filed[name].append(request["id"])
        decided = filed["bob"][0]
        answer = await http.post(
            f"{API}/requests/{decided}/decision",
            json={"type": "approve"},
            headers=bearer(approver),
        )
        assert answer.status_code == 200, answer.text
        for name in AGENTS:  # each agent's last event, in the shared session, in this order
            filed[name].append((await create(name, SHARED, end=name))["id"])
        results = [(name, params, await task) for name, params, task in readers]
    for name, params, got in results:
        ids = [e["request"]["id"] for e in got if e["request"]["id"] != warm["id"]]
        owners = {e["request"]["requested_by"] for e in got}
        shared_only = "session_id" in params
        if name == "pat":
            assert owners == set(AGENTS), (params, owners)
            everyone = {i for f in filed.values() for n, i in enumerate(f) if n % 2 == 0}
            assert set(ids) == (everyone if shared_only else {i for f in filed.values() for i in f})
            assert ids.count(decided) == 2, params  # created, then decided
            continue
        assert owners == {name}, (name, params, owners)
        wanted = [i for n, i in enumerate(filed[name]) if not shared_only or n % 2 == 0]
        assert list(dict.fromkeys(ids)) == wanted, (name, params)
        if name == "bob":
            assert ids.count(decided) == 2, params


async def first_seq(http: httpx.AsyncClient, admin: str, request_id: str) -> int:
    """The seq of the first event of ``request_id`` (read back through a replay)."""
    got = await sse_events(http, admin, {"since": "0"}, lambda e: e["request"]["id"] == request_id)
    seq: int = got[-1]["seq"]
    return seq
