"""One interface to signoff, in this process or over HTTP.

:class:`LocalBackend` holds a service and the principal acting through it and offers the
same methods, with the same signatures, as :class:`signoff.client.AsyncClient`. So the CLI
and every agent integration run unchanged against an embedded database or a server:
:func:`as_backend` takes either.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import JsonValue

from signoff.config import follower_for
from signoff.domain.audit import Anchor, AuditEntry, ChainReport
from signoff.domain.decisions import Channel, Decision
from signoff.domain.edits import EditPreview
from signoff.domain.events import Event
from signoff.domain.grants import Grant
from signoff.domain.notify import PersonLink, Route, RouteStatus
from signoff.domain.principals import Principal, Role, TokenRecord
from signoff.domain.requests import Request
from signoff.domain.submission import NewRequest
from signoff.domain.tasks import Task
from signoff.domain.webhooks import Delivery, Webhook
from signoff.errors import InvalidRequest
from signoff.eventstream import follow_events
from signoff.service import BatchOutcome, Service, Submitted
from signoff.store.base import Page, RequestQuery

__all__ = ["Backend", "LocalBackend", "as_backend"]

if TYPE_CHECKING:
    from signoff.client import AsyncClient


class Backend(Protocol):
    """signoff's operations as one principal, whether in this process or over HTTP."""

    async def submit(self, new: NewRequest | Mapping[str, Any]) -> Submitted: ...
    async def get(self, request_id: str) -> Request: ...
    async def list_requests(self, query: RequestQuery) -> Page: ...
    async def decide(
        self,
        request_id: str,
        decision: Decision | Mapping[str, Any],
        *,
        via: Channel = "person",
        client: str | None = None,
    ) -> Request: ...
    async def decide_many(
        self, request_ids: Sequence[str], type_: str, reason: str = ""
    ) -> list[BatchOutcome]: ...
    async def preview_edit(self, request_id: str, args: Mapping[str, JsonValue]) -> EditPreview: ...
    async def wait(self, request_id: str, timeout: float) -> Request: ...
    async def claim(
        self, request_id: str, args: Mapping[str, JsonValue], *, lease: float | None = None
    ) -> Request: ...
    async def renew(self, request_id: str, *, lease: float | None = None) -> Request: ...
    async def cancel(self, request_id: str, reason: str = "") -> Request: ...
    async def complete(self, request_id: str, result: JsonValue = None) -> Request: ...
    async def fail(self, request_id: str, error: str) -> Request: ...
    async def audit(self, request_id: str | None = None) -> list[AuditEntry]: ...
    async def verify_audit(self, anchor: str | None = None) -> ChainReport: ...
    async def audit_anchor(self) -> Anchor: ...
    async def list_grants(self, *, live_only: bool = True) -> list[Grant]: ...
    async def revoke_grant(self, grant_id: str) -> Grant: ...
    async def create_token(self, name: str, role: Role) -> tuple[str, TokenRecord]: ...
    async def list_tokens(self) -> list[TokenRecord]: ...
    async def revoke_token(self, token_id: str) -> TokenRecord: ...
    def events(
        self, *, since: int | None = None, session_id: str | None = None
    ) -> AsyncIterator[Event]: ...
    async def add_webhook(
        self, url: str, *, secret: str | None = None, fmt: str = "json"
    ) -> Webhook: ...
    async def list_webhooks(self) -> list[Webhook]: ...
    async def remove_webhook(self, webhook_id: str) -> Webhook: ...
    async def list_deliveries(
        self, *, status: str | None = None, limit: int = 100
    ) -> list[Delivery]: ...
    async def redeliver(self, delivery_id: str) -> Delivery: ...
    async def add_route(self, spec: Mapping[str, Any]) -> Route: ...
    async def list_routes(self) -> list[RouteStatus]: ...
    async def remove_route(self, name: str) -> Route: ...
    async def link_person(self, kind: str, external_id: str, name: str) -> PersonLink: ...
    async def unlink_person(self, kind: str, external_id: str) -> PersonLink: ...
    async def list_links(self) -> list[PersonLink]: ...
    async def get_task(self, task_id: str) -> Task: ...
    async def list_tasks(self, *, status: str | None = None, limit: int = 100) -> list[Task]: ...


