"""Several real ``signoff serve`` processes on one PostgreSQL: one system, exactly-once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from signoff.server.app import API
from tests.serving import Server, bearer, new_token, nodes_on


@pytest.fixture
def nodes(pg_database: str, tmp_path: Path) -> Iterator[list[Server]]:
    """Three servers on the one database; the first printed the admin token."""
    with nodes_on(pg_database, tmp_path, 3) as started:
        yield started


async def test_an_event_on_one_node_reaches_a_websocket_on_another(nodes: list[Server]) -> None:
    """A WebSocket client on node A sees the decision made on node B."""
    a, b, _ = nodes
    admin = a.admin_token
    assert admin is not None and b.admin_token is None  # one database: one first start
    agent = new_token(a, "bot", "agent")[0]
    ws_url = a.base.replace("http", "ws") + f"{API}/ws"
    async with (
        connect(ws_url, additional_headers=bearer(admin)) as ws,
        httpx.AsyncClient(base_url=b.base, timeout=30) as http,
    ):
        created = await http.post(
            f"{API}/requests", json={"session_id": "mn", "tool_name": "t"}, headers=bearer(agent)
        )
        request_id = created.json()["id"]
        decided = await http.post(
            f"{API}/requests/{request_id}/decision",
            json={"type": "approve"},
            headers=bearer(admin),
        )
        assert decided.status_code == 200
        seen: list[str] = []
        while "decided" not in seen:
            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if message["type"] != "heartbeat" and message["request"]["id"] == request_id:
                seen.append(message["type"])
        assert seen == ["created", "decided"]


async def test_conflicting_decisions_across_nodes_have_one_winner(nodes: list[Server]) -> None:
    """200 concurrent decisions on 20 requests, spread over three nodes: one 200 per request."""
    admin = nodes[0].admin_token
    assert admin is not None
    agent = new_token(nodes[0], "bot", "agent")[0]
    clients = [httpx.AsyncClient(base_url=n.base, timeout=60) for n in nodes]
    try:
        ids = []
        for n in range(20):
            made = await clients[n % 3].post(
                f"{API}/requests",
                json={"session_id": "race", "tool_name": "t", "tool_args": {"n": n}},
                headers=bearer(agent),
            )
            ids.append(made.json()["id"])

        async def decide(i: int) -> tuple[str, int, str]:
            request_id = ids[i % 20]
            body = {"type": "approve"} if i % 2 else {"type": "reject", "reason": str(i)}
            response = await clients[i % 3].post(
                f"{API}/requests/{request_id}/decision", json=body, headers=bearer(admin)
            )
            return request_id, response.status_code, response.text

        results = await asyncio.gather(*(decide(i) for i in range(200)))
        assert {code for _, code, _ in results} <= {200, 409}, results
        wins = {rid: sum(1 for r, code, _ in results if r == rid and code == 200) for rid in ids}
        assert set(wins.values()) == {1}
        audit = await clients[1].get(f"{API}/audit/verify", headers=bearer(admin))
        assert audit.json()["ok"] is True
    finally:
        for client in clients:
            await client.aclose()


async def test_claims_on_every_node_run_each_call_once(nodes: list[Server]) -> None:
    """Executors on three nodes claiming the same approved calls: one claim wins per call."""
    admin = nodes[0].admin_token
    assert admin is not None
    agent = new_token(nodes[0], "bot", "agent")[0]
    clients = [httpx.AsyncClient(base_url=n.base, timeout=60) for n in nodes]
    try:
        ids = []
        for n in range(10):
            made = await clients[0].post(
                f"{API}/requests",
                json={"session_id": "c", "tool_name": "t", "tool_args": {"n": n}},
                headers=bearer(agent),
            )
            ids.append((made.json()["id"], n))
            await clients[1].post(
                f"{API}/requests/{ids[-1][0]}/decision",
                json={"type": "approve"},
                headers=bearer(admin),
            )

        async def claim(node: int, request_id: str, n: int) -> tuple[str, int]:
            response = await clients[node].post(
                f"{API}/requests/{request_id}/claim",
                json={"args": {"n": n}},
                headers=bearer(agent),
            )
            return request_id, response.status_code

        results = await asyncio.gather(
            *(claim(node, rid, n) for rid, n in ids for node in range(3))
        )
        for rid, _ in ids:
            codes = sorted(code for r, code in results if r == rid)
            assert codes == [200, 409, 409], (rid, codes)
    finally:
        for client in clients:
            await client.aclose()


async def test_every_node_sweeps_but_each_request_expires_once(nodes: list[Server]) -> None:
    """Three sweepers race to expire the same requests: each is expired exactly once."""
    admin = nodes[0].admin_token
    assert admin is not None
    agent = new_token(nodes[0], "bot", "agent")[0]
    async with httpx.AsyncClient(base_url=nodes[2].base, timeout=60) as http:
        ids = []
        for n in range(10):
            made = await http.post(
                f"{API}/requests",
                json={"session_id": "x", "tool_name": "t", "tool_args": {"n": n}, "expires_in": 1},
                headers=bearer(agent),
            )
            ids.append(made.json()["id"])
        await asyncio.sleep(3.5)  # the sweepers run every second on every node
        for request_id in ids:
            request = (await http.get(f"{API}/requests/{request_id}", headers=bearer(admin))).json()
            assert request["status"] == "expired"
            audit: list[dict[str, Any]] = (
                await http.get(f"{API}/audit?request_id={request_id}", headers=bearer(admin))
            ).json()["items"]
            assert [e["action"] for e in audit].count("expire") == 1, audit
