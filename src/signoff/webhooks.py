"""The webhook dispatcher: sends every event to the configured webhooks, signed, retried.

Runs inside ``signoff serve``. Each event becomes one :class:`Delivery` per active
webhook, recorded (through the service, the only writer) before it is sent, so a delivery
that fails (or a server that stops) is retried later from the log; ``signoff webhooks
redeliver`` sends one again by hand. Adding, listing and removing webhooks are service
operations (:meth:`signoff.service.Service.add_webhook` and the rest).

Targets are public addresses only, unless the operator allows private ones
(``signoff serve --allow-private-webhooks``; see :mod:`signoff.webhook_targets`). The URL
is checked when it is added and again before every send, since what a name resolves to can
change; the send goes to the address that was checked, so a name that resolves differently
a moment later (DNS rebinding) changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import warnings
from typing import Any

import httpx

from signoff.domain.events import Event
from signoff.domain.principals import Principal
from signoff.domain.requests import ApprovalRequest, ChoiceRequest, Request, RequestAdapter
from signoff.domain.webhooks import (
    MAX_ATTEMPTS,
    Delivery,
    Webhook,
    WebhookFormat,
    backoff,
    new_delivery_id,
    sign,
)
from signoff.errors import InvalidRequest, SignoffError, StoreUnavailable
from signoff.eventstream import follow_events
from signoff.service import SYSTEM, Service
from signoff.webhook_targets import check_target

__all__ = [
    "WebhookDispatcher",
    "add_webhook",
    "attempt_delivery",
    "check_target",
    "redeliver",
    "remove_webhook",
    "render_body",
    "slack_message",
]

_TIMEOUT = 10.0
_STORE_RETRY = 1.0  # seconds between tries while the store is out of reach

logger = logging.getLogger("signoff.webhooks")


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _what(request: Request) -> str:
    if isinstance(request, ApprovalRequest):
        return f"{request.tool_name} {json.dumps(request.tool_args, ensure_ascii=False)[:200]}"
    if isinstance(request, ChoiceRequest):
        return request.prompt[:200]
    return (request.prompt or f"{len(request.questions)} question(s)")[:200]


def slack_message(event: Event, base_url: str | None) -> dict[str, Any]:
    """A Slack incoming-webhook message for ``event``, linking to the request."""
    r = event.request
    text = (
        f"*{event.type}*: {r.kind} request `{r.id}` from {_slack_escape(r.requested_by)} "
        f"is *{r.status}*\n{_slack_escape(_what(r))}"
    )
    if base_url:
        text += f"\n<{base_url.rstrip('/')}/requests/{r.id}|Open in signoff>"
    return {"text": text}


def render_body(event: Event, fmt: WebhookFormat, base_url: str | None) -> bytes:
    """The POST body for ``event`` in a webhook's format."""
    if fmt == "slack":
        payload: dict[str, Any] = slack_message(event, base_url)
    else:
        payload = {
            "seq": event.seq,
            "type": event.type,
            "at": event.at.isoformat(),
            "request": RequestAdapter.dump_python(event.request, mode="json"),
        }
    return json.dumps(payload, ensure_ascii=False).encode()


async def _event(service: Service, seq: int) -> Event | None:
    found = await service.store.list_events(after_seq=seq - 1, limit=1)
    return found[0] if found and found[0].seq == seq else None


async def _post(
    http: httpx.AsyncClient, url: str, address: str | None, body: bytes, headers: dict[str, str]
) -> httpx.Response:
    """POST to ``url``, connecting to ``address`` (the one checked) when given."""
    if address is None:
        return await http.post(url, content=body, headers=headers)
    target = httpx.URL(url)
    # the checked address in the URL, the name in Host and in TLS (SNI and certificate check)
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else None
    return await http.post(
        target.copy_with(host=address),
        content=body,
        headers={**headers, "Host": target.netloc.decode("ascii")},
        extensions=extensions,
    )


async def attempt_delivery(
    service: Service,
    delivery: Delivery,
    http: httpx.AsyncClient,
    *,
    base_url: str | None,
    allow_private: bool = False,
) -> Delivery:
    """POST one delivery once and record the outcome (delivered, retry later, or failed).

    The target is checked first (see :func:`check_target`); a refused one is recorded as
    this attempt's error.
    """
    webhooks = {w.id: w for w in await service.list_webhooks(SYSTEM)}
    webhook = webhooks.get(delivery.webhook_id)
    event = await _event(service, delivery.event_seq)
    now = service.clock()
    status_code: int | None = None
    error: str | None = None
    if webhook is None or event is None:
        error = "the webhook or the event no longer exists"
    else:
        body = render_body(event, webhook.format, base_url)
        timestamp = int(now.timestamp())
        signature = sign(
            webhook.secret, timestamp, body, delivery_id=delivery.id, event_type=event.type
        )
        headers = {
            "Content-Type": "application/json",
            "X-Signoff-Signature": signature,
            "X-Signoff-Event": event.type,
            "X-Signoff-Delivery": delivery.id,
            "User-Agent": "signoff-webhooks",
        }
        try:
            address = await check_target(webhook.url, allow_private=allow_private)
            response = await _post(http, webhook.url, address, body, headers)
            status_code = response.status_code
            if not 200 <= status_code < 300:
                error = f"HTTP {status_code}"
        except InvalidRequest as exc:
            error = f"refused: {exc.message}"[:300]
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"[:300]
    attempts = delivery.attempts + 1
    if error is None:
        updated = delivery.model_copy(
            update={
                "status": "delivered",
                "attempts": attempts,
                "last_status_code": status_code,
                "last_error": None,
                "delivered_at": now,
            }
        )
    else:
        gave_up = attempts >= MAX_ATTEMPTS or webhook is None or event is None
        updated = delivery.model_copy(
            update={
                "status": "failed" if gave_up else "pending",
                "attempts": attempts,
                "next_attempt_at": now + backoff(attempts),
                "last_status_code": status_code,
                "last_error": error,
            }
        )
    await service.record_deliveries((updated,))
    return updated


