"""Faults under load against real servers: killed database connections, dropped sockets, kill -9.

Each test runs a steady load of submits and decisions over HTTP while a WebSocket reader
follows the event stream, injects a fault in the middle, and then checks that what was
acknowledged is stored, that errors were clean, and that the reader, reconnecting with
``?since=<last seq>``, saw every event exactly once and in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import WebSocketException

from signoff.server.app import API
from signoff.store.base import MAX_PAGE
from tests.conftest import pg_fetchval
from tests.serving import Server, agent_token, bearer, free_port, start_server

Row = tuple[int, str, str, int]
"""An event as compared here: (seq, type, request id, request version)."""


class EventGap(AssertionError):
    """The reader's events are not the log's, once each, in seq order."""


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh SQLite file or PostgreSQL database (see ``pg_database``)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'faults.db'}"
    url: str = request.getfixturevalue("pg_database")
    return url


class Running:
    """A ``signoff serve`` whose output is drained (a full pipe would stall it) and kept."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.stderr: list[str] = []
        self._drains = [
            threading.Thread(target=_drain, args=(stream, sink), daemon=True)
            for stream, sink in ((server.process.stdout, []), (server.process.stderr, self.stderr))
        ]
        for drain in self._drains:
            drain.start()

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        """Signal the process, wait for it and for the rest of its output."""
        if self.server.process.poll() is None:
            self.server.process.send_signal(sig)
        self.server.process.wait(timeout=20)
        for drain in self._drains:
            drain.join(timeout=5)
        for stream in (self.server.process.stdout, self.server.process.stderr):
            if stream is not None:
                stream.close()

    @property
    def tracebacks(self) -> list[str]:
        """Lines of the server's stderr from the first traceback on (none expected)."""
        text = "".join(self.stderr)
        at = text.find("Traceback")
        return [] if at < 0 else text[at:].splitlines()


def _drain(stream: IO[str] | None, sink: list[str]) -> None:
    if stream is not None:
        for line in stream:
            sink.append(line)


