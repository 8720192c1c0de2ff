"""What the server sees, as log lines and metrics: requests over HTTP, state changes, sends.

:class:`Observer` is started by the app's lifespan. It follows the event log (as the
webhook dispatcher does) and makes one ``signoff.requests`` line per state change
(submitted, decided, a vote, expired, canceled, claimed, completed, failed) and moves the
request metrics; it watches the store's calls for failures and for the webhook deliveries
and notices the dispatchers record (their outcomes are counted; notices are logged by the
notify dispatcher itself, deliveries here). :class:`AccessLog`, the app's outermost
middleware, makes one ``signoff.http`` line per HTTP request or WebSocket and counts the
live streams; a WebSocket the hub keeps open after its handler returned
(server/wsprotocol.py) is counted, and gets its line, until it closes, and a parked long
poll (server/parking.py) gets its line once answered.

What a line holds: ids, names, statuses, the tool's name and its arguments' names; an
argument's value only with ``log_args`` (``--log-args``). Paths without the query string,
and a path parameter named like a token or secret replaced by ``***``. Who: the principal
a route authenticated (``request.state.who``), never a token or a cookie.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast

from prometheus_client import Gauge
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from signoff.domain.events import Event
from signoff.domain.notify import Notice
from signoff.domain.requests import ApprovalRequest, Request
from signoff.domain.webhooks import Delivery
from signoff.errors import SignoffError, StoreUnavailable
from signoff.eventstream import follow_events
from signoff.server.logs import fields, plain
from signoff.server.metrics import Metrics
from signoff.server.parking import park_of
from signoff.server.wsprotocol import socket_of
from signoff.service import SYSTEM, Service
from signoff.store.base import RequestQuery, Store

__all__ = ["AccessLog", "Observer", "describe"]

http_log = logging.getLogger("signoff.http")
request_log = logging.getLogger("signoff.requests")
webhook_log = logging.getLogger("signoff.webhooks")
server_log = logging.getLogger("signoff.server")

_STORE_RETRY = 1.0
_SENSITIVE = ("token", "secret", "password", "key")
_MAX_PATH = 300

_STATUS_WORDS = {
    "pending": "vote recorded",
    "approved": "request approved",
    "rejected": "request rejected",
    "expired": "request expired",
    "canceled": "request canceled",
    "executing": "request claimed",
    "completed": "request completed",
    "failed": "request failed",
}


class _Recorded(Protocol):
    """What this module reads of a store write (it never makes one: the service does)."""

    @property
    def deliveries(self) -> tuple[Delivery, ...]: ...

    @property
    def notices(self) -> tuple[Notice, ...]: ...


def _who(request: Request, event: Event) -> str | None:
    """Who made this change, as far as the request says."""
    if event.type == "created":
        return request.requested_by
    if request.status == "pending" and request.votes:
        return request.votes[-1].decided_by
    if isinstance(request, ApprovalRequest):
        if request.status == "executing":
            return request.claimed_by
        if request.result is not None and request.status in ("completed", "failed"):
            return request.result.reported_by
    return request.decision.decided_by if request.decision is not None else None


def describe(event: Event, *, log_args: bool = False) -> tuple[str, dict[str, Any]]:
    """The message and fields of the log line for ``event``."""
    request = event.request
    message = "request submitted" if event.type == "created" else _STATUS_WORDS[request.status]
    if event.type == "decided" and request.status in ("approved", "rejected"):
        message = "request decided"
    data: dict[str, Any] = {
        "request_id": request.id,
        "event": event.type,
        "kind": request.kind,
        "status": request.status,
        "who": _who(request, event),
        "session_id": request.session_id,
    }
    if request.decision is not None:
        data["decision"] = request.decision.decision.type
        data["via"] = request.decision.via
    if isinstance(request, ApprovalRequest):
        data["tool"] = request.tool_name
        data["arg_names"] = sorted(request.tool_args)
        if log_args:
            data["args"] = request.tool_args
            if request.approved_args is not None and request.approved_args != request.tool_args:
                data["approved_args"] = request.approved_args
    return message, data


class _WatchedStore:
    """The service's store, counting failed calls and seeing what each commit records."""

    def __init__(self, inner: Store, observer: Observer) -> None:
        self._inner = inner
        self._observer = observer

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if not inspect.iscoroutinefunction(found):
            return found
        return self._watched(name, found)

    def _watched(self, name: str, call: Callable[..., Awaitable[Any]]) -> Any:
        async def watched(*args: Any, **kwargs: Any) -> Any:
            try:
                result = await call(*args, **kwargs)
            except StoreUnavailable:
                self._observer.metrics.store_errors.labels(name).inc()
                raise
            except SignoffError:
                raise  # conflicts and bad queries are answers, not failures
            except Exception:
                self._observer.metrics.store_errors.labels(name).inc()
                raise
            if name == "commit":
                self._observer.committed(args[0] if args else kwargs["write"])
            return result

        return watched


