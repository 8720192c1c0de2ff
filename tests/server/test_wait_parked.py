"""Long polls parked on their connection (server/parking.py) under uvicorn with the protocol
``signoff serve`` runs: an idle ``/wait`` holds no call chain, and answers, headers, errors,
the access line, metrics, keep-alive, shutdown and lost clients are as they were."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from signoff.bus.local import LocalBus
from signoff.server.app import API, create_app
from signoff.server.sockets import guarded_protocol
from signoff.service import Service
from signoff.store.sqlite import SQLiteStore
from tests.serving import bearer, free_port, until_listening

CALL = {"session_id": "s", "tool_name": "t"}
WAITERS = 20


@contextlib.asynccontextmanager
async def in_process(tmp_path: Path) -> AsyncIterator[tuple[int, FastAPI, str, str]]:
    """The app under uvicorn in this process with ``signoff serve``'s HTTP protocol: its
    port, the app, an agent's token and an approver's."""
    store = SQLiteStore(str(tmp_path / "wait.db"))
    await store.open()
    service = Service(store, bus=LocalBus(), read_file=None)
    agent, _ = await service.create_token("bot", "agent")
    approver, _ = await service.create_token("alice", "approver")
    app = create_app(service, sweep=False, webhooks=False)
    port = free_port()
    config = uvicorn.Config(
        app,
        port=port,
        log_level="warning",
        http=guarded_protocol(header_timeout=30, max_connections=1000),
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        await until_listening(server)
        yield port, app, agent, approver
    finally:
        server.should_exit = True
        await task
        await store.close()


def chains() -> int:
    """Connections whose task is now awaiting inside the app's middleware stack (AccessLog
    is the outermost of ours)."""
    held = 0
    for task in asyncio.all_tasks():
        awaited: Any = task.get_coro()
        if not getattr(awaited, "__qualname__", "").endswith(".run_asgi"):
            continue  # not a connection's (the lifespan's runs through the stack for good)
        while awaited is not None:
            code = getattr(awaited, "cr_code", None)
            if code is not None and code.co_qualname == "AccessLog.__call__":
                held += 1
                break
            awaited = getattr(awaited, "cr_await", None)
    return held


class Raw:
    """One keep-alive HTTP/1.1 connection, read by hand: the same socket for every call."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Raw:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    def send(self, method: str, path: str, token: str) -> None:
        self.writer.write(
            f"{method} {path} HTTP/1.1\r\nhost: t\r\nauthorization: Bearer {token}\r\n\r\n".encode()
        )

    async def answer(self) -> tuple[int, dict[str, str], bytes]:
        head = (await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 10)).decode()
        status_line, *lines = head.strip().split("\r\n")
        headers = {name.lower(): value for name, value in (n.split(": ", 1) for n in lines)}
        body = await self.reader.readexactly(int(headers["content-length"]))
        return int(status_line.split()[1]), headers, body


def comparable(headers: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in headers.items() if name != "date"}


async def settle(condition: object) -> None:
    for _ in range(500):
        if callable(condition) and condition():
            return
        await asyncio.sleep(0.02)


