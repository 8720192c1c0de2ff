"""One fan-out for every WebSocket and SSE client: the cost is per event, not per client.

The hub reads the event stream once (:func:`~signoff.eventstream.follow_events` as a
principal that sees everything: in seq order, gap-free, back to the log after a gap or a
lag) and sends each event to the connections that may see it. Connections are grouped by
what they may see: ``(None, session)`` for admins and approvers (everything, or one
session's), ``(agent, session)`` for an agent (its own requests, or one session's of them),
session None meaning no session filter. An event goes to at most four groups, found by four
dict lookups, never by asking every connection.

Each event is made into bytes once (its JSON text, its WebSocket frame, its SSE chunk), and
the events that arrive together (under load, within :data:`COALESCE_PER_MEMBER` for each
connection, at most :data:`COALESCE`, of the last flush) are joined once per group, so each
connection gets one write per batch: a plain ``transport.write`` on a WebSocket served by
:class:`~signoff.server.wsprotocol.HubWebSocketProtocol`, no coroutine, task or queue per
connection per event. The writes of a fan-out go :data:`SLICE` connections per turn of the
event loop, so that requests are answered between them; the next fan-out waits for the
last slice. Other connections (SSE streams, whose HTTP chunked framing belongs to
the HTTP protocol; WebSockets over another transport, as in-process test clients) are fed the same
pre-made text through a small queue their own handler drains.

A connection (re)joining with ``since=S`` first gets the stored events after ``S`` up to
:attr:`Hub.last` (the last seq fanned out), and joins its group in the same synchronous
step in which it sees it is there: no gap, no repeat. A connection whose unsent bytes pass
:data:`BACKLOG` is removed and closed (WebSocket 1013, SSE ends) at once: a client that
stopped reading never holds more memory than that, never delays the others, and misses
nothing when it reconnects with ``since=``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from abc import ABC, abstractmethod
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator, Iterable
from functools import cached_property
from typing import Any

from websockets.frames import Frame, Opcode

from signoff.domain.events import Event
from signoff.domain.principals import Principal
from signoff.domain.requests import RequestAdapter
from signoff.eventstream import follow_events, only_requester, visible_to
from signoff.server.wsprotocol import HubWebSocketProtocol
from signoff.service import Service

__all__ = [
    "BACKLOG",
    "COALESCE",
    "COALESCE_PER_MEMBER",
    "HEARTBEAT_TEXT",
    "SLICE",
    "TOO_SLOW",
    "DirectMember",
    "Hub",
    "Member",
    "QueuedMember",
    "event_message",
    "event_text",
    "key_of",
    "sse_chunk",
]

BACKLOG = 512 * 1024
"""Bytes a connection may have waiting to be sent before it is dropped as too slow."""

SLICE = 100
"""Members written to in one turn of the event loop. A write costs the kernel 7-10 us, so a
flush to 1,000 WebSockets took 13-25 ms; in slices, a request's answer (an agent's long
poll woken by a decision) waits for one slice at most, not for the whole fan-out: at 60
lifecycles a second that took the agents' wait p99 from 24-65 ms to 19-42 ms."""

TOO_SLOW = 1013
"""The WebSocket close code for a client dropped for falling behind (try again later)."""

COALESCE = 0.04
"""Seconds between two flushes at the most (see :data:`COALESCE_PER_MEMBER`). An event on a
quiet server goes out at once; under load, the events of the next 40 ms go out together,
one write per connection instead of one per event. With 1,000 clients (bench/server.py)
flushing at most every 20 ms took the server's CPU per delivery from 1.7-1.8 us to 0.6-0.8
us and the run from 53-57 to 84-97 lifecycles/s. On a 2-core host where the server needed
a core at 60 lifecycles a second, 40 ms took it to 81-90% and the decision's p99 to every
client from 128-412 ms to 46-129 ms: each socket write costs the kernel 7-10 us, and half
as many of them leave the CPU that the latency was queueing for (bench/RESULTS.md, "Met on
the slower host")."""

COALESCE_PER_MEMBER = 40e-6
"""Seconds between two flushes for each member, up to :data:`COALESCE`: 40 ms with 1,000,
0.4 ms with 10. A flush costs a write to each member (7-10 us), so this keeps the hub's
flushes to about a quarter of the loop's time, without holding back the events of a
server few are watching: with one WebSocket (an approver deciding as events arrive) a
fixed 40 ms halved the lifecycles a second and put each event 40 ms late."""

HEARTBEAT_TEXT = json.dumps({"type": "heartbeat"})
"""A WebSocket heartbeat message."""

