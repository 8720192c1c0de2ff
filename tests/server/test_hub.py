"""The event hub (server/hub.py) against real servers: replay then live with no gap and no
repeat while events are committed, session filters, heartbeats, shutdown, revocation, and
clients that stop reading."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import socket
import struct
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from signoff.bus.local import LocalBus
from signoff.domain.principals import Principal
from signoff.eventstream import follow_events
from signoff.server import hub as hub_module
from signoff.server.app import API, create_app
from signoff.server.hub import DirectMember, Hub, QueuedMember
from signoff.server.shutdown import GOING_AWAY
from signoff.server.wsprotocol import HubWebSocketProtocol
from signoff.service import Service
from signoff.store.sqlite import SQLiteStore
from tests.serving import (
    Server,
    agent_token,
    bearer,
    free_port,
    new_token,
    serve_for_module,
    until_listening,
)

Message = dict[str, Any]
CALL = {"session_id": "s", "tool_name": "t"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One ``signoff serve`` for the module."""
    yield from serve_for_module(tmp_path_factory.mktemp("hub"))


def ws_url(server: Server, query: str = "") -> str:
    """The server's WebSocket URL, with ``query``."""
    return server.base.replace("http", "ws") + f"{API}/ws" + (f"?{query}" if query else "")


async def create(http: httpx.AsyncClient, session: str, **args: Any) -> str:
    """File a request as the client's agent; its id."""
    made = await http.post(
        f"{API}/requests", json={"session_id": session, "tool_name": "t", "tool_args": args}
    )
    assert made.status_code == 201, made.text
    request_id: str = made.json()["id"]
    return request_id


async def events_until(ws: ClientConnection, done: Any) -> list[Message]:
    """The events (not heartbeats) read from ``ws`` until ``done(event)``, that one included."""
    seen: list[Message] = []
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), 30))
        if message["type"] == "heartbeat":
            continue
        seen.append(message)
        if done(message):
            return seen


async def sse_until(lines: AsyncIterator[str], done: Any) -> list[Message]:
    """The events read from an SSE stream until ``done(event)``, that one included; each
    event's ``id:`` line is checked against its seq."""
    seen: list[Message] = []
    event_id = None
    async for line in lines:
        if line.startswith("id: "):
            event_id = int(line[4:])
        elif line.startswith("data: "):
            message = json.loads(line[6:])
            assert message["seq"] == event_id
            seen.append(message)
            if done(message):
                return seen
    raise AssertionError("the stream ended")


async def close_code(ws: ClientConnection) -> int | None:
    """Read ``ws`` until the server closes it: the code it closed with."""
    try:
        while True:
            await asyncio.wait_for(ws.recv(), 10)
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd is not None else None