async def test_idle_waits_hold_no_call_chain_and_answer_as_a_read_would(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Twenty idle long polls hold no coroutine of the app (their handlers have returned);
    each decision wakes its own, whose answer has the very bytes and headers of a plain read
    of the request, goes out on a connection that stays usable, and gets its access line
    and its count in the HTTP metrics when answered, not when parked."""
    caplog.set_level(logging.INFO, logger="signoff.http")
    async with (
        in_process(tmp_path) as (port, app, agent, approver),
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
    ):
        ids = []
        for _ in range(WAITERS):
            made = await http.post(f"{API}/requests", json=CALL, headers=bearer(agent))
            ids.append(made.json()["id"])
        polls = [await Raw.open(port) for _ in ids]
        try:
            await _wake_half_then_stop(app, http, polls, ids, agent, approver, caplog)
        finally:
            for poll in polls:
                poll.writer.close()


async def _wake_half_then_stop(
    app: FastAPI,
    http: httpx.AsyncClient,
    polls: list[Raw],
    ids: list[str],
    agent: str,
    approver: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus: LocalBus = app.state.service.bus
    subscribed = bus.subscriber_count
    for poll, request_id in zip(polls, ids, strict=True):
        poll.send("GET", f"{API}/requests/{request_id}/wait?timeout=60", agent)
    await settle(lambda: bus.subscriber_count == subscribed + WAITERS and chains() == 0)
    assert bus.subscriber_count == subscribed + WAITERS
    assert chains() == 0
    counted = app.state.metrics.http.labels("GET", "200")._value.get()
    assert not [r for r in caplog.records if "/wait" in r.getMessage()]

    half = ids[: WAITERS // 2]
    decided = await http.post(
        f"{API}/decisions", json={"ids": half, "type": "approve"}, headers=bearer(approver)
    )
    assert decided.status_code == 200, decided.text
    for poll, request_id in zip(polls, half, strict=False):
        status, headers, body = await poll.answer()
        read = await http.get(f"{API}/requests/{request_id}", headers=bearer(agent))
        assert (status, body) == (200, read.content)
        assert comparable(headers) == comparable(dict(read.headers))
        # the same connection takes the next request
        poll.send("GET", f"{API}/requests/{request_id}", agent)
        assert (await poll.answer())[2] == read.content
    assert bus.subscriber_count == subscribed + WAITERS // 2
    lines = [r for r in caplog.records if r.getMessage().endswith("/wait 200")]
    assert sorted(r.getMessage() for r in lines) == sorted(
        f"GET {API}/requests/{i}/wait 200" for i in half
    )
    assert all(vars(r)["signoff_fields"]["who"] == "bot" for r in lines)
    now = app.state.metrics.http.labels("GET", "200")._value.get()
    assert now == counted + 2 * len(half) + len(half)  # the waits, reads and re-reads

    app.state.shutdown.begin()
    for poll in polls[WAITERS // 2 :]:
        status, headers, body = await poll.answer()
        assert status == 503 and headers["retry-after"] == "1"
        assert body == (
            b'{"error":"ServerStopping","detail":'
            b'"the server is shutting down; ask again once it is back"}'
        )
        assert headers["x-frame-options"] == "DENY"
    await settle(lambda: bus.subscriber_count == subscribed)
    assert bus.subscriber_count == subscribed


async def test_a_parked_wait_times_out_refuses_strangers_and_frees_a_lost_client(
    tmp_path: Path,
) -> None:
    """The timeout's answer is the request as it is (a plain read's bytes); another agent's
    request is 404 as before; a client that goes away while its wait is parked frees its
    subscription at once, not at its timeout."""
    async with in_process(tmp_path) as (port, app, agent, _):
        bus: LocalBus = app.state.service.bus
        other, _ = await app.state.service.create_token("eve", "agent")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            made = await http.post(f"{API}/requests", json=CALL, headers=bearer(agent))
            request_id = made.json()["id"]
            waited = await http.get(
                f"{API}/requests/{request_id}/wait?timeout=0.3", headers=bearer(agent)
            )
            read = await http.get(f"{API}/requests/{request_id}", headers=bearer(agent))
            assert (waited.status_code, waited.content) == (200, read.content)
            assert comparable(dict(waited.headers)) == comparable(dict(read.headers))

            refused = await http.get(
                f"{API}/requests/{request_id}/wait?timeout=30", headers=bearer(other)
            )
            unknown = await http.get(f"{API}/requests/{request_id}", headers=bearer(other))
            assert (refused.status_code, refused.content) == (404, unknown.content)

        subscribed = bus.subscriber_count
        lost = await Raw.open(port)
        lost.send("GET", f"{API}/requests/{request_id}/wait?timeout=120", agent)
        await settle(lambda: bus.subscriber_count == subscribed + 1)
        assert bus.subscriber_count == subscribed + 1
        lost.writer.close()
        await settle(lambda: bus.subscriber_count == subscribed)
        assert bus.subscriber_count == subscribed
        assert len(app.state.shutdown._waiters) == 0