_SSE_HEARTBEAT = ": heartbeat\n\n"
_REPLAY_PAGE = 500
_RETRY = 1.0
_EVERYONE = Principal(name="signoff-hub", role="admin")

Key = tuple[str | None, str | None]
"""A group: the agent whose requests it sees (None: everyone's), the session (None: all)."""

logger = logging.getLogger("signoff.server.hub")


_TEXT_CACHE: OrderedDict[tuple[int, str, int], str] = OrderedDict()
_TEXT_CACHE_SIZE = 4096


def event_text(event: Event) -> str:
    """The event as JSON text, serialized once however many clients receive it."""
    # seq alone is not unique across databases in one process; the request id is random
    key = (event.seq, event.request.id, event.request.version)
    text = _TEXT_CACHE.get(key)
    if text is None:
        text = json.dumps(event_message(event), ensure_ascii=False)
        _TEXT_CACHE[key] = text
        if len(_TEXT_CACHE) > _TEXT_CACHE_SIZE:
            _TEXT_CACHE.popitem(last=False)
    return text


def event_message(event: Event) -> dict[str, Any]:
    """The wire form of an event: ``{seq, type, at, request}``."""
    return {
        "seq": event.seq,
        "type": event.type,
        "at": event.at.isoformat(),
        "request": RequestAdapter.dump_python(event.request, mode="json"),
    }


def sse_chunk(event: Event, text: str) -> str:
    """An event as an SSE message: ``id:``, ``event:`` and ``data:`` lines."""
    return f"id: {event.seq}\nevent: {event.type}\ndata: {text}\n\n"


def _frame(text: str) -> bytes:
    return Frame(Opcode.TEXT, text.encode()).serialize(mask=False, extensions=[])


class _Prepared:
    """One event's bytes, each form made once, when some connection first needs it."""

    def __init__(self, event: Event) -> None:
        self.event = event

    @cached_property
    def text(self) -> str:
        return event_text(self.event)

    @cached_property
    def frame(self) -> bytes:
        return _frame(self.text)

    @cached_property
    def chunk(self) -> str:
        return sse_chunk(self.event, self.text)


class Batch:
    """The events of one fan-out that one group may see, in each form joined once."""

    def __init__(self, events: list[_Prepared]) -> None:
        self.events = events
        self.first = events[0].event.seq
        self.last = events[-1].event.seq

    @cached_property
    def frames(self) -> bytes:
        """Every event's WebSocket frame, back to back: one write."""
        return b"".join(prepared.frame for prepared in self.events)

    @cached_property
    def chunks(self) -> str:
        """Every event's SSE message, back to back."""
        return "".join(prepared.chunk for prepared in self.events)

    @cached_property
    def texts(self) -> list[str]:
        """Every event's JSON text (one WebSocket message each)."""
        return [prepared.text for prepared in self.events]

    def after(self, seq: int) -> Batch | None:
        """The events past ``seq`` (a member that joined with a ``since`` ahead of the log)."""
        rest = [prepared for prepared in self.events if prepared.event.seq > seq]
        return Batch(rest) if rest else None


class Member(ABC):
    """A connection in the hub: what it may see and how far it got."""

    __slots__ = ("after", "closed", "key", "sent_at")

    def __init__(self, key: Key, after: int) -> None:
        self.key = key
        self.after = after
        """The last seq it was sent (or asked to start after)."""
        self.sent_at = 0.0
        self.closed = False

    @abstractmethod
    def deliver(self, batch: Batch) -> bool:
        """Send ``batch``; False when the connection is gone or too far behind."""

    @abstractmethod
    def heartbeat(self) -> bool:
        """Send a heartbeat; False when the connection is gone or too far behind."""

    @abstractmethod
    def drop(self, code: int, reason: str) -> None:
        """End the connection (WebSocket ``code``; SSE streams just end); idempotent."""


class DirectMember(Member):
    """A WebSocket written to straight from the hub, through its uvicorn protocol."""

    __slots__ = ("socket",)

    _heartbeat = _frame(HEARTBEAT_TEXT)

    def __init__(self, key: Key, after: int, socket: HubWebSocketProtocol) -> None:
        super().__init__(key, after)
        self.socket = socket

    def deliver(self, batch: Batch) -> bool:
        return 0 <= self.socket.write_frames(batch.frames) <= BACKLOG

    def heartbeat(self) -> bool:
        return 0 <= self.socket.write_frames(self._heartbeat) <= BACKLOG

    def drop(self, code: int, reason: str) -> None:
        self.closed = True
        self.socket.close_now(code, reason)