@contextlib.asynccontextmanager
async def as_agent(base: str, app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the in-process server with a new agent's token (named bot)."""
    agent, _ = await app.state.service.create_token("bot", "agent")
    async with httpx.AsyncClient(base_url=base, headers=bearer(agent), timeout=30) as http:
        yield http


async def open_sockets(
    stack: contextlib.AsyncExitStack, url: str, token: str, count: int
) -> list[ClientConnection]:
    """``count`` WebSockets on ``url`` with ``token``, closed when ``stack`` closes."""
    return [
        await stack.enter_async_context(connect(url, additional_headers=bearer(token)))
        for _ in range(count)
    ]


def seqs(events: list[Message]) -> list[int]:
    """The events' seqs, in order received."""
    return [event["seq"] for event in events]


async def test_joins_racing_a_writer_get_every_event_once_in_order(served: Server) -> None:
    """Clients joining with since= (and without) while requests are filed get, WebSocket and
    SSE alike, every event after their since exactly once, in seq order, then live ones."""
    assert served.admin_token is not None
    admin = bearer(served.admin_token)
    token = agent_token(served, "racer")
    joiners = 24
    async with (
        httpx.AsyncClient(base_url=served.base, headers=bearer(token), timeout=30) as agent,
        httpx.AsyncClient(base_url=served.base, headers=admin, timeout=30) as http,
        connect(ws_url(served), additional_headers=admin) as leader,
    ):
        first = await create(agent, "race")
        start = (await events_until(leader, lambda e: e["request"]["id"] == first))[-1]["seq"]
        written: list[str] = []  # one event each: seqs up to start + len(written) exist
        connected: list[None] = []
        all_in = asyncio.Event()

        def joined_in() -> None:
            connected.append(None)
            if len(connected) == joiners:
                all_in.set()

        async def writer() -> None:
            for n in range(60):
                written.append(await create(agent, "race", n=n))

        def is_end(event: Message) -> bool:
            return event["request"]["tool_args"].get("end") is True

        async def joiner(number: int) -> tuple[int | None, list[Message]]:
            await asyncio.sleep(random.uniform(0, 0.5))
            since = random.randint(start, start + len(written)) if number % 3 else None
            query = f"since={since}" if since is not None else ""
            if number % 2:
                async with connect(ws_url(served, query), additional_headers=admin) as ws:
                    joined_in()
                    return since, await events_until(ws, is_end)
            params = {"since": since} if since is not None else {}
            async with http.stream("GET", f"{API}/events", params=params) as stream:
                lines = stream.aiter_lines()
                assert await anext(lines) == "retry: 2000"
                joined_in()
                return since, await sse_until(lines, is_end)

        async def then_end() -> None:
            # the last event, once every joiner is in: each stream reads until it
            await writing
            await all_in.wait()
            await create(agent, "race", end=True)

        writing = asyncio.create_task(writer())
        everything, joined, _ = await asyncio.gather(
            events_until(leader, is_end),
            asyncio.gather(*(joiner(n) for n in range(joiners))),
            then_end(),
        )
    final = everything[-1]["seq"]
    assert seqs(everything) == list(range(start + 1, final + 1))
    for since, got in joined:
        numbers = seqs(got)
        begin = numbers[0] - 1 if since is None else since
        assert numbers == list(range(begin + 1, final + 1)), (since, numbers)


async def test_a_session_filter_gets_that_session_only(served: Server) -> None:
    """?session_id= on WebSocket and SSE, live and replayed: that session's events, all of them."""
    assert served.admin_token is not None
    admin = bearer(served.admin_token)
    token = agent_token(served, "sessions")
    async with (
        httpx.AsyncClient(base_url=served.base, headers=bearer(token), timeout=30) as agent,
        httpx.AsyncClient(base_url=served.base, headers=admin, timeout=30) as http,
        connect(ws_url(served, "session_id=one"), additional_headers=admin) as live,
        http.stream("GET", f"{API}/events", params={"session_id": "one"}) as sse,
    ):
        mine = [await create(agent, "one"), await create(agent, "two"), await create(agent, "one")]
        end = await create(agent, "one", end=True)

        def is_end(event: Message) -> bool:
            return bool(event["request"]["id"] == end)

        got_ws = await events_until(live, is_end)
        got_sse = await sse_until(sse.aiter_lines(), is_end)
        since = got_ws[0]["seq"] - 1
        async with connect(
            ws_url(served, f"session_id=one&since={since}"), additional_headers=admin
        ) as replayed:
            got_replay = await events_until(replayed, is_end)
    for got in (got_ws, got_sse, got_replay):
        assert [e["request"]["id"] for e in got] == [mine[0], mine[2], end]
        assert {e["request"]["session_id"] for e in got} == {"one"}


@contextlib.asynccontextmanager
async def in_process(
    tmp_path: Path, heartbeat: float, ws: type[asyncio.Protocol] = HubWebSocketProtocol
) -> AsyncIterator[tuple[str, FastAPI, str]]:
    """The app under uvicorn in this process (as ``signoff serve`` runs it: the hub's socket
    protocol ``ws``, no compression), with ``heartbeat``: its base URL, the app and an admin
    token."""
    store = SQLiteStore(str(tmp_path / "hub.db"))
    await store.open()
    service = Service(store, bus=LocalBus(), read_file=None)
    token, _ = await service.create_token("root", "admin")
    app = create_app(service, sweep=False, webhooks=False, heartbeat=heartbeat)
    port = free_port()
    config = uvicorn.Config(
        app,
        port=port,
        log_level="warning",
        ws=ws,
        ws_per_message_deflate=False,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        await until_listening(server)
        yield f"http://127.0.0.1:{port}", app, token
    finally:
        server.should_exit = True
        await task
        await store.close()


async def test_idle_streams_get_heartbeats_from_the_hub(tmp_path: Path) -> None:
    """An idle WebSocket (written to by the hub itself) and SSE stream get heartbeats."""
    async with in_process(tmp_path, heartbeat=0.1) as (base, app, token):
        hub: Hub = app.state.hub
        ws_base = base.replace("http", "ws")
        async with (
            connect(f"{ws_base}{API}/ws", additional_headers=bearer(token)) as ws,
            httpx.AsyncClient(base_url=base, headers=bearer(token), timeout=30) as http,
            http.stream("GET", f"{API}/events") as sse,
        ):
            beats = [json.loads(await asyncio.wait_for(ws.recv(), 10)) for _ in range(3)]
            assert beats == [{"type": "heartbeat"}] * 3
            lines = sse.aiter_lines()
            comments: list[str] = []
            while len(comments) < 2:
                line = await asyncio.wait_for(anext(lines), 10)
                if line.startswith(":"):
                    comments.append(line)
            assert comments == [": heartbeat"] * 2
            members = [m for group in hub._groups.values() for m in group]
            assert hub.members == 2
            assert sum(isinstance(m, DirectMember) for m in members) == 1


async def test_a_fan_out_in_slices_still_gives_everyone_everything_once_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With two members written to per turn of the loop and no wait between flushes, events
    committed while fan-outs are under way, clients leaving and clients joining with since=
    in the middle of them (WebSockets of an admin, event streams of the agent): each client
    still gets every event after its since once, in seq order, and the fan-outs did go in
    slices."""
    monkeypatch.setattr(hub_module, "SLICE", 2)
    later_slices = 0
    write = Hub._write

    def counted(hub: Hub, *, whole: bool = False) -> None:
        nonlocal later_slices
        later_slices += hub._written > 0
        write(hub, whole=whole)

    monkeypatch.setattr(Hub, "_write", counted)
    async with in_process(tmp_path, heartbeat=5) as (base, app, token):
        app.state.hub.coalesce = 0
        url = base.replace("http", "ws") + f"{API}/ws"
        async with as_agent(base, app) as http, contextlib.AsyncExitStack() as sockets:
            stayers = await open_sockets(sockets, url, token, 12)
            leavers = await open_sockets(sockets, url, token, 4)
            first = await create(http, "slices")
            for ws in [*stayers, *leavers]:
                got = await events_until(ws, lambda e: e["request"]["id"] == first)
            start = got[-1]["seq"]

            def is_end(event: Message) -> bool:
                return event["request"]["tool_args"].get("end") is True

            async def writer() -> None:
                for n in range(0, 48, 4):  # four at once: commits land mid fan-out
                    await asyncio.gather(*(create(http, "slices", n=n + k) for k in range(4)))
                await create(http, "slices", end=True)

            async def joiner(number: int) -> tuple[int, list[Message]]:
                await asyncio.sleep(number * 0.03)
                since = start + number * 3
                if number % 2:  # the agent's own event stream: another group, queued
                    params = {"since": since}
                    async with http.stream("GET", f"{API}/events", params=params) as stream:
                        lines = stream.aiter_lines()
                        assert await anext(lines) == "retry: 2000"
                        return since, await sse_until(lines, is_end)
                async with connect(f"{url}?since={since}", additional_headers=bearer(token)) as ws:
                    return since, await events_until(ws, is_end)

            async def leaver(ws: ClientConnection, number: int) -> None:
                for _ in range(number * 5):  # it leaves mid-stream, having read some
                    await events_until(ws, lambda _: True)
                await ws.close()

            joining = asyncio.gather(*(joiner(n) for n in range(6)))
            staying = asyncio.gather(*(events_until(ws, is_end) for ws in stayers))
            await asyncio.gather(writer(), *(leaver(ws, n) for n, ws in enumerate(leavers)))
            joined, everything = await joining, await staying
    final = everything[0][-1]["seq"]
    for events in everything:
        assert seqs(events) == list(range(start + 1, final + 1))
    for since, events in joined:
        assert seqs(events) == list(range(since + 1, final + 1)), since
    assert later_slices > 0


async def test_losing_the_event_stream_sends_what_was_pending_then_closes_1011(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the hub's read of the stream fails (the store out of reach), it first writes the
    fan-out under way and the events it held back, then closes every socket 1011: a client
    has each event up to the failure once, and reconnects with since= for the rest."""
    monkeypatch.setattr(hub_module, "SLICE", 1)
    follow = follow_events

    async def failing(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        seen = 0
        async for event in follow(*args, **kwargs):
            yield event
            seen += event is not None
            if seen == 4:
                raise OSError("the store went away")

    monkeypatch.setattr(hub_module, "follow_events", failing)
    async with in_process(tmp_path, heartbeat=5) as (base, app, token):
        # after the first flush, the rest waits for the failure
        app.state.hub.coalesce = 10
        monkeypatch.setattr(hub_module, "COALESCE_PER_MEMBER", 10)
        url = base.replace("http", "ws") + f"{API}/ws"
        async with as_agent(base, app) as http, contextlib.AsyncExitStack() as sockets:
            clients = await open_sockets(sockets, url, token, 5)
            made = [await create(http, "lost", n=n) for n in range(4)]
            for ws in clients:
                got = await events_until(ws, lambda e: e["request"]["id"] == made[-1])
                assert [e["request"]["id"] for e in got] == made
                assert await close_code(ws) == 1011


async def test_writing_everything_now_finishes_the_fan_out_under_way_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the hub runs when its stream fails: the fan-out halfway through its slices is
    finished, then the events held back go out, so every member has each event once, in
    order, before it is closed."""
    monkeypatch.setattr(hub_module, "SLICE", 1)
    store = SQLiteStore(str(tmp_path / "hub.db"))
    await store.open()
    try:
        service = Service(store, bus=LocalBus(), read_file=None)
        bot = Principal(name="bot", role="agent")
        for n in range(3):
            await service.submit({"session_id": "s", "tool_name": "t", "tool_args": {"n": n}}, bot)
        events = await store.list_events(after_seq=0, limit=10)
        hub = Hub(service, heartbeat=60, coalesce=0)
        members = [QueuedMember((None, None), 0, sse=False) for _ in range(3)]
        for member in members:
            hub._join(member)
        hub._queue(events[0])
        await asyncio.sleep(0)  # its first slice: one member written
        assert hub._written == 1
        hub._queue(events[1])  # held back until the fan-out ends
        hub._queue(events[2])
        hub._flush_all()
        for member in members:
            got = [json.loads(text)["seq"] for text in await member.take()]
            assert got == [event.seq for event in events]
        assert not hub._writes and hub.last == events[-1].seq
    finally:
        await store.close()


async def test_the_wait_between_flushes_is_the_members_share_of_coalesce(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event that comes right after a flush waits ``COALESCE_PER_MEMBER`` for each member,
    up to ``coalesce``: a server few are watching holds no event back, and one with
    thousands of sockets writes to each of them at most once per ``coalesce``."""
    store = SQLiteStore(str(tmp_path / "hub.db"))
    await store.open()
    try:
        service = Service(store, bus=LocalBus(), read_file=None)
        await service.submit(
            {"session_id": "s", "tool_name": "t"}, Principal(name="bot", role="agent")
        )
        event = (await store.list_events(after_seq=0, limit=1))[0]
        monkeypatch.setattr(hub_module, "COALESCE_PER_MEMBER", 1.0)
        hub = Hub(service, heartbeat=60, coalesce=10)
        waits = []
        for members in (1, 5, 25):
            while hub.members < members:
                hub._join(QueuedMember((None, None), 0, sse=False))
            hub._flushed_at = asyncio.get_running_loop().time()
            hub._queue(event)
            handle = hub._flush_handle
            assert isinstance(handle, asyncio.TimerHandle)
            waits.append(round(handle.when() - hub._flushed_at, 3))
            handle.cancel()
            hub._flush_handle, hub._pending = None, []
        assert waits == [1.0, 5.0, 10.0]
    finally:
        await store.close()


def handlers() -> int:
    """The WebSocket handlers uvicorn runs in this loop now (one task each, while it runs)."""
    return sum(
        getattr(task.get_coro(), "__qualname__", "").endswith(".run_asgi")
        for task in asyncio.all_tasks()
    )


async def test_idle_sockets_hold_no_handler_and_still_get_everything(tmp_path: Path) -> None:
    """Once joined, an idle WebSocket's handler has returned (no task per socket): the hub
    keeps it, writes its events and heartbeats, and what the client sends (more than a
    paused read would buffer) is read and dropped; the socket stays counted as open."""
    async with in_process(tmp_path, heartbeat=0.2) as (base, app, token):
        hub: Hub = app.state.hub
        url = base.replace("http", "ws") + f"{API}/ws"
        async with contextlib.AsyncExitStack() as sockets:
            idle = await open_sockets(sockets, url, token, 20)
            for _ in range(500):
                if hub.members == 20 and handlers() == 0:
                    break
                await asyncio.sleep(0.02)
            assert hub.members == 20
            assert handlers() == 0
            assert app.state.metrics.websockets._value.get() == 20
            chatty = idle[0]
            for _ in range(200):  # clients of /ws have nothing to say; it is dropped unread
                await chatty.send("y" * 4096)
            async with httpx.AsyncClient(base_url=base, headers=bearer(token), timeout=30) as http:
                agent, _ = await app.state.service.create_token("bot", "agent")
                made = await http.post(f"{API}/requests", json=CALL, headers=bearer(agent))
                assert made.status_code == 201, made.text
            for ws in idle:
                got = await events_until(ws, lambda e: e["request"]["id"] == made.json()["id"])
                assert [e["type"] for e in got] == ["created"]
            assert json.loads(await asyncio.wait_for(chatty.recv(), 10)) == {"type": "heartbeat"}
            assert hub.members == 20


async def test_a_client_closing_its_idle_socket_frees_its_member_and_logs_its_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A client that closes an idle socket the hub kept leaves the hub, the server's count of
    open streams and the WebSocket gauge, and gets its access line (101, its duration, who)
    when it closes, not when it joined."""
    caplog.set_level(logging.INFO, logger="signoff.http")
    async with in_process(tmp_path, heartbeat=5) as (base, app, token):
        hub: Hub = app.state.hub
        url = base.replace("http", "ws") + f"{API}/ws?session_id=s"
        async with connect(url, additional_headers=bearer(token)):
            for _ in range(500):
                if hub.members == 1 and handlers() == 0:
                    break
                await asyncio.sleep(0.02)
            assert hub.members == 1
            await asyncio.sleep(0.3)  # a line at join time would come now, short
            assert not [r for r in caplog.records if r.getMessage().startswith("WS ")]
        for _ in range(500):
            if hub.members == 0 and app.state.metrics.websockets._value.get() == 0:
                break
            await asyncio.sleep(0.02)
        assert hub.members == 0 and hub._groups == {}
        assert app.state.metrics.websockets._value.get() == 0
        assert app.state.shutdown._streams == 0
        lines = [r for r in caplog.records if r.getMessage().startswith("WS ")]
        assert [r.getMessage() for r in lines] == [f"WS {API}/ws 101"]
        data = vars(lines[0])["signoff_fields"]
        assert data["who"] == "root" and data["duration_ms"] >= 300


async def test_a_socket_the_hub_cannot_write_to_gets_the_same_through_asgi(
    tmp_path: Path,
) -> None:
    """Under uvicorn's own WebSocket protocol the hub queues the events for the handler to
    send: replay, live events and heartbeats arrive as they do on ``signoff serve``."""
    async with in_process(tmp_path, heartbeat=0.1, ws=WebSocketsSansIOProtocol) as (
        base,
        app,
        token,
    ):
        hub: Hub = app.state.hub
        async with httpx.AsyncClient(base_url=base, headers=bearer(token), timeout=30) as http:
            agent, _ = await app.state.service.create_token("bot", "agent")
            headers = bearer(agent)
            before = (await http.post(f"{API}/requests", json=CALL, headers=headers)).json()
            url = base.replace("http", "ws") + f"{API}/ws?since=0"
            async with connect(url, additional_headers=bearer(token)) as ws:
                replayed = json.loads(await asyncio.wait_for(ws.recv(), 10))
                assert replayed["request"]["id"] == before["id"]
                assert json.loads(await asyncio.wait_for(ws.recv(), 10)) == {"type": "heartbeat"}
                members = [m for group in hub._groups.values() for m in group]
                assert [type(m) for m in members] == [QueuedMember]
                live = (await http.post(f"{API}/requests", json=CALL, headers=headers)).json()
                got = await events_until(ws, lambda e: e["request"]["id"] == live["id"])
                assert [e["request"]["id"] for e in got] == [live["id"]]
                assert got[0]["seq"] == replayed["seq"] + 1


async def test_shutdown_closes_joined_sockets_with_going_away(tmp_path: Path) -> None:
    """When the server begins to stop, each joined WebSocket is closed with 1001 and each SSE
    stream ends saying why; the hub is left with no member."""
    async with in_process(tmp_path, heartbeat=5) as (base, app, token):
        hub: Hub = app.state.hub
        ws_base = base.replace("http", "ws")
        async with (
            connect(f"{ws_base}{API}/ws?since=0", additional_headers=bearer(token)) as ws,
            httpx.AsyncClient(base_url=base, headers=bearer(token), timeout=30) as http,
            http.stream("GET", f"{API}/events?since=0") as sse,
        ):
            for _ in range(500):
                if hub.members == 2:
                    break
                await asyncio.sleep(0.02)
            assert hub.members == 2
            app.state.shutdown.begin()  # what `signoff serve` does first on SIGTERM
            assert await close_code(ws) == GOING_AWAY
            tail = [line async for line in sse.aiter_lines()]
            assert ": stream ended: the server is shutting down" in tail
            assert hub.members == 0


async def test_a_revoked_token_loses_its_streams_and_no_one_else_does(served: Server) -> None:
    """Revoking an agent's token closes its WebSocket with 4401 and ends its SSE stream; the
    other agent's socket, in the same hub group's neighbour, keeps getting events."""
    doomed, token_id = new_token(served, "doomed", "agent")
    other = agent_token(served, "survivor")
    async with (
        httpx.AsyncClient(base_url=served.base, headers=bearer(other), timeout=30) as agent,
        httpx.AsyncClient(base_url=served.base, headers=bearer(doomed), timeout=30) as http,
        connect(ws_url(served), additional_headers=bearer(doomed)) as gone,
        connect(ws_url(served), additional_headers=bearer(other)) as kept,
        http.stream("GET", f"{API}/events") as sse,
    ):
        done = await asyncio.to_thread(served.cli, "token", "revoke", token_id)
        assert done.returncode == 0, done.stderr
        assert await close_code(gone) == 4401
        tail = [line async for line in sse.aiter_lines()]
        assert any(line.startswith(": stream ended:") for line in tail), tail
        later = await create(agent, "after")
        got = await events_until(kept, lambda e: e["request"]["id"] == later)
        assert {e["request"]["requested_by"] for e in got} == {"survivor"}


def _raw_websocket(port: int, token: str, query: str) -> socket.socket:
    """A WebSocket handshake over a plain socket with a tiny receive buffer, that then reads
    nothing: a client that stopped reading."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(
        (
            f"GET {API}/ws?{query} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


def _close_code(sock: socket.socket) -> int | None:
    """Read what the server sent until its close frame (its code) or the end of the
    connection (None: cut without one)."""
    sock.settimeout(30)
    data = b""
    while True:
        try:
            chunk = sock.recv(1 << 16)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return None
        data += chunk
        code = _close_frame_code(data)
        if code is not None:
            return code


def _close_frame_code(data: bytes) -> int | None:
    """The code of the close frame among the server's frames in ``data``, if it is there."""
    at = 0
    while at + 2 <= len(data):
        opcode, length = data[at] & 0x0F, data[at + 1] & 0x7F
        at += 2
        if length == 126:
            (length,) = struct.unpack("!H", data[at : at + 2])
            at += 2
        elif length == 127:
            (length,) = struct.unpack("!Q", data[at : at + 8])
            at += 8
        if opcode == 0x8 and at + 2 <= len(data):
            code: int = struct.unpack("!H", data[at : at + 2])[0]
            return code
        at += length
    return None


async def websocket_gauge(http: httpx.AsyncClient) -> float:
    """The server's ``signoff_websocket_clients`` gauge."""
    text = (await http.get("/metrics")).text
    line = next(line for line in text.splitlines() if line.startswith("signoff_websocket_clients"))
    return float(line.split()[-1])


async def test_a_client_that_stops_reading_is_dropped_and_catches_up_with_since(
    served: Server,
) -> None:
    """A socket that reads nothing is disconnected once its backlog passes the hub's limit,
    while a reading client gets every event; reconnecting with since= it gets them all."""
    assert served.admin_token is not None
    admin = bearer(served.admin_token)
    token = agent_token(served, "bulky")
    port = served.port
    async with (
        httpx.AsyncClient(base_url=served.base, headers=bearer(token), timeout=30) as agent,
        httpx.AsyncClient(base_url=served.base, headers=admin, timeout=30) as http,
        connect(ws_url(served), additional_headers=admin, max_size=None) as reader,
    ):
        before = await create(agent, "bulk")
        since = (await events_until(reader, lambda e: e["request"]["id"] == before))[-1]["seq"]
        stalled = await asyncio.to_thread(_raw_websocket, port, served.admin_token, "")
        try:
            for _ in range(200):
                if await websocket_gauge(http) == 2:
                    break
                await asyncio.sleep(0.02)
            blob = "x" * 60_000
            reading = asyncio.create_task(  # reads as they come: it never falls behind
                events_until(reader, lambda e: e["request"]["tool_args"].get("n") == 39)
            )
            made = [await create(agent, "bulk", blob=blob, n=n) for n in range(40)]
            got = await reading
            assert [e["request"]["id"] for e in got] == made
            for _ in range(500):  # the stalled one is dropped: only the reader is left
                if await websocket_gauge(http) == 1:
                    break
                await asyncio.sleep(0.02)
            assert await websocket_gauge(http) == 1
            code = await asyncio.to_thread(_close_code, stalled)
            assert code in (1013, None)
        finally:
            stalled.close()
        async with connect(
            ws_url(served, f"since={since}"), additional_headers=admin, max_size=None
        ) as again:
            caught_up = await events_until(again, lambda e: e["request"]["id"] == made[-1])
    assert [e["request"]["id"] for e in caught_up] == made