class Observer:
    """Log lines and metrics for one app over ``service``; :meth:`start` in its lifespan."""

    def __init__(self, service: Service, *, log_args: bool = False) -> None:
        self.service = service
        self.log_args = log_args
        self.metrics = Metrics()
        self._pending: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._inner: Store | None = None
        self._watched: Store | None = None

    async def start(self) -> None:
        """Watch the store, count what is pending now, then follow the event log."""
        self._inner = self.service.store
        self._watched = cast(Store, _WatchedStore(self._inner, self))
        self.service.store = self._watched
        since = await self.service.store.last_event_seq()
        await self._load_pending()
        self._task = asyncio.create_task(self._follow(since), name="signoff-observe")

    async def stop(self) -> None:
        """Stop following; the store is the service's own again."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._inner is not None and self.service.store is self._watched:
            self.service.store = self._inner
        server_log.info("signoff stopped")

    async def _load_pending(self) -> None:
        cursor: str | None = None
        while True:
            page = await self.service.store.list_requests(
                RequestQuery(status="pending", limit=500, cursor=cursor)
            )
            self._pending.update(r.id for r in page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
        self.metrics.pending.set(len(self._pending))

    async def _follow(self, since: int) -> None:
        while True:
            try:
                async for event in follow_events(
                    self.service, SYSTEM, since=since, session_id=None
                ):
                    if event is not None:
                        self.seen(event)
                        since = event.seq
            except StoreUnavailable as exc:
                request_log.warning("cannot follow events, retrying: %s", exc.message)
                await asyncio.sleep(_STORE_RETRY)

    def seen(self, event: Event) -> None:
        """One state change: its log line and metrics."""
        request = event.request
        message, data = describe(event, log_args=self.log_args)
        request_log.info(message, extra=fields(**data))
        if event.type == "created" or request.status != "pending":
            self.metrics.requests.labels(request.kind, request.status).inc()
        if request.status == "pending":
            self._pending.add(request.id)
        else:
            self._pending.discard(request.id)
        self.metrics.pending.set(len(self._pending))
        if event.type == "decided" and request.decision is not None:
            waited = (request.decision.decided_at - request.created_at).total_seconds()
            self.metrics.decision_seconds.labels(request.kind).observe(max(waited, 0.0))

    def committed(self, write: _Recorded) -> None:
        """Count (and log) the delivery and notice outcomes a commit recorded."""
        for delivery in write.deliveries:
            if delivery.attempts == 0:
                continue  # queued, not tried yet
            outcome = "delivered" if delivery.status == "delivered" else "failed"
            if delivery.status == "pending":
                outcome = "retry"
            self.metrics.webhooks.labels(outcome).inc()
            webhook_log.log(
                logging.INFO if outcome == "delivered" else logging.WARNING,
                f"webhook delivery {outcome}",
                extra=fields(
                    delivery_id=delivery.id,
                    webhook_id=delivery.webhook_id,
                    request_id=delivery.request_id,
                    event=delivery.event_type,
                    attempts=delivery.attempts,
                    status_code=delivery.last_status_code,
                    error=delivery.last_error,
                ),
            )
        for notice in write.notices:
            if notice.status == "sent":
                self.metrics.notifications.labels("sent").inc()
            elif notice.status == "failed":
                self.metrics.notifications.labels("failed").inc()
            elif notice.attempts > 0:
                self.metrics.notifications.labels("retry").inc()


def _path(scope: Scope) -> str:
    """The request's path, with sensitive path parameters hidden; never the query."""
    path: str = scope.get("path", "")
    for name, value in (scope.get("path_params") or {}).items():
        if isinstance(value, str) and value and any(s in name.lower() for s in _SENSITIVE):
            path = path.replace(value, "***")
    return path[:_MAX_PATH]


class AccessLog:
    """One ``signoff.http`` line per HTTP request and WebSocket; live streams counted."""

    def __init__(self, app: ASGIApp, observer: Observer) -> None:
        self.app = app
        self.observer = observer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        metrics = self.observer.metrics
        started = time.perf_counter()
        scope.setdefault("state", {})
        seen: dict[str, Any] = {"status": None, "gauge": None}

        async def watching(message: Message) -> None:
            kind = message["type"]
            if kind == "http.response.start":
                seen["status"] = message["status"]
                headers = dict(message.get("headers") or [])
                if headers.get(b"content-type", b"").startswith(b"text/event-stream"):
                    seen["gauge"] = metrics.streams
            elif kind == "websocket.accept":
                seen["status"] = 101
                seen["gauge"] = metrics.websockets
            elif kind == "websocket.close" and seen["status"] is None:
                seen["status"] = 403
            if seen["gauge"] is not None and kind in ("http.response.start", "websocket.accept"):
                seen["gauge"].inc()
            await send(message)

        try:
            await self.app(scope, receive, watching)
        finally:
            method = scope.get("method", "WS") if scope["type"] == "http" else "WS"
            who = (scope.get("state") or {}).get("who")
            ended = functools.partial(
                self._ended,
                seen,
                method,
                _path(scope),
                who if isinstance(who, str) else None,
                started,
            )
            kept = socket_of(scope) if scope["type"] == "websocket" else None
            parked = park_of(scope) if scope["type"] == "http" else None
            if kept is not None and kept.kept:  # the hub has it: open until it closes
                kept.on_closed(ended)
            elif parked is not None and parked.parked:  # answered later (server/parking.py)
                parked.on_ended(ended)
            else:
                ended()

    def _ended(
        self, seen: dict[str, Any], method: str, path: str, who: str | None, started: float
    ) -> None:
        """A request or WebSocket is over: its line, and its stream no longer counted."""
        gauge: Gauge | None = seen["gauge"]
        status: int = seen["status"] or 500
        if gauge is not None:
            gauge.dec()
        self.observer.metrics.http.labels(method, str(status)).inc()
        http_log.info(
            f"{method} {plain(path)} {status}",
            extra=fields(
                method=method,
                path=path,
                status=status,
                duration_ms=round((time.perf_counter() - started) * 1000, 1),
                who=who,
            ),
        )