class QueuedMember(Member):
    """A connection its own handler feeds: the hub queues pre-made text and wakes it."""

    __slots__ = ("_queued", "_size", "_waiter", "ended", "sse")

    def __init__(self, key: Key, after: int, *, sse: bool) -> None:
        super().__init__(key, after)
        self.sse = sse
        """SSE chunks (one string per batch) rather than WebSocket texts (one per event)."""
        self._queued: deque[str] = deque()
        self._size = 0
        self._waiter: asyncio.Future[None] | None = None
        self.ended: tuple[int, str] | None = None
        """Why the hub dropped it (a WebSocket close code and reason), once it has."""

    def deliver(self, batch: Batch) -> bool:
        if self.sse:
            return self._put((batch.chunks,))
        return self._put(batch.texts)

    def heartbeat(self) -> bool:
        return self._put((_SSE_HEARTBEAT if self.sse else HEARTBEAT_TEXT,))

    def drop(self, code: int, reason: str) -> None:
        self.closed = True
        if self.ended is None:
            self.ended = (code, reason)
        self._wake()

    def stop(self) -> None:
        """End the connection for a reason its handler knows (credential, shutdown)."""
        self.closed = True
        self._wake()

    def _put(self, texts: Iterable[str]) -> bool:
        for text in texts:
            self._queued.append(text)
            self._size += len(text)
        self._wake()
        return self._size <= BACKLOG

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def take(self) -> list[str]:
        """What was queued since the last call, waiting for some; empty once dropped."""
        while not self._queued and not self.closed:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if self.closed:
            return []
        taken = list(self._queued)
        self._queued.clear()
        self._size = 0
        return taken


def key_of(principal: Principal, session_id: str | None) -> Key:
    """The group of a connection opened by ``principal`` with the ``session_id`` filter."""
    return (only_requester(principal), session_id)


