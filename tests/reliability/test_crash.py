"""kill -9 a real server in the middle of a decision load: nothing acknowledged is lost."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.server.app import API
from tests.serving import agent_token, bearer, free_port, start_server


@pytest.fixture(params=["sqlite", "sqlite-process", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """A fresh SQLite file (its writer a thread, or a process: ``--sqlite-writer``) or
    PostgreSQL database (see ``pg_database``), and the environment the server needs for it."""
    if request.param.startswith("sqlite"):
        writer = "process" if request.param == "sqlite-process" else "thread"
        return f"sqlite:///{tmp_path / 'crash.db'}", {"SIGNOFF_SQLITE_WRITER": writer}
    url: str = request.getfixturevalue("pg_database")
    return url, {}


async def test_kill_9_mid_load_loses_no_acknowledged_decision(
    database: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    """Every decision answered 200 survives; the rest are whole or untouched; audit verifies.

    With a writer process, the server's kill leaves the writer to finish the batch it runs
    and exit; the server started again opens the file once it has."""
    url, settings = database
    env = {**os.environ, **settings, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200"}
    port = free_port()
    server = start_server(url, port, env)
    admin = server.admin_token
    assert admin is not None
    agent = agent_token(server)
    async with httpx.AsyncClient(base_url=server.base, headers=bearer(admin), timeout=30) as http:
        ids = []
        for n in range(300):  # enough that a group commit cannot answer them all at once
            body = {"session_id": "k", "tool_name": "t", "tool_args": {"n": n}}
            made = await http.post(f"{API}/requests", json=body, headers=bearer(agent))
            ids.append(made.json()["id"])

        async def decide(request_id: str) -> tuple[str, int]:
            try:
                response = await http.post(
                    f"{API}/requests/{request_id}/decision", json={"type": "approve"}
                )
            except httpx.TransportError:
                return request_id, 0
            return request_id, response.status_code

        answered = asyncio.Semaphore(0)

        async def decide_and_count(request_id: str) -> tuple[str, int]:
            outcome = await decide(request_id)
            answered.release()
            return outcome

        load = [asyncio.create_task(decide_and_count(request_id)) for request_id in ids]
        for _ in range(10):  # the load is well under way
            await answered.acquire()
        server.process.send_signal(signal.SIGKILL)
        server.process.communicate(timeout=20)
        results: list[tuple[str, int]] = await asyncio.gather(*load)
    acknowledged = {rid for rid, code in results if code == 200}
    assert 10 <= len(acknowledged) < len(ids), "the kill should land mid-load"
    again = start_server(url, port, env)
    try:
        async with httpx.AsyncClient(base_url=again.base, headers=bearer(admin)) as http:
            statuses: dict[str, Any] = {}
            for request_id in ids:
                request = (await http.get(f"{API}/requests/{request_id}")).json()
                statuses[request_id] = request
            for request_id in acknowledged:
                assert statuses[request_id]["status"] == "approved"
            for request_id, request in statuses.items():
                assert request["status"] in ("pending", "approved"), request
                if request["status"] == "approved":  # whole: a decision and its digest
                    assert request["decision"] is not None and request["args_digest"]
                else:
                    assert request["decision"] is None and request_id not in acknowledged
            verify = (await http.get(f"{API}/audit/verify")).json()
            assert verify["ok"] is True, verify
    finally:
        again.stop()