def launch(db: str, port: int, tmp_path: Path) -> Running:
    """Start a server on ``db`` (its cwd and config dir in ``tmp_path``: no stray tools.toml)."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200"}
    return Running(start_server(db, port, env, cwd=str(tmp_path)))


@contextlib.contextmanager
def serving(db: str, tmp_path: Path) -> Iterator[list[Running]]:
    """The server on ``db``, in a list a test may put a restarted one in; stopped after."""
    running = [launch(db, free_port(), tmp_path)]
    try:
        yield running
    finally:
        running[0].stop()


@dataclass
class Load:
    """What a load of submits and decisions was told, kept for checking afterwards."""

    created: set[str] = field(default_factory=set)
    """Requests whose submit was answered 201."""
    decided: dict[str, str] = field(default_factory=dict)
    """Request id to the status its decision was answered 200 with."""
    refused: list[tuple[str, int, str]] = field(default_factory=list)
    """(what, status, body) of every answer that was not 2xx."""
    unreachable: list[str] = field(default_factory=list)
    """Requests that got no answer at all (the server was down)."""

    def progress(self) -> int:
        """How many writes have been acknowledged so far."""
        return len(self.created) + len(self.decided)


async def run_load(base: str, agent: str, admin: str, stop: asyncio.Event, load: Load) -> None:
    """Four workers, each submitting a request and then deciding it, until ``stop``."""

    async def call(
        http: httpx.AsyncClient, what: str, path: str, body: dict[str, Any], token: str
    ) -> dict[str, Any] | None:
        try:
            response = await http.post(path, json=body, headers=bearer(token))
        except httpx.TransportError as exc:
            load.unreachable.append(f"{what}: {exc!r}")
            await asyncio.sleep(0.05)  # the server is down: do not spin
            return None
        if response.is_success:
            answer: dict[str, Any] = response.json()
            return answer
        load.refused.append((what, response.status_code, response.text))
        await asyncio.sleep(0.05)
        return None

    async def worker(w: int, http: httpx.AsyncClient) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            submit = {"session_id": f"w{w}", "tool_name": "t", "tool_args": {"n": n}}
            made = await call(http, "submit", f"{API}/requests", submit, agent)
            if made is None:
                continue
            load.created.add(made["id"])
            decision = {"type": "approve"} if n % 2 else {"type": "reject", "reason": "no"}
            path = f"{API}/requests/{made['id']}/decision"
            decided = await call(http, "decide", path, decision, admin)
            if decided is not None:
                load.decided[made["id"]] = decided["status"]

    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        await asyncio.gather(*(worker(w, http) for w in range(4)))


class Watcher:
    """A WebSocket reader that reconnects with ``?since=<last seq seen>`` when its socket drops."""

    def __init__(self, port: int, token: str) -> None:
        self.url = f"ws://127.0.0.1:{port}{API}/ws"
        self.headers = bearer(token)
        self.events: list[dict[str, Any]] = []
        self.connections = 0
        self.socket: ClientConnection | None = None
        self._may_connect = asyncio.Event()
        self._may_connect.set()

    @property
    def last_seq(self) -> int:
        """The seq of the last event received (0 before any)."""
        return int(self.events[-1]["seq"]) if self.events else 0

    def rows(self) -> list[Row]:
        """What was received, in arrival order."""
        return [_row(message) for message in self.events]

    async def run(self) -> None:
        """Read events forever, reconnecting after any drop."""
        while True:
            await self._may_connect.wait()
            try:
                async with connect(
                    f"{self.url}?since={self.last_seq}",
                    additional_headers=self.headers,
                    open_timeout=5,
                ) as ws:
                    self.socket = ws
                    self.connections += 1
                    async for text in ws:
                        message = json.loads(text)
                        if message["type"] != "heartbeat":
                            self.events.append(message)
            except (OSError, TimeoutError, WebSocketException):
                pass  # the server is down or restarting: try again
            self.socket = None
            await asyncio.sleep(0.1)

    async def drop(self, pause: float) -> None:
        """Close the socket, stay away ``pause`` seconds, then let the reader reconnect."""
        self._may_connect.clear()
        assert self.socket is not None
        await self.socket.close()
        await asyncio.sleep(pause)
        self._may_connect.set()


@contextlib.asynccontextmanager
async def watching(port: int, token: str) -> AsyncIterator[Watcher]:
    """A :class:`Watcher` reading from seq 0 in the background while the block runs."""
    watcher = Watcher(port, token)
    task = asyncio.create_task(watcher.run())
    try:
        await until(lambda: watcher.connections > 0, 10, "the WebSocket did not connect")
        yield watcher
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _row(message: dict[str, Any]) -> Row:
    request = message["request"]
    return message["seq"], message["type"], request["id"], request["version"]


async def until(done: Callable[[], bool], timeout: float, failure: str) -> None:
    """Wait until ``done()``; fail with ``failure`` after ``timeout`` seconds (a liveness bound)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        assert loop.time() < deadline, failure
        await asyncio.sleep(0.05)


async def replay(port: int, token: str, through: int) -> list[Row]:
    """The whole event log as a fresh ``?since=0`` WebSocket replays it, through seq ``through``."""
    rows: list[Row] = []
    url = f"ws://127.0.0.1:{port}{API}/ws?since=0"
    async with connect(url, additional_headers=bearer(token), open_timeout=10) as ws:
        while not rows or rows[-1][0] < through:
            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if message["type"] != "heartbeat":
                rows.append(_row(message))
    return rows


@dataclass
class Stream:
    """What the reader received, beside the whole log replayed afresh."""

    received: list[Row]
    log: list[Row]

    def check(self, *, including: Iterable[str] = ()) -> None:
        """Every event of the log exactly once, in seq order, and those of ``including``."""
        if self.received != self.log:
            seqs = [row[0] for row in self.received]
            missing = sorted(set(self.log) - set(self.received))
            repeated = sorted({seq for seq in seqs if seqs.count(seq) > 1})
            raise EventGap(f"missing {missing[:5]}, repeated {repeated[:5]}")
        absent = set(including) - {row[2] for row in self.received}
        if absent:
            raise EventGap(f"never received events of {sorted(absent)}")