class Hub:
    """The app's one reader of the event stream, fanning each event out to its groups."""

    def __init__(self, service: Service, *, heartbeat: float, coalesce: float = COALESCE) -> None:
        self.service = service
        self.heartbeat = heartbeat
        self.coalesce = coalesce
        """Seconds between two flushes at the most (see :data:`COALESCE`)."""
        self._flushed_at = -math.inf
        self.last = 0
        """The seq of the last event fanned out (every member has been sent it, if it may)."""
        self._groups: dict[Key, set[Member]] = {}
        self._pending: list[_Prepared] = []
        self._writes: list[tuple[Member, Batch]] = []
        """The fan-out under way: each member and its batch, in the order written."""
        self._written = 0
        """How many of :attr:`_writes` are done."""
        self._flush_handle: asyncio.Handle | None = None
        """The flush due, or the next slice of the one under way."""
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.members = 0
        """Connections in the hub now."""

    @property
    def running(self) -> bool:
        """Whether the hub runs in the current event loop (else handlers follow on their own)."""
        try:
            return self._loop is asyncio.get_running_loop() and bool(self._tasks)
        except RuntimeError:
            return False

    async def start(self) -> None:
        """Start reading events after the last one stored."""
        self.last = await self.service.store.last_event_seq()
        self._loop = asyncio.get_running_loop()
        self._tasks = [
            asyncio.create_task(self._read(), name="signoff-hub"),
            asyncio.create_task(self._beat(), name="signoff-hub-heartbeat"),
        ]

    async def stop(self) -> None:
        """Stop reading; members still in are closed (1001) for their clients to come back."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        self._writes, self._written = [], 0
        self._drop_all(1001, "the server is shutting down")

    async def replay(
        self, member: Member, principal: Principal, session_id: str | None
    ) -> AsyncGenerator[Event, None]:
        """The stored events after ``member.after`` up to :attr:`last` that it may see; then
        it joins its group, in the step that finds it has reached :attr:`last`."""
        store = self.service.store
        while not member.closed:
            last = self.last
            if member.after >= last:
                self._join(member)
                return
            batch = await store.list_events(after_seq=member.after, limit=_REPLAY_PAGE)
            if not batch:  # the events up to ``last`` were committed before the read began
                member.after = last
            for stored in batch:
                if stored.seq > self.last:  # not fanned out yet: it will come live
                    member.after = self.last
                    break
                member.after = stored.seq
                if visible_to(stored, principal, session_id):
                    yield stored
                if member.closed:
                    return

    def leave(self, member: Member) -> None:
        """Take ``member`` out (its connection ended); idempotent."""
        group = self._groups.get(member.key)
        if group is not None and member in group:
            group.discard(member)
            self.members -= 1
            if not group:
                del self._groups[member.key]

    def _join(self, member: Member) -> None:
        member.sent_at = asyncio.get_running_loop().time()
        self._groups.setdefault(member.key, set()).add(member)
        self.members += 1

    async def _read(self) -> None:
        """Follow the stream for good: after a failure, from :attr:`last` again."""
        while True:
            try:
                async for event in follow_events(
                    self.service, _EVERYONE, since=self.last, session_id=None, heartbeat=3600
                ):
                    if event is not None:
                        self._queue(event)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the store out of reach: members come back with since=
                logger.warning("the event hub lost the event stream: %r", exc)
                self._flush_all()
                self._drop_all(1011, "the server lost its event stream; reconnect with since=")
                await asyncio.sleep(_RETRY)

    def _queue(self, event: Event) -> None:
        # events that arrive together go out together: the flush runs once this task waits,
        # and no sooner after the one before than the members' share of `coalesce`
        # (while a fan-out is under way the handle is its next slice's, which schedules the
        # next flush when the fan-out ends: fan-outs never overlap)
        self._pending.append(_Prepared(event))
        if self._flush_handle is None:
            self._schedule()

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        gap = min(self.coalesce, self.members * COALESCE_PER_MEMBER)
        due = self._flushed_at + gap - loop.time()
        if due > 0:
            self._flush_handle = loop.call_later(due, self._flush)
        else:
            self._flush_handle = loop.call_soon(self._flush)

    def _flush(self, *, whole: bool = False) -> None:
        """Fan out the pending events: each member's batch, written :data:`SLICE` members
        at a time (or all at once when ``whole``)."""
        self._flush_handle = None
        self._flushed_at = asyncio.get_running_loop().time()
        pending, self._pending = self._pending, []
        if not pending:
            return
        groups = self._groups
        wanted: dict[Key, list[_Prepared]] = {}
        for prepared in pending:
            request = prepared.event.request
            agent, session = request.requested_by, request.session_id
            keys: tuple[Key, ...] = ((None, None), (None, session), (agent, None), (agent, session))
            for key in keys:
                if key in groups:
                    wanted.setdefault(key, []).append(prepared)
        # a member joining from here on has replayed up to `last` and is not in `_writes`
        self.last = pending[-1].event.seq
        for key, events in wanted.items():
            batch = Batch(events)
            self._writes.extend((member, batch) for member in groups[key])
        self._write(whole=whole)

    def _write(self, *, whole: bool = False) -> None:
        """Write the next slice of the fan-out under way; the rest at the loop's next turn,
        so that a flush to thousands of sockets never holds the loop for all of them."""
        self._flush_handle = None
        writes, at = self._writes, self._written
        end = len(writes) if whole else at + SLICE
        groups = self._groups
        now = asyncio.get_running_loop().time()
        slow: list[Member] = []
        for member, batch in writes[at:end]:
            if member.closed or member not in groups.get(member.key, ()):
                continue  # it left while the fan-out was under way
            if batch.first <= member.after:
                late = batch.after(member.after)
                if late is None:
                    continue
                sent = member.deliver(late)
            else:
                sent = member.deliver(batch)
            member.after = batch.last
            member.sent_at = now
            if not sent:
                slow.append(member)
        for member in slow:
            self._drop(member, TOO_SLOW, "too far behind; reconnect with since=")
        if end < len(writes):
            self._written = end
            self._flush_handle = asyncio.get_running_loop().call_soon(self._write)
            return
        self._writes, self._written = [], 0
        if self._pending:
            self._schedule()

    def _flush_all(self) -> None:
        """Write the fan-out under way and every pending event now."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self._writes:
            self._write(whole=True)
        if self._flush_handle is not None:  # scheduled for what was pending
            self._flush_handle.cancel()
        self._flush(whole=True)

    async def _beat(self) -> None:
        """A heartbeat to each member nothing was sent for half an interval or more."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.heartbeat)
            quiet = loop.time() - self.heartbeat / 2
            slow = [
                member
                for group in self._groups.values()
                for member in group
                if member.sent_at <= quiet and not member.heartbeat()
            ]
            for member in slow:
                self._drop(member, TOO_SLOW, "too far behind; reconnect with since=")

    def _drop(self, member: Member, code: int, reason: str) -> None:
        self.leave(member)
        member.drop(code, f"{reason}{member.after}" if reason.endswith("=") else reason)

    def _drop_all(self, code: int, reason: str) -> None:
        for member in [m for group in self._groups.values() for m in group]:
            self._drop(member, code, reason)
