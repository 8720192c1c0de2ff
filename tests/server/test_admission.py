"""The call chain's gate (server/admission.py) and the lazy events under ``signoff serve``'s
HTTP protocol (server/sockets.py): a burst enters a few at a time, a request that hangs
gives its slot back, an idle connection keeps no queue of waiters."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections import deque
from collections.abc import AsyncIterator

import uvicorn
from starlette.types import Receive, Scope, Send

from signoff.server.admission import Admission
from signoff.server.sockets import LazyEvent, guarded_protocol
from tests.serving import free_port, until_listening


class Held:
    """An ASGI app whose requests stay in it until released; counts how many are inside."""

    def __init__(self) -> None:
        self.inside = 0
        self.most = 0
        self.released = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.inside += 1
        self.most = max(self.most, self.inside)
        try:
            if scope["path"] == "/held":
                await self.released.wait()
        finally:
            self.inside -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


@contextlib.asynccontextmanager
async def serving(app: Held, *, in_app: int, lease: float) -> AsyncIterator[int]:
    """``app`` under uvicorn in this process with the protocol ``signoff serve`` runs."""
    port = free_port()
    http = guarded_protocol(header_timeout=30, max_connections=100, in_app=in_app, lease=lease)
    config = uvicorn.Config(app, port=port, log_level="warning", http=http, lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        await until_listening(server)
        yield port
    finally:
        app.released.set()
        server.should_exit = True
        await task


async def get(port: int, path: str) -> bytes:
    """One GET on its own connection; the answer's status line."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n".encode())
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer.split(b"\r\n", 1)[0]


def queues() -> int:
    """Events in this process that hold a queue of waiters (a deque) already."""
    return sum(
        1
        for thing in gc.get_objects()
        if isinstance(thing, asyncio.Event) and isinstance(thing._waiters, deque)
    )


async def until(condition: object) -> None:
    for _ in range(500):
        if callable(condition) and condition():
            return
        await asyncio.sleep(0.01)


async def test_a_burst_enters_the_app_a_few_at_a_time_and_every_request_is_answered() -> None:
    """With a gate of 2, six requests at once are never more than two in the app."""
    app = Held()
    async with serving(app, in_app=2, lease=60) as port:
        calls = [asyncio.create_task(get(port, "/held")) for _ in range(6)]
        await until(lambda: app.inside == 2)
        await asyncio.sleep(0.2)  # the other four reached the server: they wait their turn
        assert app.inside == 2
        app.released.set()
        assert await asyncio.gather(*calls) == [b"HTTP/1.1 200 OK"] * 6
    assert app.most == 2


async def test_a_request_that_hangs_gives_its_slot_back_after_its_lease() -> None:
    """A gate of 1 held by a hanging request still lets the next one through."""
    app = Held()
    async with serving(app, in_app=1, lease=0.05) as port:
        hanging = asyncio.create_task(get(port, "/held"))
        await until(lambda: app.inside == 1)
        assert await get(port, "/quick") == b"HTTP/1.1 200 OK"
        assert not hanging.done()
        app.released.set()
        assert await hanging == b"HTTP/1.1 200 OK"


async def test_a_waiter_cancelled_in_the_queue_loses_no_slot() -> None:
    """A request gone while it waited for a slot neither takes one nor keeps others out."""
    admission = Admission(limit=1, lease=60)
    first = await admission.enter()
    gone = asyncio.create_task(admission.enter())
    handed = asyncio.create_task(admission.enter())
    await until(lambda: admission.waiting == 2)
    gone.cancel()
    first.leave()
    second = await asyncio.wait_for(handed, 1)
    assert gone.cancelled()
    second.leave()
    second.leave()  # a second leave (its lease's, or a repeat) gives back nothing more
    third = await asyncio.wait_for(admission.enter(), 1)
    later = asyncio.create_task(admission.enter())
    await until(lambda: admission.waiting == 1)
    assert not later.done()  # the one slot is third's: the repeat did not make two
    third.leave()
    (await asyncio.wait_for(later, 1)).leave()


async def test_idle_connections_keep_no_queue_of_waiters() -> None:
    """uvicorn's per-connection event makes its deque only once something waits on it."""
    app = Held()
    async with serving(app, in_app=8, lease=60) as port:
        gc.collect()
        before = queues()
        opened = [await asyncio.open_connection("127.0.0.1", port) for _ in range(20)]
        await asyncio.sleep(0.2)  # the server has accepted them all
        gc.collect()
        after = queues()
        for _, writer in opened:
            writer.close()
    assert after - before < 5  # asyncio.Event makes one at once: 20 for the 20


async def test_the_lazy_event_waits_sets_and_clears_as_asyncio_does() -> None:
    """LazyEvent wakes its waiters on set(), and waits again after clear()."""
    event = LazyEvent()
    waiter = asyncio.create_task(event.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    event.set()
    assert await asyncio.wait_for(waiter, 1) is True
    event.clear()
    again = asyncio.create_task(event.wait())
    await asyncio.sleep(0)
    assert not again.done()
    event.set()
    assert await asyncio.wait_for(again, 1) is True