class LocalBackend:
    """The service in this process, acting as one principal."""

    def __init__(
        self, service: Service, principal: Principal, *, started_by: str | None = None
    ) -> None:
        self.service = service
        self.principal = principal
        self.started_by = started_by
        """For a hosted run's agent: who started the run, recorded on every request filed."""

    async def submit(self, new: NewRequest | Mapping[str, Any]) -> Submitted:
        """Submit as this principal (on behalf of ``started_by``'s run, if set)."""
        return await self.service.submit(new, self.principal, started_by=self.started_by)

    async def get(self, request_id: str) -> Request:
        """One request this principal may see."""
        return await self.service.get(request_id, self.principal)

    async def list_requests(self, query: RequestQuery) -> Page:
        """A page of requests this principal may see."""
        return await self.service.list_requests(query, self.principal)

    async def decide(
        self,
        request_id: str,
        decision: Decision | Mapping[str, Any],
        *,
        via: Channel = "person",
        client: str | None = None,
    ) -> Request:
        """Decide as this principal (``via``/``client``: answered in an MCP client's prompt)."""
        return await self.service.decide(
            request_id, decision, self.principal, via=via, client=client
        )

    async def decide_many(
        self, request_ids: Sequence[str], type_: str, reason: str = ""
    ) -> list[BatchOutcome]:
        """Approve or reject several requests."""
        body: dict[str, Any] = {"type": type_}
        if type_ == "reject":
            body["reason"] = reason
        return await self.service.decide_many(request_ids, body, self.principal)

    async def preview_edit(self, request_id: str, args: Mapping[str, JsonValue]) -> EditPreview:
        """The call's preview for edited ``args`` and their schema misfits; changes nothing."""
        return await self.service.preview_edit(request_id, args, self.principal)

    async def wait(self, request_id: str, timeout: float) -> Request:
        """Wait for a decision."""
        return await self.service.wait(request_id, timeout, self.principal)

    async def claim(
        self, request_id: str, args: Mapping[str, JsonValue], *, lease: float | None = None
    ) -> Request:
        """Claim an approved call; it holds ``lease`` seconds unless reported or renewed."""
        return await self.service.claim(request_id, args, self.principal, lease=lease)

    async def renew(self, request_id: str, *, lease: float | None = None) -> Request:
        """Extend the lease of a call this backend claimed."""
        return await self.service.renew(request_id, self.principal, lease=lease)

    async def cancel(self, request_id: str, reason: str = "") -> Request:
        """Withdraw a pending request."""
        return await self.service.cancel(request_id, self.principal, reason)

    async def complete(self, request_id: str, result: JsonValue = None) -> Request:
        """Report that a claimed call succeeded."""
        return await self.service.complete(request_id, self.principal, result)

    async def fail(self, request_id: str, error: str) -> Request:
        """Report that a claimed call failed."""
        return await self.service.fail(request_id, self.principal, error)

    async def audit(self, request_id: str | None = None) -> list[AuditEntry]:
        """Audit entries."""
        return await self.service.audit(request_id, self.principal)

    async def verify_audit(self, anchor: str | None = None) -> ChainReport:
        """Check the audit log, against an anchor (``SEQ:HASH``) if given."""
        return await self.service.verify_audit(anchor, self.principal)

    async def audit_anchor(self) -> Anchor:
        """The chain head as an anchor."""
        return await self.service.audit_anchor(self.principal)

    async def list_grants(self, *, live_only: bool = True) -> list[Grant]:
        """Standing grants."""
        return await self.service.list_grants(live_only=live_only, principal=self.principal)

    async def revoke_grant(self, grant_id: str) -> Grant:
        """Revoke a standing grant as this principal."""
        return await self.service.revoke_grant(grant_id, self.principal)

    async def create_token(self, name: str, role: Role) -> tuple[str, TokenRecord]:
        """Create a token."""
        return await self.service.create_token(name, role, principal=self.principal)

    async def list_tokens(self) -> list[TokenRecord]:
        """All tokens' records."""
        return await self.service.list_tokens(self.principal)

    async def revoke_token(self, token_id: str) -> TokenRecord:
        """Revoke a token as this principal."""
        return await self.service.revoke_token(token_id, self.principal)

    async def add_webhook(
        self, url: str, *, secret: str | None = None, fmt: str = "json"
    ) -> Webhook:
        """Add a webhook endpoint (admins); in process, its URL must name a public address."""
        return await self.service.add_webhook(url, self.principal, secret=secret, fmt=fmt)

    async def list_webhooks(self) -> list[Webhook]:
        """Webhook endpoints (admins), secrets hidden as over HTTP."""
        return [_secret_hidden(w) for w in await self.service.list_webhooks(self.principal)]

    async def remove_webhook(self, webhook_id: str) -> Webhook:
        """Stop sending to an endpoint (admins); its secret hidden as over HTTP."""
        return _secret_hidden(await self.service.remove_webhook(webhook_id, self.principal))

    async def list_deliveries(
        self, *, status: str | None = None, limit: int = 100
    ) -> list[Delivery]:
        """The delivery log, newest first (admins)."""
        return await self.service.list_deliveries(self.principal, status=status, limit=limit)

    async def redeliver(self, delivery_id: str) -> Delivery:
        """Send one delivery again now (admins)."""
        from signoff import webhooks  # sending needs httpx (the server extra)

        return await webhooks.redeliver(self.service, self.principal, delivery_id)

    async def add_route(self, spec: Mapping[str, Any]) -> Route:
        """Add a notification route (admins); in process, a webhook URL must be public."""
        return await self.service.add_route(spec, self.principal)

    async def list_routes(self) -> list[RouteStatus]:
        """Notification routes and whether each is failing (admins)."""
        return await self.service.list_routes(self.principal)

    async def remove_route(self, name: str) -> Route:
        """Remove a stored notification route (admins)."""
        return await self.service.remove_route(name, self.principal)

    async def link_person(self, kind: str, external_id: str, name: str) -> PersonLink:
        """Link a Slack user id or an email address to a person (admins)."""
        return await self.service.link_person(kind, external_id, name, self.principal)

    async def unlink_person(self, kind: str, external_id: str) -> PersonLink:
        """Remove a person link (admins)."""
        return await self.service.unlink_person(kind, external_id, self.principal)

    async def list_links(self) -> list[PersonLink]:
        """Every person link (admins)."""
        return await self.service.list_links(self.principal)

    async def get_task(self, task_id: str) -> Task:
        """A task this principal may see (its own; approvers and admins: any)."""
        return await self.service.get_task(task_id, self.principal)

    async def list_tasks(self, *, status: str | None = None, limit: int = 100) -> list[Task]:
        """Tasks this principal may see, newest first."""
        return await self.service.list_tasks(self.principal, status=status, limit=limit)

    async def events(
        self, *, since: int | None = None, session_id: str | None = None
    ) -> AsyncIterator[Event]:
        """Events after ``since`` from the log, then live ones from any process."""
        # a service that follows already brings other processes' events: one follower each
        follower = None
        if self.service.follower is None:
            follower = follower_for(self.service.store, self.service.bus)
            await follower.start()
        try:
            async for event in follow_events(
                self.service, self.principal, since=since, session_id=session_id
            ):
                if event is not None:
                    yield event
        finally:
            if follower is not None:
                await follower.stop()


