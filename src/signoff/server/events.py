"""Live events over SSE and WebSocket, with replay of what a reconnecting client missed.

A client that reconnects with ``since=<seq>`` (or ``Last-Event-ID``) first gets every
stored event after that seq from the event log, then live ones, with no gap and no
repeat: the subscription is opened before the replay, and live events at or below the
last replayed seq are skipped.

A stream lives only as long as its credential: each one's token or inbox session is
checked again every :data:`~signoff.server.credentials.REVALIDATE` seconds, and once it no
longer authenticates, a WebSocket is closed with 4401 and an SSE stream ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse

from signoff.domain.events import Event
from signoff.domain.principals import Principal
from signoff.domain.requests import RequestAdapter
from signoff.domain.text import MAX_ID_INT
from signoff.errors import InvalidRequest, NotAllowed, SignoffError, Unauthenticated
from signoff.eventstream import follow_events
from signoff.server.credentials import REVALIDATE, CredentialWatch, credential_of
from signoff.server.deps import API, current_principal
from signoff.server.shutdown import GOING_AWAY, Shutdown, either
from signoff.service import Service

__all__ = ["HEARTBEAT", "event_message", "event_text", "events_router"]

HEARTBEAT = 15.0
"""Seconds between heartbeats on an idle stream."""


_TEXT_CACHE: OrderedDict[tuple[int, str, int], str] = OrderedDict()
_TEXT_CACHE_SIZE = 4096
_HEARTBEAT_TEXT = json.dumps({"type": "heartbeat"})


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
        start = _since(since, last_event_id)
        credential = credential_of(request, caller)

        async def body() -> AsyncIterator[str]:
            yield "retry: 2000\n\n"
            stopping: Shutdown = request.app.state.shutdown
            with watch.guard(credential) as ended, stopping.stream() as going:
                until = either(ended, going)
                async for event in follow_events(
                    service,
                    caller,
                    since=start,
                    session_id=session_id,
                    heartbeat=request.app.state.heartbeat,
                    until=until,
                ):
                    if await request.is_disconnected():
                        return
                    if event is None:
                        yield ": heartbeat\n\n"
                    else:
                        data = event_text(event)
                        yield f"id: {event.seq}\nevent: {event.type}\ndata: {data}\n\n"
                if ended.done():  # a comment: clients skip it, a person reading curl sees why
                    yield f": stream ended: {ended.result().message}\n\n"
                elif stopping.stopping:  # clients reconnect with Last-Event-ID and miss nothing
                    yield ": stream ended: the server is shutting down\n\n"

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
        service: Service = websocket.app.state.service
        try:
            caller = await _ws_principal(websocket)
            websocket.state.who = caller.name  # the access log's who
        except SignoffError as exc:
            # accept, then close: a refused handshake reaches a browser as a bare 1006
            await websocket.accept()
            await websocket.close(code=4401, reason=exc.message[:120])
            return
        await websocket.accept()

        async def drain_incoming() -> None:
            while True:
                await websocket.receive_text()

        async def send_events() -> None:
            async for event in follow_events(
                service,
                caller,
                since=since,
                session_id=session_id,
                heartbeat=websocket.app.state.heartbeat,
            ):
                await websocket.send_text(_HEARTBEAT_TEXT if event is None else event_text(event))

        # whichever ends first ends both: a client that goes away frees its handler at once,
        # not at the next event or heartbeat; a credential that stops working ends it too
        stopping: Shutdown = websocket.app.state.shutdown
        with watch.guard(credential_of(websocket, caller)) as ended, stopping.stream() as going:
            tasks = [asyncio.create_task(drain_incoming()), asyncio.create_task(send_events())]
            waiting: list[asyncio.Future[Any]] = [*tasks, ended, going]
            try:
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(
                        asyncio.CancelledError, WebSocketDisconnect, RuntimeError
                    ):
                        await task
            if ended.done():
                failure = ended.result()
                refused = isinstance(failure, Unauthenticated | NotAllowed)
                with contextlib.suppress(WebSocketDisconnect, RuntimeError):
                    await websocket.close(
                        code=4401 if refused else 1011, reason=failure.message[:120]
                    )
            elif going.done():  # clients reconnect with ?since=SEQ and miss nothing
                with contextlib.suppress(WebSocketDisconnect, RuntimeError):
                    await websocket.close(code=GOING_AWAY, reason="the server is shutting down")

    return router


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