async def settle(base: str, agent: str, admin: str, watcher: Watcher) -> Stream:
    """After the load: one last request, until the reader has its event; and the whole log."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        body = {"session_id": "end", "tool_name": "marker"}
        made = await http.post(f"{API}/requests", json=body, headers=bearer(agent))
        assert made.status_code == 201, made.text
    marker = made.json()["id"]
    await until(
        lambda: any(m["request"]["id"] == marker for m in watcher.events),
        15,
        f"the reader never saw the last event (it has {len(watcher.events)})",
    )
    received = watcher.rows()
    log = await replay(int(base.rsplit(":", 1)[1]), admin, received[-1][0])
    assert log[-1][2] == marker, "the last event is the marker's"
    assert [row[0] for row in log] == list(range(1, len(log) + 1)), "the log has a gap"
    return Stream(received, log)


async def check_stored(base: str, admin: str, load: Load) -> None:
    """Every acknowledged write is there; the audit chain verifies."""
    stored: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=base, headers=bearer(admin), timeout=30) as http:
        cursor: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": MAX_PAGE}
            if cursor is not None:
                params["cursor"] = cursor
            page = (await http.get(f"{API}/requests", params=params)).json()
            stored.update((r["id"], r["status"]) for r in page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        verify = (await http.get(f"{API}/audit/verify")).json()
    assert load.created <= stored.keys(), "an acknowledged submit is missing"
    for request_id, status in load.decided.items():
        assert stored[request_id] == status, (request_id, stored[request_id], status)
    assert verify["ok"] is True, verify


async def terminate_backends(dsn: str) -> int:
    """pg_terminate_backend on every other connection to the database; how many there were."""
    killed = await pg_fetchval(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE datname = $1 AND pid <> pg_backend_pid()",
        dsn,
        dsn.rsplit("/", 1)[1],
    )
    assert isinstance(killed, int)
    return killed


async def listening(dsn: str) -> bool:
    """Whether some connection to the database is LISTENing for events."""
    found = await pg_fetchval(
        "SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = $1 "
        "AND pid <> pg_backend_pid() AND application_name = 'signoff-follower' "
        # its last statement: the LISTEN, or the count of followers it makes after
        "AND (query LIKE 'LISTEN%' OR query LIKE 'SELECT count(*) FROM pg_stat_activity%')",
        dsn,
        dsn.rsplit("/", 1)[1],
    )
    return found is True


async def until_listening(dsn: str) -> None:
    """Wait until the server's follower is LISTENing (again)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 15
    while not await listening(dsn):
        assert loop.time() < deadline, "the follower never LISTENed again"
        await asyncio.sleep(0.1)


async def kill_connections_and_recover(dsn: str, load: Load) -> None:
    """Mid-load, terminate every connection; then wait for new submits and decisions to succeed."""
    await asyncio.sleep(0.5)
    assert await terminate_backends(dsn) >= 2  # at least the pool's and the LISTEN one
    made, decided = len(load.created), len(load.decided)
    await until(
        lambda: len(load.created) > made + 10 and len(load.decided) > decided + 10,
        15,
        "no recovery after pg_terminate_backend",
    )