class WebhookDispatcher:
    """Queues a delivery per event and webhook, and sends due deliveries."""

    def __init__(
        self,
        service: Service,
        *,
        base_url: str | None = None,
        http: httpx.AsyncClient | None = None,
        poll: float = 0.5,
        allow_private: bool = False,
    ) -> None:
        self.service = service
        self.base_url = base_url
        self.allow_private = allow_private
        # made on the first delivery: a new client loads the CA bundle for TLS (20-40 ms of
        # CPU, more on a slow host), which a server with no webhook would pay at every start
        self._http = http
        self._owns_http = http is None
        self._poll = poll
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Resume after the last event already queued, then follow live events."""
        queued = await self.service.list_deliveries(SYSTEM, limit=1)
        since = queued[0].event_seq if queued else await self.service.store.last_event_seq()
        self._tasks = [
            asyncio.create_task(self._queue_events(since), name="signoff-webhooks-queue"),
            asyncio.create_task(self._send_due(), name="signoff-webhooks-send"),
        ]

    async def stop(self) -> None:
        """Stop queuing and sending; pending deliveries wait in the log."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self._owns_http and self._http is not None:
            await self._http.aclose()
            self._http = None

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=_TIMEOUT)
        return self._http

    async def _queue_events(self, since: int) -> None:
        # The store may be out of reach for a while (a database restart): wait and go on
        # from the last event queued, so no event is skipped or queued twice.
        while True:
            try:
                async for event in follow_events(
                    self.service, SYSTEM, since=since, session_id=None
                ):
                    if event is not None:
                        await self._queue(event)
                        since = event.seq
            except StoreUnavailable as exc:
                logger.warning("webhooks: cannot queue deliveries, retrying: %s", exc.message)
                await asyncio.sleep(_STORE_RETRY)

    async def _queue(self, event: Event) -> None:
        webhooks = [
            w
            for w in await self.service.list_webhooks(SYSTEM)
            if w.active and w.created_at <= event.at
        ]
        if not webhooks:
            return
        now = self.service.clock()
        deliveries = tuple(
            Delivery(
                id=new_delivery_id(),
                webhook_id=w.id,
                event_seq=event.seq,
                event_type=event.type,
                request_id=event.request.id,
                next_attempt_at=now,
                created_at=now,
            )
            for w in webhooks
        )
        await self.service.record_deliveries(deliveries)
        self._wake.set()

    async def _send_due(self) -> None:
        while True:
            try:
                due = await self.service.store.due_deliveries(self.service.clock(), limit=50)
            except StoreUnavailable as exc:
                logger.warning("webhooks: cannot read due deliveries, retrying: %s", exc.message)
                await asyncio.sleep(_STORE_RETRY)
                continue
            for delivery in due:
                try:
                    await attempt_delivery(
                        self.service,
                        delivery,
                        self._client(),
                        base_url=self.base_url,
                        allow_private=self.allow_private,
                    )
                except SignoffError:
                    continue  # recorded on the next pass; the store may be briefly busy
            if len(due) < 50:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):  # (asyncio.timeout: see bus/postgres.py)
                    async with asyncio.timeout(self._poll):
                        await self._wake.wait()


def _moved(name: str) -> None:
    warnings.warn(
        f"signoff.webhooks.{name} is deprecated: use Service.{name} (the service is the only "
        "writer; it takes the principal after the webhook's URL or id)",
        DeprecationWarning,
        stacklevel=3,
    )


async def add_webhook(
    service: Service,
    principal: Principal,
    url: str,
    *,
    secret: str | None = None,
    fmt: WebhookFormat = "json",
    allow_private: bool = False,
) -> Webhook:
    """Deprecated: :meth:`Service.add_webhook` (``service.add_webhook(url, principal)``)."""
    _moved("add_webhook")
    return await service.add_webhook(
        url, principal, secret=secret, fmt=fmt, allow_private=allow_private
    )


async def remove_webhook(service: Service, principal: Principal, webhook_id: str) -> Webhook:
    """Deprecated: :meth:`Service.remove_webhook` (``service.remove_webhook(id, principal)``)."""
    _moved("remove_webhook")
    return await service.remove_webhook(webhook_id, principal)


async def redeliver(
    service: Service,
    principal: Principal,
    delivery_id: str,
    *,
    base_url: str | None = None,
    http: httpx.AsyncClient | None = None,
    allow_private: bool = False,
) -> Delivery:
    """Send one delivery again now, whatever its state, and record the outcome.

    Who may, and which deliveries can be, is the service's :meth:`Service.redelivery`.
    """
    fresh = await service.redelivery(delivery_id, principal)
    if http is not None:
        return await attempt_delivery(
            service, fresh, http, base_url=base_url, allow_private=allow_private
        )
    async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
        return await attempt_delivery(
            service, fresh, client, base_url=base_url, allow_private=allow_private
        )
