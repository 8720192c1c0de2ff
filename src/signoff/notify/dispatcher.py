"""The notification dispatcher: gets each request in front of the people its routes name.

Runs inside ``signoff serve`` beside the webhook dispatcher and, like it, follows the event
log: a ``created`` event queues a :class:`~signoff.domain.notify.Notice` for each route that
matches the request (or adds the request to the route's open digest); a request that is
decided or expires has what was sent about it updated (a Slack message names who decided).
A sweep on the service's clock queues an ``escalation`` to a route's ``escalate_to`` once a
request has waited ``escalate_after`` seconds, and a ``warning`` ``warn_before_expiry``
seconds before it expires: each once per request and route (the notice's id is derived
from the three, so a second sweep, or a second server, finds it already queued).

Every notice is recorded (through the service) before it is sent, then sent by the
:class:`~signoff.notify.Sender` of its route's channel. A failure is recorded with its error
and retried with backoff; a route whose latest attempt failed shows as failing in
``signoff notify list`` and the inbox, and each send and each failure is a log line on the
``signoff.notify`` logger. Nothing fails silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Iterable
from datetime import datetime, timedelta

from signoff.domain.events import Event
from signoff.domain.notify import (
    MAX_NOTICE_ATTEMPTS,
    EmailTarget,
    Notice,
    NoticePurpose,
    Route,
    new_notice_id,
    notice_backoff,
)
from signoff.domain.requests import Request
from signoff.errors import SendFailed, SignoffError, StoreUnavailable
from signoff.eventstream import follow_events
from signoff.notify import Sender
from signoff.service import SYSTEM, Service
from signoff.store.base import RequestQuery

__all__ = ["NotifyDispatcher", "once_id"]

logger = logging.getLogger("signoff.notify")

_STORE_RETRY = 1.0
_BATCH = 50
_PENDING_SCAN = 500
_SWEEP_EVERY = 1.0  # seconds between sweeps for escalations and warnings


def once_id(purpose: NoticePurpose, route_id: str, request_id: str) -> str:
    """The id of the one notice of ``purpose`` a route gets about a request."""
    digest = hashlib.sha256(f"{purpose}\n{route_id}\n{request_id}".encode()).hexdigest()
    return f"ntc_{purpose[:3]}_{digest[:24]}"


class NotifyDispatcher:
    """Queues notices for new requests, escalations, warnings and digests, and sends them.

    ``handle`` (one event), ``sweep`` (escalations and warnings due by the service's clock)
    and ``send_due`` (one pass over due notices) are the steps; ``start`` runs them in the
    background until ``stop``.
    """

    def __init__(self, service: Service, senders: Iterable[Sender], *, poll: float = 0.5) -> None:
        self.service = service
        self.senders: dict[str, Sender] = {s.channel: s for s in senders}
        self._poll = poll
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        # once-notices known to be queued, so a sweep does not ask the store about them again
        self._queued: set[str] = set()

    # -- running -------------------------------------------------------------------------

    async def start(self) -> None:
        """Announce pending requests no route was told of yet (made while no server ran, or
        before the route was added), then follow events, sweep and send in the background."""
        since = await self.service.store.last_event_seq()
        await self.catch_up()
        self._tasks = [
            asyncio.create_task(self._follow(since), name="signoff-notify-follow"),
            asyncio.create_task(self._send_loop(), name="signoff-notify-send"),
        ]

    async def stop(self) -> None:
        """Stop; pending notices wait in the store for the next start."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def _follow(self, since: int) -> None:
        while True:
            try:
                async for event in follow_events(
                    self.service, SYSTEM, since=since, session_id=None
                ):
                    if event is not None:
                        await self.handle(event)
                        since = event.seq
            except StoreUnavailable as exc:
                logger.warning("notify: cannot follow events, retrying: %s", exc.message)
                await asyncio.sleep(_STORE_RETRY)

    async def _send_loop(self) -> None:
        swept = 0.0
        while True:
            try:
                if time.monotonic() - swept >= _SWEEP_EVERY:
                    swept = time.monotonic()
                    await self.sweep()
                sent = await self.send_due()
            except StoreUnavailable as exc:
                logger.warning("notify: store out of reach, retrying: %s", exc.message)
                await asyncio.sleep(_STORE_RETRY)
                continue
            if sent < _BATCH:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):  # (asyncio.timeout: see bus/postgres.py)
                    async with asyncio.timeout(self._poll):
                        await self._wake.wait()

    # -- the steps -----------------------------------------------------------------------

    async def handle(self, event: Event) -> None:
        """Queue notices for a new request; update what was sent about a finished one."""
        request = event.request
        if event.type == "created" and request.status == "pending":
            await self._announce(request)
        elif request.status != "pending" and event.type in ("decided", "status"):
            await self._update_sent(request)

    async def catch_up(self) -> None:
        """Announce each pending request (oldest first) to the matching routes that were not
        sent it yet."""
        page = await self.service.store.list_requests(
            RequestQuery(status="pending", limit=_PENDING_SCAN)
        )
        for request in reversed(page.items):
            await self._announce(request)

    async def sweep(self) -> None:
        """Queue the escalations and expiry warnings that are due by the service's clock."""
        now = self.service.clock()
        routes = await self.service.routes()
        timed = [r for r in routes if r.escalate_after or r.warn_before_expiry]
        if not timed:
            return
        by_name = {r.name: r for r in routes}
        page = await self.service.store.list_requests(
            RequestQuery(status="pending", limit=_PENDING_SCAN)
        )
        queued: list[Notice] = []
        for request in page.items:
            for route in timed:
                if not route.matches(request):
                    continue
                queued.extend(await self._timed(request, route, by_name, now))
        if queued:
            await self.service.record_notices(queued)
            self._wake.set()

    async def send_due(self) -> int:
        """Send every notice due by the service's clock once; the number tried."""
        due = await self.service.store.due_notices(self.service.clock(), limit=_BATCH)
        if not due:
            return 0
        routes = {r.id: r for r in await self.service.routes()}
        for notice in due:
            try:
                await self._attempt(notice, routes.get(notice.route_id))
            except StoreUnavailable:
                raise
            except SignoffError as exc:  # recorded on the next pass
                logger.warning("notify: notice %s not recorded: %s", notice.id, exc.message)
        return len(due)

    # -- queuing -------------------------------------------------------------------------

    async def _announce(self, request: Request) -> None:
        now = self.service.clock()
        known = {n.id for n in await self.service.store.list_notices(request_id=request.id)}
        queued: list[Notice] = []
        for route in await self.service.routes():
            if not route.matches(request):
                continue
            if route.digest is None:
                first = once_id("new", route.id, request.id)
                if first not in known:  # an event seen twice is announced once
                    queued.append(_notice(first, route, request, now))
                continue
            digests = [
                n
                for n in await self.service.store.list_notices(route_id=route.id, limit=50)
                if n.purpose == "digest"
            ]
            if any(request.id in n.request_ids for n in digests):
                continue  # already gathered
            open_digest = next(
                (n for n in digests if n.status == "pending" and n.attempts == 0), None
            )
            if open_digest is None:
                window_end = now + timedelta(seconds=route.digest)
                queued.append(
                    _notice(new_notice_id(), route, request, now, "digest", due=window_end)
                )
            else:
                ids = [*open_digest.request_ids, request.id]
                queued.append(open_digest.model_copy(update={"request_ids": ids}))
        if queued:
            await self.service.record_notices(queued)
            self._wake.set()

    async def _timed(
        self, request: Request, route: Route, by_name: dict[str, Route], now: datetime
    ) -> list[Notice]:
        wanted: list[tuple[NoticePurpose, Route]] = []
        if route.escalate_after is not None and route.escalate_to is not None:
            target = by_name.get(route.escalate_to)
            waited = (now - request.created_at).total_seconds()
            if target is not None and waited >= route.escalate_after:
                wanted.append(("escalation", target))
        if route.warn_before_expiry is not None and request.expires_at is not None:
            left = (request.expires_at - now).total_seconds()
            if 0 < left <= route.warn_before_expiry:
                wanted.append(("warning", route))
        wanted = [(p, to) for p, to in wanted if once_id(p, to.id, request.id) not in self._queued]
        if not wanted:
            return []
        known = {n.id for n in await self.service.store.list_notices(request_id=request.id)}
        fresh = []
        for purpose, to in wanted:
            notice_id = once_id(purpose, to.id, request.id)
            self._queued.add(notice_id)  # queued below, or already: either way, once
            if notice_id not in known:
                fresh.append(_notice(notice_id, to, request, now, purpose))
        return fresh

    # -- sending -------------------------------------------------------------------------

    async def _attempt(self, notice: Notice, route: Route | None) -> Notice:
        now = self.service.clock()
        request = await self.service.store.get_request(notice.request_id)
        sender = self.senders.get(route.channel.type) if route is not None else None
        attempts = notice.attempts + 1
        error: str | None = None
        ref = None
        if route is None or request is None:
            error = "the route or the request no longer exists"
        elif sender is None:
            error = f"no {route.channel.type} sender is configured on this server"
        else:
            try:
                ref = await sender.send(notice, request, route)
            except SendFailed as exc:
                error = exc.message
            except Exception as exc:  # a sender's bug must not pass for a send
                error = f"{type(exc).__name__}: {exc}"
        if error is None and route is not None:
            recipients = route.channel.to if isinstance(route.channel, EmailTarget) else []
            updated = notice.model_copy(
                update={
                    "status": "sent",
                    "attempts": attempts,
                    "sent_at": now,
                    "last_error": None,
                    "ref": ref,
                    "recipients": list(recipients),
                }
            )
            logger.info(
                "notify: sent %s notice %s for %s on route %s (%s)",
                notice.purpose,
                notice.id,
                notice.request_id,
                route.name,
                route.channel.type,
            )
        else:
            error = (error or "unknown error")[:500]
            gave_up = attempts >= MAX_NOTICE_ATTEMPTS or route is None or request is None
            updated = notice.model_copy(
                update={
                    "status": "failed" if gave_up else "pending",
                    "attempts": attempts,
                    "next_attempt_at": now + notice_backoff(attempts),
                    "last_error": error,
                }
            )
            logger.warning(
                "notify: route %s failed to send %s notice %s for %s (attempt %d, %s): %s",
                route.name if route is not None else notice.route_id,
                notice.purpose,
                notice.id,
                notice.request_id,
                attempts,
                "gave up" if gave_up else "will retry",
                error,
            )
        await self.service.record_notices((updated,))
        return updated

    async def _update_sent(self, request: Request) -> None:
        notices = await self.service.store.list_notices(request_id=request.id)
        sent = [n for n in notices if n.status == "sent"]
        if not sent:
            return
        routes = {r.id: r for r in await self.service.routes()}
        for notice in sent:
            route = routes.get(notice.route_id)
            sender = self.senders.get(route.channel.type) if route is not None else None
            if route is None or sender is None:
                continue
            try:
                await sender.update(notice, request, route)
            except Exception as exc:  # logged, never silent; the decision stands regardless
                logger.warning(
                    "notify: route %s failed to update notice %s for %s: %s",
                    route.name,
                    notice.id,
                    request.id,
                    exc.message if isinstance(exc, SignoffError) else f"{type(exc).__name__}",
                )


def _notice(
    notice_id: str,
    route: Route,
    request: Request,
    now: datetime,
    purpose: NoticePurpose = "new",
    *,
    due: datetime | None = None,
) -> Notice:
    return Notice(
        id=notice_id,
        route_id=route.id,
        request_id=request.id,
        purpose=purpose,
        next_attempt_at=due or now,
        request_ids=[request.id],
        created_at=now,
    )
