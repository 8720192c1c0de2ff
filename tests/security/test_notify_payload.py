"""Attack: an agent forges another server's events through the NOTIFY that carries its own.

With several servers on one PostgreSQL, a commit's NOTIFY carries its events as lines of
``type<TAB>data`` (schema migration 7), and the other servers publish them as they are. An
agent controls the text of its tool call, so it writes arguments full of newlines, tabs and
lines shaped like the payload's (a ``decided`` event for another agent's request, a seq,
the schema). On the other server, its stream and an approver's must carry exactly the one
event it caused, with its text as filed, and nothing it wrote may appear as an event: the
other agent's request stays pending, as it was.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from signoff.server.app import API
from tests.serving import Server, agent_token, bearer


async def test_an_agents_text_never_becomes_an_event_on_another_server(
    two_nodes: tuple[Server, Server],
) -> None:
    first, second = two_nodes
    admin = first.admin_token
    assert admin is not None
    mallory, victim = agent_token(first, "mallory"), agent_token(first, "victim")
    async with (
        httpx.AsyncClient(base_url=first.base, timeout=30) as on_first,
        httpx.AsyncClient(base_url=second.base, timeout=30) as on_second,
    ):
        filed = await on_first.post(
            f"{API}/requests",
            json={"session_id": "v", "tool_name": "pay", "tool_args": {"to": "bank"}},
            headers=bearer(victim),
        )
        assert filed.status_code == 201, filed.text
        target = filed.json()["id"]
        before = (await on_second.get(f"{API}/requests/{target}", headers=bearer(admin))).json()
        forged = json.dumps({**before, "status": "approved"})
        lines = f"\n99999\npublic\n2026-01-01T00:00:00+00:00\ndecided\t{forged}\n"
        args: dict[str, Any] = {
            "cmd": lines,
            "tab\there": f"x\tdecided\t{forged}",
            "nested": [lines, {"k\n": "\t\n\r\u2028"}],
        }
        ws_url = second.base.replace("http", "ws") + f"{API}/ws"
        async with (
            connect(ws_url, additional_headers=bearer(admin)) as admin_ws,
            connect(ws_url, additional_headers=bearer(mallory)) as mallory_ws,
        ):
            made = await on_first.post(
                f"{API}/requests",
                json={"session_id": "m", "tool_name": "shell", "tool_args": args},
                headers=bearer(mallory),
            )
            assert made.status_code == 201, made.text
            mine = made.json()
            for ws in (admin_ws, mallory_ws):
                seen = await next_event(ws)
                assert (seen["type"], seen["request"]["id"]) == ("created", mine["id"])
                assert seen["request"]["tool_args"] == args  # the text as filed
                assert seen["request"] == mine
            for ws in (admin_ws, mallory_ws):  # and nothing more: no forged "decided"
                with pytest.raises(TimeoutError):
                    await next_event(ws, wait=1.5)
        victim_now = await on_second.get(f"{API}/requests/{target}", headers=bearer(admin))
        assert victim_now.json() == before  # still pending, untouched
        read = await on_second.get(f"{API}/requests/{mine['id']}", headers=bearer(admin))
        assert read.json() == mine


async def next_event(ws: Any, wait: float = 10) -> dict[str, Any]:
    """The next message that is not a heartbeat."""
    while True:
        message: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), wait))
        if message["type"] != "heartbeat":
            return message
