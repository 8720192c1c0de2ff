"""Live events over SSE and WebSocket, with replay of what a reconnecting client missed.

Every stream is a member of the app's hub (server/hub.py), which reads the events once
and writes each to every connection that may see it. A client that reconnects with
``since=<seq>`` (or ``Last-Event-ID``) first gets every stored event after that seq from
the event log, then live ones, with no gap and no repeat. Where the hub does not run in the
handler's event loop (an app used without its lifespan, as in-process tests do), each
stream follows the events on its own (:func:`~signoff.eventstream.follow_events`): slower,
the same messages.

A stream lives only as long as its credential: each one's token or inbox session is
checked again every :data:`~signoff.server.credentials.REVALIDATE` seconds, and once it no
longer authenticates, a WebSocket is closed with 4401 and an SSE stream ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse

from signoff.domain.principals import Principal
from signoff.domain.text import MAX_ID_INT
from signoff.errors import InvalidRequest, NotAllowed, SignoffError, Unauthenticated
from signoff.eventstream import follow_events
from signoff.server.credentials import REVALIDATE, CredentialWatch, credential_of
from signoff.server.deps import API, current_principal
from signoff.server.hub import (
    HEARTBEAT_TEXT,
    DirectMember,
    Hub,
    Member,
    QueuedMember,
    event_message,
    event_text,
    key_of,
    sse_chunk,
)
from signoff.server.shutdown import GOING_AWAY, Shutdown, either
from signoff.server.wsprotocol import direct_socket
from signoff.service import Service

__all__ = ["HEARTBEAT", "event_message", "event_text", "events_router"]

HEARTBEAT = 15.0
"""Seconds between heartbeats on an idle stream."""


def _since(since: int | None, last_event_id: str | None) -> int | None:
    if since is not None:
        return since
    if last_event_id is not None and last_event_id.strip().isdigit():
        seq = int(last_event_id.strip())
        if seq > MAX_ID_INT:
            raise InvalidRequest(f"Last-Event-ID {seq} is past any event")
        return seq
    return None


def events_router(revalidate: float = REVALIDATE) -> APIRouter:
    """``GET /events`` (SSE) and ``WS /ws``; credentials re-checked every ``revalidate`` s."""
    router = APIRouter(prefix=API)
    watch = CredentialWatch(revalidate)

    @router.get("/events", response_class=StreamingResponse)
    async def sse(
        request: Request,
        caller: Annotated[Principal, Depends(current_principal)],
        session_id: Annotated[str | None, Query(max_length=200)] = None,
        since: Annotated[int | None, Query(ge=0, le=MAX_ID_INT)] = None,
        last_event_id: Annotated[str | None, Header(max_length=40)] = None,
    ) -> StreamingResponse:
        """Server-sent events: ``id: seq``, ``event: type``, ``data: {seq, type, request}``."""
        service: Service = request.app.state.service
        hub: Hub = request.app.state.hub
        start = _since(since, last_event_id)
        credential = credential_of(request, caller)

        async def body() -> AsyncIterator[str]:
            yield "retry: 2000\n\n"
            stopping: Shutdown = request.app.state.shutdown
            with watch.guard(credential) as ended, stopping.stream() as going:
                until = either(ended, going)
                member: QueuedMember | None = None
                if hub.running:
                    member = QueuedMember(key_of(caller, session_id), _start(hub, start), sse=True)
                    chunks = _from_hub(hub, member, caller, session_id, until, _one_chunk)
                else:
                    heartbeat = request.app.state.heartbeat
                    chunks = _followed(service, caller, start, session_id, heartbeat, until, True)
                async for chunk in chunks:
                    if await request.is_disconnected():
                        return
                    yield chunk
                if ended.done():  # a comment: clients skip it, a person reading curl sees why
                    yield f": stream ended: {ended.result().message}\n\n"
                elif stopping.stopping:  # clients reconnect with Last-Event-ID and miss nothing
                    yield ": stream ended: the server is shutting down\n\n"
                elif member is not None and member.ended is not None:
                    yield f": stream ended: {member.ended[1]}\n\n"

        return StreamingResponse(
            body(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    @router.websocket("/ws")
    async def ws(
        websocket: WebSocket,
        session_id: Annotated[str | None, Query(max_length=200)] = None,
        since: Annotated[int | None, Query(ge=0, le=MAX_ID_INT)] = None,
    ) -> None:
        """WebSocket: one JSON message per event, ``{"type": "heartbeat"}`` when idle."""
        try:
            caller = await _ws_principal(websocket)
            websocket.state.who = caller.name  # the access log's who
        except SignoffError as exc:
            # accept, then close: a refused handshake reaches a browser as a bare 1006
            await websocket.accept()
            await websocket.close(code=4401, reason=exc.message[:120])
            return
        await websocket.accept()
        hub: Hub = websocket.app.state.hub
        stopping: Shutdown = websocket.app.state.shutdown
        with contextlib.ExitStack() as held:
            ended = held.enter_context(watch.guard(credential_of(websocket, caller)))
            going = held.enter_context(stopping.stream())
            socket = direct_socket(websocket)
            if hub.running and socket is not None:
                member = DirectMember(key_of(caller, session_id), _start(hub, since), socket)
                await _ws_direct(websocket, hub, member, caller, session_id, held, ended, going)
            else:
                await _ws_pumped(websocket, hub, caller, since, session_id, ended, going)

    return router


def _one_chunk(texts: list[str]) -> list[str]:
    """An SSE member's queued chunks, yielded as one (one ASGI send per wake)."""
    return ["".join(texts)]


def _start(hub: Hub, since: int | None) -> int:
    """The seq a stream starts after: its ``since``, else the last one fanned out."""
    return since if since is not None else hub.last


