"""Delivers every event to the configured webhooks: signed, retried with backoff, logged.

Runs inside ``signoff serve``. Each event becomes one :class:`Delivery` per active
webhook, stored before it is sent, so a delivery that fails (or a server that stops) is
retried later from the log; ``signoff webhooks redeliver`` sends one again by hand.

Targets are public addresses only, unless the operator allows private ones
(``signoff serve --allow-private-webhooks``): otherwise an admin's webhook (or a stolen
admin token's) could make the server POST to its own loopback services, the cloud metadata
endpoint or the internal network. The URL is checked when it is added and again before
every send, since what a name resolves to can change; the send goes to the address that was
checked, so a name that resolves differently a moment later (DNS rebinding) changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import secrets
import socket
from typing import Any
from urllib.parse import urlsplit

import httpx

from signoff.domain.events import Event
from signoff.domain.principals import Principal
from signoff.domain.requests import ApprovalRequest, ChoiceRequest, Request, RequestAdapter
from signoff.domain.webhooks import (
    MAX_ATTEMPTS,
    Delivery,
    Webhook,
    WebhookFormat,
    address_refusal,
    backoff,
    new_delivery_id,
    new_webhook_id,
    sign,
)
from signoff.errors import (
    InvalidRequest,
    InvalidTransition,
    NotAllowed,
    SignoffError,
    StoreUnavailable,
)
from signoff.eventstream import follow_events
from signoff.service import SYSTEM, Service
from signoff.store.base import Write

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


async def check_target(url: str, *, allow_private: bool) -> str | None:
    """The checked address to send ``url``'s POSTs to; None when private targets are allowed.

    InvalidRequest when the URL is not http(s), its host does not resolve, or it is (or
    resolves to, on any of its addresses) a non-public address.
    """
    parts = urlsplit(url)
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if parts.scheme not in ("http", "https") or not host:
        raise InvalidRequest("a webhook URL must be http:// or https:// with a host")
    if allow_private:
        return None
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            found = await asyncio.get_running_loop().getaddrinfo(
                host, port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM
            )
        except (OSError, UnicodeError) as exc:
            raise InvalidRequest(f"webhook host {host!r} does not resolve ({exc})") from None
        addresses = [str(info[4][0]) for info in found]
    if not addresses:
        raise InvalidRequest(f"webhook host {host!r} does not resolve")
    for address in addresses:
        refusal = address_refusal(address)
        if refusal is not None:
            where = host if host == address else f"{host} ({address})"
            raise InvalidRequest(
                f"webhook target {where} is a {refusal} address; only public addresses are "
                "allowed unless the server runs with --allow-private-webhooks"
            )
    return addresses[0]


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
    webhooks = {w.id: w for w in await service.store.list_webhooks()}
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
    await service.store.commit(Write(at=now, deliveries=(updated,)))
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
        self._http = http or httpx.AsyncClient(timeout=_TIMEOUT)
        self._owns_http = http is None
        self._poll = poll
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Resume after the last event already queued, then follow live events."""
        queued = await self.service.store.list_deliveries(limit=1)
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
        if self._owns_http:
            await self._http.aclose()

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
            for w in await self.service.store.list_webhooks()
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
        await self.service.store.commit(Write(at=now, deliveries=deliveries))
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
                        self._http,
                        base_url=self.base_url,
                        allow_private=self.allow_private,
                    )
                except SignoffError:
                    continue  # recorded on the next pass; the store may be briefly busy
            if len(due) < 50:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._poll)


def _admin(principal: Principal) -> None:
    if principal.role != "admin":
        raise NotAllowed("only admins manage webhooks")


async def add_webhook(
    service: Service,
    principal: Principal,
    url: str,
    *,
    secret: str | None = None,
    fmt: WebhookFormat = "json",
    allow_private: bool = False,
) -> Webhook:
    """Register an endpoint; a secret is generated when none is given.

    Its URL must name a public address unless ``allow_private`` (see :func:`check_target`).
    """
    _admin(principal)
    if not url.startswith(("http://", "https://")) or len(url) > 2000:
        raise InvalidRequest("a webhook URL must start with http:// or https://")
    await check_target(url, allow_private=allow_private)
    now = service.clock()
    webhook = Webhook(
        id=new_webhook_id(),
        url=url,
        secret=secret or secrets.token_urlsafe(24),
        format=fmt,
        created_by=principal.name,
        created_at=now,
    )
    await service.store.commit(Write(at=now, webhooks=(webhook,)))
    return webhook


async def remove_webhook(service: Service, principal: Principal, webhook_id: str) -> Webhook:
    """Stop sending events to an endpoint (its delivery log is kept)."""
    _admin(principal)
    found = next((w for w in await service.store.list_webhooks() if w.id == webhook_id), None)
    if found is None or not found.active:
        raise InvalidRequest(f"no active webhook with id {webhook_id!r}")
    removed = found.model_copy(update={"active": False})
    await service.store.commit(Write(at=service.clock(), webhooks=(removed,)))
    return removed


async def redeliver(
    service: Service,
    principal: Principal,
    delivery_id: str,
    *,
    base_url: str | None = None,
    http: httpx.AsyncClient | None = None,
    allow_private: bool = False,
) -> Delivery:
    """Send one delivery again now, whatever its state, and record the outcome."""
    _admin(principal)
    delivery = await service.store.get_delivery(delivery_id)
    if delivery is None:
        raise InvalidRequest(f"no delivery with id {delivery_id!r}")
    if delivery.status == "pending" and delivery.attempts == 0:
        raise InvalidTransition(f"delivery {delivery_id} has not been tried yet")
    fresh = delivery.model_copy(update={"status": "pending", "attempts": 0})
    if http is not None:
        return await attempt_delivery(
            service, fresh, http, base_url=base_url, allow_private=allow_private
        )
    async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
        return await attempt_delivery(
            service, fresh, client, base_url=base_url, allow_private=allow_private
        )