async def test_pg_terminate_backend_under_load_heals_without_a_restart(
    pg_database: str, tmp_path: Path
) -> None:
    """Every PG connection killed twice mid-load: clean 503s, recovery, nothing lost or missed."""
    from signoff.bus.local import LocalBus
    from signoff.service import Service
    from signoff.store.postgres import PostgresStore
    from signoff.testing import AGENT

    with serving(pg_database, tmp_path) as running:
        server = running[0].server
        admin = server.admin_token
        assert admin is not None
        agent = agent_token(server)
        port = server.port
        # another node's writes reach this server's sockets only through its LISTEN follower
        elsewhere = Service(PostgresStore(pg_database), bus=LocalBus(), read_file=None)
        await elsewhere.open()
        foreign: list[str] = []
        try:
            async with watching(port, admin) as watcher:
                await until_listening(pg_database)
                load, stop = Load(), asyncio.Event()
                work = asyncio.create_task(run_load(server.base, agent, admin, stop, load))
                await until(lambda: load.progress() >= 40, 20, "the load is not running")
                await kill_connections_and_recover(pg_database, load)
                await kill_connections_and_recover(pg_database, load)
                await until_listening(pg_database)  # the follower reconnected on its own
                for n in range(5):
                    asked = {"session_id": "elsewhere", "tool_name": "t", "tool_args": {"n": n}}
                    foreign.append((await elsewhere.submit(asked, AGENT)).request.id)
                stop.set()
                await work
                stream = await settle(server.base, agent, admin, watcher)
        finally:
            await elsewhere.close()
        for what, status, body in load.refused:
            assert status == 503, (what, status, body)
            assert json.loads(body)["error"] == "StoreUnavailable", body
        assert not load.unreachable, load.unreachable
        await check_stored(server.base, admin, load)
    assert not running[0].tracebacks, "\n".join(running[0].tracebacks)
    stream.check(including=foreign)  # another node's events too: the follower caught up


async def test_a_reader_that_drops_its_socket_mid_load_misses_nothing(
    database: str, tmp_path: Path
) -> None:
    """A WebSocket closed mid-load and reopened with since gets every event once, in order."""
    with serving(database, tmp_path) as running:
        server = running[0].server
        admin = server.admin_token
        assert admin is not None
        agent = agent_token(server)
        port = server.port
        async with watching(port, admin) as watcher:
            load, stop = Load(), asyncio.Event()
            work = asyncio.create_task(run_load(server.base, agent, admin, stop, load))
            await until(lambda: load.progress() >= 40, 20, "the load is not running")
            away = load.progress()
            await watcher.drop(pause=1.0)
            assert load.progress() > away, "nothing happened while the reader was away"
            await until(lambda: watcher.connections == 2, 10, "the reader did not reconnect")
            await until(lambda: load.progress() >= away + 80, 20, "the load stalled")
            stop.set()
            await work
            stream = await settle(server.base, agent, admin, watcher)
        assert not load.refused and not load.unreachable, (load.refused, load.unreachable)
        await check_stored(server.base, admin, load)
    assert not running[0].tracebacks, "\n".join(running[0].tracebacks)
    stream.check()


async def test_a_reader_follows_a_server_killed_and_restarted_mid_load(
    database: str, tmp_path: Path
) -> None:
    """kill -9 mid-load, restart on the same port: the reader resumes with since, loses nothing."""
    with serving(database, tmp_path) as running:
        server = running[0].server
        admin = server.admin_token
        assert admin is not None
        agent = agent_token(server)
        port = server.port
        async with watching(port, admin) as watcher:
            load, stop = Load(), asyncio.Event()
            work = asyncio.create_task(run_load(server.base, agent, admin, stop, load))
            await until(lambda: load.progress() >= 40, 20, "the load is not running")
            await asyncio.to_thread(running[0].stop, signal.SIGKILL)
            running[0] = await asyncio.to_thread(launch, database, port, tmp_path)
            await until(lambda: watcher.connections >= 2, 15, "the reader did not reconnect")
            again = load.progress()
            await until(lambda: load.progress() >= again + 60, 20, "the load did not resume")
            stop.set()
            await work
            stream = await settle(server.base, agent, admin, watcher)
        assert load.unreachable, "the kill should land mid-load"
        assert not load.refused, load.refused
        await check_stored(server.base, admin, load)
    assert not running[0].tracebacks, "\n".join(running[0].tracebacks)
    stream.check()