def _close_of(ended: asyncio.Future[SignoffError], member: Member | None) -> tuple[int, str]:
    """Why a WebSocket ends: its credential failed (4401, or 1011 when it could not be
    checked), the server is going away (1001), or the hub dropped it as too slow."""
    if ended.done():
        failure = ended.result()
        refused = isinstance(failure, Unauthenticated | NotAllowed)
        return (4401 if refused else 1011), failure.message[:120]
    if isinstance(member, QueuedMember) and member.ended is not None:
        return member.ended
    return GOING_AWAY, "the server is shutting down"


async def _ws_direct(
    websocket: WebSocket,
    hub: Hub,
    member: DirectMember,
    caller: Principal,
    session_id: str | None,
    held: contextlib.ExitStack,
    ended: asyncio.Future[SignoffError],
    going: asyncio.Future[None],
) -> None:
    """Serve a WebSocket the hub writes to: replay through ASGI, join, and return.

    Once the member has joined, the handler returns and the socket stays open, kept by its
    protocol for the hub (:meth:`~signoff.server.wsprotocol.HubWebSocketProtocol.keep`):
    an idle socket holds no coroutine. What ``held`` holds (the credential's watch, the
    server's count of open streams) is handed to the socket and let go when it closes. A
    credential that fails or the server going away closes the socket from a callback.
    """
    handed: contextlib.ExitStack | None = None

    def end(_: object) -> None:
        hub.leave(member)
        member.drop(*_close_of(ended, None))
        if handed is not None:
            handed.close()  # a closed stream no longer holds up the server's stopping

    def closed() -> None:
        ended.remove_done_callback(end)
        going.remove_done_callback(end)
        hub.leave(member)
        if handed is not None:
            handed.close()

    ended.add_done_callback(end)
    going.add_done_callback(end)
    kept = False
    try:
        async with contextlib.aclosing(hub.replay(member, caller, session_id)) as replayed:
            async for event in replayed:
                await websocket.send_text(event_text(event))
        if not member.closed:  # joined: the hub writes to it from now on
            handed = held.pop_all()
            kept = member.socket.keep(closed)
    except WebSocketDisconnect:
        pass
    except RuntimeError:
        if not member.closed:  # a send after our own close frame: expected only then
            raise
    finally:
        if not kept:  # the client is gone, or the hub dropped it
            closed()


async def _ws_pumped(
    websocket: WebSocket,
    hub: Hub,
    caller: Principal,
    since: int | None,
    session_id: str | None,
    ended: asyncio.Future[SignoffError],
    going: asyncio.Future[None],
) -> None:
    """Serve a WebSocket through ASGI sends: a task sends, a task reads the client's close."""
    until = either(ended, going)
    member: QueuedMember | None = None
    if hub.running:
        member = QueuedMember(key_of(caller, session_id), _start(hub, since), sse=False)
        texts = _from_hub(hub, member, caller, session_id, until, _as_is)
    else:
        service: Service = websocket.app.state.service
        heartbeat = websocket.app.state.heartbeat
        texts = _followed(service, caller, since, session_id, heartbeat, until, False)

    async def drain_incoming() -> None:
        while True:
            await websocket.receive_text()

    async def send_events() -> None:
        async for text in texts:
            await websocket.send_text(text)

    # whichever ends first ends both: a client that goes away frees its handler at once,
    # not at the next event or heartbeat; a credential that stops working ends it too
    tasks = [asyncio.create_task(drain_incoming()), asyncio.create_task(send_events())]
    waiting: list[asyncio.Future[Any]] = [*tasks, ended, going]
    try:
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, WebSocketDisconnect, RuntimeError):
                await task
    if ended.done() or going.done() or (member is not None and member.ended is not None):
        code, reason = _close_of(ended, member)  # 1001: clients reconnect with ?since=SEQ
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):
            await websocket.close(code=code, reason=reason)


def _as_is(texts: list[str]) -> list[str]:
    return texts


async def _from_hub(
    hub: Hub,
    member: QueuedMember,
    caller: Principal,
    session_id: str | None,
    until: asyncio.Future[None],
    shape: Callable[[list[str]], list[str]],
) -> AsyncIterator[str]:
    """A queued member's messages: the replay, then what the hub queues, until ``until``."""

    def end(_: object) -> None:
        hub.leave(member)
        member.stop()  # the handler says why, from its own futures

    until.add_done_callback(end)
    try:
        async with contextlib.aclosing(hub.replay(member, caller, session_id)) as replayed:
            async for event in replayed:
                text = event_text(event)
                yield sse_chunk(event, text) if member.sse else text
        while texts := await member.take():
            for shaped in shape(texts):
                yield shaped
    finally:
        until.remove_done_callback(end)
        hub.leave(member)


async def _followed(
    service: Service,
    caller: Principal,
    since: int | None,
    session_id: str | None,
    heartbeat: float,
    until: asyncio.Future[None],
    sse: bool,
) -> AsyncIterator[str]:
    """A stream's messages when it follows the events by itself (no hub in this loop)."""
    async for event in follow_events(
        service, caller, since=since, session_id=session_id, heartbeat=heartbeat, until=until
    ):
        if event is None:
            yield ": heartbeat\n\n" if sse else HEARTBEAT_TEXT
        else:
            text = event_text(event)
            yield sse_chunk(event, text) if sse else text


async def _ws_principal(websocket: WebSocket) -> Principal:
    service: Service = websocket.app.state.service
    authorization = websocket.headers.get("authorization")
    if authorization:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return await service.authenticate(token.strip())
    resolve = getattr(websocket.app.state, "cookie_principal", None)
    if resolve is not None:
        principal: Principal | None = await resolve(websocket)
        if principal is not None:
            return principal
    raise Unauthenticated("a bearer token or a session cookie is required")