def _secret_hidden(webhook: Webhook) -> Webhook:
    """The endpoint as a listing shows it: its signing secret is shown once, when added."""
    return webhook.model_copy(update={"secret": "(hidden)"})


def as_backend(target: Service | Backend | Any, principal: Principal | None = None) -> Backend:
    """A backend from a service (acting as ``principal``), a blocking ``signoff.Client``
    (its async twin), or an ``AsyncClient`` / backend as is."""
    if isinstance(target, Service):
        if principal is None:
            raise InvalidRequest("an in-process service needs the principal the agent acts as")
        return LocalBackend(target, principal)
    if isinstance(target, _Threaded):
        return target
    if callable(getattr(target, "to_async", None)):  # the blocking signoff.Client
        return _Threaded(target)
    return target


class _Threaded:
    """A blocking client's methods as coroutines, each call run in a worker thread.

    The caller keeps owning (and closing) the client; nothing new is opened here.
    """

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if not callable(method):
            return method

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call


if TYPE_CHECKING:
    # The type checker's proof that both implementations offer every operation of
    # Backend: a method missing, a lost default, a moved keyword-only marker or another
    # return type fails mypy here. mypy does not compare default values or the names of
    # positional parameters: tests/backends/test_signatures.py does.

    def _local_backend_is_a_backend(backend: LocalBackend) -> Backend:
        return backend

    def _async_client_is_a_backend(client: AsyncClient) -> Backend:
        return client
