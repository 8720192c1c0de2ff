"""The service's operations over HTTP: ``AsyncClient`` and ``Client`` (httpx).

Both speak the public contract and raise the same exceptions as the in-process service
(``RequestNotFound``, ``InvalidTransition``...), so code can take either.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Generic, Self, TypeVar
from urllib.parse import quote

from pydantic import JsonValue

from signoff.domain.audit import Anchor, AuditEntry, ChainReport
from signoff.domain.decisions import Channel, Decision
from signoff.domain.edits import EditPreview
from signoff.domain.events import Event
from signoff.domain.grants import Grant
from signoff.domain.notify import PersonLink, Route, RouteStatus
from signoff.domain.principals import Principal, Role, TokenRecord
from signoff.domain.requests import Request, RequestAdapter
from signoff.domain.submission import NewRequest
from signoff.domain.tasks import Task
from signoff.domain.webhooks import Delivery, Webhook
from signoff.errors import (
    ArgsMismatch,
    CallerError,
    GrantNotFound,
    InvalidDecision,
    InvalidRequest,
    InvalidTransition,
    NotAllowed,
    PolicyError,
    RequestNotFound,
    RuntimeFailure,
    ServerStopping,
    SignoffError,
    StoreUnavailable,
    TaskNotFound,
    TokenNotFound,
    Unauthenticated,
)
from signoff.service import BatchOutcome, Submitted
from signoff.store.base import Page, RequestQuery
from signoff.wire import (
    AnchorView,
    AuditLog,
    BatchDecided,
    BatchResults,
    DeliveryList,
    GrantList,
    LinkList,
    RequestPage,
    RouteList,
    TokenCreated,
    TokenList,
    TokenView,
    WebhookList,
    WebhookView,
)

try:
    import httpx
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("signoff.client needs httpx: pip install 'signoff[server]'") from exc

__all__ = ["API", "AsyncClient", "Client"]

API = "/api/v1"
T = TypeVar("T")

_BY_NAME: dict[str, Callable[[str], SignoffError]] = {
    "InvalidRequest": InvalidRequest,
    "InvalidInput": InvalidRequest,
    "InvalidDecision": InvalidDecision,
    "InvalidTransition": InvalidTransition,
    "ArgsMismatch": ArgsMismatch,
    "NotAllowed": NotAllowed,
    "Unauthenticated": Unauthenticated,
    "PolicyError": PolicyError,
    "StoreUnavailable": StoreUnavailable,
    "ServerStopping": ServerStopping,
}


def _error(response: httpx.Response, path_id: str | None) -> SignoffError:
    try:
        body = response.json()
        name, detail = str(body.get("error", "")), str(body.get("detail", response.text))
    except (ValueError, AttributeError):
        name, detail = "", response.text[:200] or response.reason_phrase
    return _error_of(response.status_code, name, detail, path_id)


def _error_of(status_code: int, name: str, detail: str, path_id: str | None) -> SignoffError:
    """Our exception for an error answer: its status, the error's name and its detail."""
    if status_code == 404:
        if name == "GrantNotFound":
            return GrantNotFound(path_id or "?")
        if name == "TokenNotFound":
            return TokenNotFound(path_id or "?")
        if name == "TaskNotFound":
            return TaskNotFound(path_id or "?")
        return RequestNotFound(path_id or "?")
    if name in _BY_NAME:
        return _BY_NAME[name](detail)
    if status_code == 413:
        return InvalidRequest(detail)
    if status_code < 500:
        return CallerError(f"HTTP {status_code}: {detail}")
    return RuntimeFailure(f"server error {status_code}: {detail}")


def _request(data: Any) -> Request:
    return RequestAdapter.validate_python(data)


@dataclass(frozen=True)
class _Op(Generic[T]):
    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    subject: str | None = None
    ok: tuple[int, ...] = (200, 201)
    timeout: float | None = None


def _submit(new: NewRequest | Mapping[str, Any]) -> _Op[Submitted]:
    body = new.model_dump(mode="json", exclude_none=True) if isinstance(new, NewRequest) else new
    return _Op(
        "POST",
        f"{API}/requests",
        lambda r: Submitted(_request(r.json()), created=r.status_code == 201),
        json=dict(body),
    )


def _read(path: str, decode: Callable[[bytes], T]) -> _Op[T]:
    """``GET`` an API path, its answer's body read by ``decode``."""
    return _Op("GET", f"{API}{path}", lambda r: decode(r.content))


def _change(path: str, decode: Callable[[bytes], T], *, subject: str | None = None) -> _Op[T]:
    """``POST`` to an API path with no body (revoke, remove), the answer read by ``decode``."""
    return _Op("POST", f"{API}{path}", lambda r: decode(r.content), subject=subject)


def _one(method: str, request_id: str, tail: str = "", body: Any = None) -> _Op[Request]:
    return _Op(
        method,
        f"{API}/requests/{request_id}{tail}",
        lambda r: _request(r.json()),
        json=body,
        subject=request_id,
    )


def _claim(request_id: str, args: Mapping[str, JsonValue], lease: float | None) -> _Op[Request]:
    body: dict[str, Any] = {"args": dict(args)}
    if lease is not None:
        body["lease"] = lease
    return _one("POST", request_id, "/claim", body)


def _renew(request_id: str, lease: float | None) -> _Op[Request]:
    return _one("POST", request_id, "/lease", {} if lease is None else {"lease": lease})


def _wait(request_id: str, seconds: float) -> _Op[Request]:
    # The HTTP timeout outlasts the long poll, so the server answers first.
    return _Op(
        "GET",
        f"{API}/requests/{request_id}/wait",
        lambda r: _request(r.json()),
        params={"timeout": seconds},
        subject=request_id,
        timeout=seconds + 30,
    )


_RETRY_PAUSE = 1.0
"""Seconds between asking again while a server that said it is stopping comes back."""


@dataclass
class _Waiting:
    """A wait that outlives a server restart: the time left, and whether to ask again."""

    deadline: float
    stopped: bool = False

    def chunk(self) -> float:
        """Seconds for the next long poll."""
        return max(0.0, min(self.deadline - time.monotonic(), 300.0))

    def over(self) -> bool:
        """Whether the wait's time is up."""
        return self.deadline - time.monotonic() <= 0

    def pause_after(self, exc: SignoffError) -> float | None:
        """Seconds to pause before asking again after ``exc``; None: raise it."""
        # only once the server said it is stopping: until it is back, it cannot be reached
        if isinstance(exc, ServerStopping):
            self.stopped = True
        elif not (self.stopped and isinstance(exc, StoreUnavailable)):
            return None
        left = self.deadline - time.monotonic()
        return min(_RETRY_PAUSE, left) if left > 0 else None


def _decision_body(decision: Decision | Mapping[str, Any]) -> Any:
    if isinstance(decision, Mapping):
        return dict(decision)
    return decision.model_dump(mode="json", exclude_none=True)


def _decide(
    request_id: str, decision: Decision | Mapping[str, Any], via: Channel, client: str | None
) -> _Op[Request]:
    params: dict[str, str] = {"via": via} if via != "person" else {}
    if client is not None:
        params["client"] = client
    return _Op(
        "POST",
        f"{API}/requests/{request_id}/decision",
        lambda r: _request(r.json()),
        json=_decision_body(decision),
        params=params,
        subject=request_id,
    )


def _page(response: httpx.Response) -> Page:
    page = RequestPage.model_validate_json(response.content)
    return Page(items=page.items, next_cursor=page.next_cursor)


def _outcomes(response: httpx.Response) -> list[BatchOutcome]:
    return [
        BatchOutcome(id=item.id, status=item.status)
        if isinstance(item, BatchDecided)
        else BatchOutcome(id=item.id, error=_error_of(item.code, item.error, item.detail, item.id))
        for item in BatchResults.model_validate_json(response.content).results
    ]


class _Ops:
    """Each operation as a description of one HTTP call and how to read its answer."""

    @staticmethod
    def list_requests(query: RequestQuery) -> _Op[Page]:
        params = {
            k: v
            for k, v in {
                "status": query.status,
                "session_id": query.session_id,
                "kind": query.kind,
                "requested_by": query.requested_by,
                "decided_by": query.decided_by,
                "tool_name": query.tool_name,
                "q": query.text,
                "limit": query.limit,
                "cursor": query.cursor,
            }.items()
            if v is not None
        }
        return _Op("GET", f"{API}/requests", _page, params=params)

    @staticmethod
    def preview_edit(request_id: str, args: Mapping[str, JsonValue]) -> _Op[EditPreview]:
        return _Op(
            "POST",
            f"{API}/requests/{request_id}/preview",
            lambda r: EditPreview.model_validate_json(r.content),
            json={"args": dict(args)},
            subject=request_id,
        )

    @staticmethod
    def decide_many(ids: Sequence[str], type_: str, reason: str) -> _Op[list[BatchOutcome]]:
        body = {"ids": list(ids), "type": type_, "reason": reason}
        return _Op("POST", f"{API}/decisions", _outcomes, json=body)

    @staticmethod
    def audit(request_id: str | None) -> _Op[list[AuditEntry]]:
        params = {"request_id": request_id} if request_id else {}
        return _Op(
            "GET",
            f"{API}/audit",
            lambda r: AuditLog.model_validate_json(r.content).items,
            params=params,
            subject=request_id,
        )

    @staticmethod
    def verify_audit(anchor: str | None) -> _Op[ChainReport]:
        return _Op(
            "GET",
            f"{API}/audit/verify",
            lambda r: ChainReport.model_validate_json(r.content),
            params={"anchor": anchor} if anchor is not None else {},
        )

    @staticmethod
    def audit_anchor() -> _Op[Anchor]:
        return _Op(
            "GET",
            f"{API}/audit/anchor",
            lambda r: AnchorView.model_validate_json(r.content).as_anchor(),
        )

    @staticmethod
    def list_grants(live_only: bool) -> _Op[list[Grant]]:
        return _Op(
            "GET",
            f"{API}/grants",
            lambda r: GrantList.model_validate_json(r.content).items,
            params={"live": str(live_only).lower()},
        )

    @staticmethod
    def revoke_grant(grant_id: str) -> _Op[Grant]:
        return _Op(
            "POST",
            f"{API}/grants/{grant_id}/revoke",
            lambda r: Grant.model_validate_json(r.content),
            subject=grant_id,
        )

    @staticmethod
    def create_token(name: str, role: Role) -> _Op[tuple[str, TokenRecord]]:
        def parse(r: httpx.Response) -> tuple[str, TokenRecord]:
            created = TokenCreated.model_validate_json(r.content)
            return created.token, created.as_record()

        return _Op("POST", f"{API}/tokens", parse, json={"name": name, "role": role})

    @staticmethod
    def list_tokens() -> _Op[list[TokenRecord]]:
        return _read(
            "/tokens",
            lambda body: [t.as_record() for t in TokenList.model_validate_json(body).items],
        )

    @staticmethod
    def revoke_token(token_id: str) -> _Op[TokenRecord]:
        path = f"/tokens/{token_id}/revoke"
        return _change(
            path, lambda body: TokenView.model_validate_json(body).as_record(), subject=token_id
        )

    @staticmethod
    def add_webhook(url: str, secret: str | None, fmt: str) -> _Op[Webhook]:
        body = {"url": url, "secret": secret, "format": fmt}
        return _Op(
            "POST", f"{API}/webhooks", lambda r: Webhook.model_validate_json(r.content), json=body
        )

    @staticmethod
    def list_webhooks() -> _Op[list[Webhook]]:
        return _read(
            "/webhooks",
            lambda body: [w.as_webhook() for w in WebhookList.model_validate_json(body).items],
        )

    @staticmethod
    def remove_webhook(webhook_id: str) -> _Op[Webhook]:
        path = f"/webhooks/{webhook_id}/remove"
        return _change(path, lambda body: WebhookView.model_validate_json(body).as_webhook())

    @staticmethod
    def list_deliveries(status: str | None, limit: int) -> _Op[list[Delivery]]:
        params: dict[str, Any] = {"limit": limit}
        if status is not None:
            params["status"] = status
        return _Op(
            "GET",
            f"{API}/webhooks/deliveries",
            lambda r: DeliveryList.model_validate_json(r.content).items,
            params=params,
        )

    @staticmethod
    def get_task(task_id: str) -> _Op[Task]:
        return _Op("GET", f"{API}/tasks/{task_id}", lambda r: _task(r.json()))

    @staticmethod
    def list_tasks(status: str | None, limit: int) -> _Op[list[Task]]:
        params: dict[str, Any] = {"limit": limit}
        if status is not None:
            params["status"] = status
        return _Op(
            "GET",
            f"{API}/tasks",
            lambda r: [_task(t) for t in r.json()["items"]],
            params=params,
        )

    @staticmethod
    def redeliver(delivery_id: str) -> _Op[Delivery]:
        return _Op(
            "POST",
            f"{API}/webhooks/deliveries/{delivery_id}/redeliver",
            lambda r: Delivery.model_validate_json(r.content),
        )

    @staticmethod
    def add_route(spec: Mapping[str, Any]) -> _Op[Route]:
        return _Op(
            "POST",
            f"{API}/notify/routes",
            lambda r: Route.model_validate_json(r.content),
            json=dict(spec),
        )

    @staticmethod
    def list_routes() -> _Op[list[RouteStatus]]:
        return _read("/notify/routes", lambda body: RouteList.model_validate_json(body).items)

    @staticmethod
    def remove_route(name: str) -> _Op[Route]:
        path = f"/notify/routes/{quote(name, safe='')}/remove"
        return _change(path, Route.model_validate_json, subject=name)

    @staticmethod
    def link_person(kind: str, external_id: str, name: str) -> _Op[PersonLink]:
        body = {"kind": kind, "external_id": external_id, "name": name}
        return _Op(
            "POST",
            f"{API}/people/links",
            lambda r: PersonLink.model_validate_json(r.content),
            json=body,
        )

    @staticmethod
    def unlink_person(kind: str, external_id: str) -> _Op[PersonLink]:
        body = {"kind": kind, "external_id": external_id}
        return _Op(
            "POST",
            f"{API}/people/links/remove",
            lambda r: PersonLink.model_validate_json(r.content),
            json=body,
        )

    @staticmethod
    def list_links() -> _Op[list[PersonLink]]:
        return _read("/people/links", lambda body: LinkList.model_validate_json(body).items)

    @staticmethod
    def me() -> _Op[Principal]:
        return _Op("GET", f"{API}/me", lambda r: Principal.model_validate_json(r.content))


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class AsyncClient:
    """signoff over HTTP, async. Use ``async with AsyncClient(url, token) as client``."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=_headers(token), timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _run(self, op: _Op[T]) -> T:
        try:
            response = await self._http.request(
                op.method,
                op.path,
                json=op.json,
                params=op.params,
                timeout=op.timeout if op.timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.TransportError as exc:
            raise StoreUnavailable(f"cannot reach {self.base_url}: {exc}") from None
        if response.status_code not in op.ok:
            raise _error(response, op.subject)
        return op.parse(response)

    async def submit(self, new: NewRequest | Mapping[str, Any]) -> Submitted:
        """Open a request (201), or get the same one back for a repeated submit (200)."""
        return await self._run(_submit(new))

    async def get(self, request_id: str) -> Request:
        """One request."""
        return await self._run(_one("GET", request_id))

    async def list_requests(self, query: RequestQuery) -> Page:
        """A page of requests, newest first."""
        return await self._run(_Ops.list_requests(query))

    async def decide(
        self,
        request_id: str,
        decision: Decision | Mapping[str, Any],
        *,
        via: Channel = "person",
        client: str | None = None,
    ) -> Request:
        """Decide a pending request (``via``/``client``: answered in an MCP client's prompt)."""
        return await self._run(_decide(request_id, decision, via, client))

    async def decide_many(
        self, request_ids: Sequence[str], type_: str, reason: str = ""
    ) -> list[BatchOutcome]:
        """Approve or reject several requests; each gets its own outcome.

        A ``reject`` needs a ``reason`` that is not blank: without one the server refuses
        the whole batch (``InvalidDecision``) and nothing changes.
        """
        return await self._run(_Ops.decide_many(request_ids, type_, reason))

    async def preview_edit(self, request_id: str, args: Mapping[str, JsonValue]) -> EditPreview:
        """The call's preview for edited ``args`` and their schema misfits; changes nothing."""
        return await self._run(_Ops.preview_edit(request_id, args))

    async def wait(self, request_id: str, timeout: float) -> Request:
        """The request once decided, or as it is after ``timeout`` seconds (long polls).

        A server that stops meanwhile (503 ``ServerStopping``) is asked again once it is
        back, within ``timeout``.
        """
        waiting = _Waiting(time.monotonic() + timeout)
        while True:
            try:
                request = await self._run(_wait(request_id, waiting.chunk()))
            except (ServerStopping, StoreUnavailable) as exc:
                pause = waiting.pause_after(exc)
                if pause is None:
                    raise
                await asyncio.sleep(pause)
                continue
            if request.status != "pending" or waiting.over():
                return request

    async def claim(
        self, request_id: str, args: Mapping[str, JsonValue], *, lease: float | None = None
    ) -> Request:
        """Take an approved call for execution with exactly the approved args.

        The claim holds ``lease`` seconds (the server's default, 300, unless given): report
        or ``renew`` before then, or the server fails the call.
        """
        return await self._run(_claim(request_id, args, lease))

    async def renew(self, request_id: str, *, lease: float | None = None) -> Request:
        """Extend the lease of a call this client claimed to ``lease`` seconds from now."""
        return await self._run(_renew(request_id, lease))

    async def complete(self, request_id: str, result: JsonValue = None) -> Request:
        """Report that a claimed call succeeded."""
        return await self._run(_one("POST", request_id, "/result", {"ok": True, "result": result}))

    async def fail(self, request_id: str, error: str) -> Request:
        """Report that a claimed call failed."""
        return await self._run(_one("POST", request_id, "/result", {"ok": False, "error": error}))

    async def cancel(self, request_id: str, reason: str = "") -> Request:
        """Withdraw a pending request."""
        return await self._run(_one("POST", request_id, "/cancel", {"reason": reason}))

    async def audit(self, request_id: str | None = None) -> list[AuditEntry]:
        """Audit entries, all (admins) or one request's."""
        return await self._run(_Ops.audit(request_id))

    async def verify_audit(self, anchor: str | None = None) -> ChainReport:
        """Check the audit log (admins), against an anchor (``SEQ:HASH``) if given."""
        return await self._run(_Ops.verify_audit(anchor))

    async def audit_anchor(self) -> Anchor:
        """The chain head as an anchor (approvers and admins)."""
        return await self._run(_Ops.audit_anchor())

    async def list_grants(self, *, live_only: bool = True) -> list[Grant]:
        """Standing grants."""
        return await self._run(_Ops.list_grants(live_only))

    async def revoke_grant(self, grant_id: str) -> Grant:
        """Revoke a standing grant."""
        return await self._run(_Ops.revoke_grant(grant_id))

    async def me(self) -> Principal:
        """Who this client's token belongs to."""
        return await self._run(_Ops.me())

    async def create_token(self, name: str, role: Role) -> tuple[str, TokenRecord]:
        """Create a token (admins); returns it once with its record."""
        return await self._run(_Ops.create_token(name, role))

    async def list_tokens(self) -> list[TokenRecord]:
        """Tokens' records (admins), without their hashes."""
        return await self._run(_Ops.list_tokens())

    async def revoke_token(self, token_id: str) -> TokenRecord:
        """Revoke a token (admins)."""
        return await self._run(_Ops.revoke_token(token_id))

    async def add_webhook(
        self, url: str, *, secret: str | None = None, fmt: str = "json"
    ) -> Webhook:
        """Add a webhook endpoint (admins); the answer carries its secret."""
        return await self._run(_Ops.add_webhook(url, secret, fmt))

    async def list_webhooks(self) -> list[Webhook]:
        """Webhook endpoints (admins), secrets hidden."""
        return await self._run(_Ops.list_webhooks())

    async def add_route(self, spec: Mapping[str, Any]) -> Route:
        """Add a notification route (admins)."""
        return await self._run(_Ops.add_route(spec))

    async def list_routes(self) -> list[RouteStatus]:
        """Notification routes and whether each is failing (admins)."""
        return await self._run(_Ops.list_routes())

    async def remove_route(self, name: str) -> Route:
        """Remove a stored notification route (admins)."""
        return await self._run(_Ops.remove_route(name))

    async def link_person(self, kind: str, external_id: str, name: str) -> PersonLink:
        """Link a Slack user id or an email address to a person (admins)."""
        return await self._run(_Ops.link_person(kind, external_id, name))

    async def unlink_person(self, kind: str, external_id: str) -> PersonLink:
        """Remove a person link (admins)."""
        return await self._run(_Ops.unlink_person(kind, external_id))

    async def list_links(self) -> list[PersonLink]:
        """Every person link (admins)."""
        return await self._run(_Ops.list_links())

    async def remove_webhook(self, webhook_id: str) -> Webhook:
        """Stop sending to an endpoint (admins)."""
        return await self._run(_Ops.remove_webhook(webhook_id))

    async def list_deliveries(
        self, *, status: str | None = None, limit: int = 100
    ) -> list[Delivery]:
        """The webhook delivery log, newest first (admins)."""
        return await self._run(_Ops.list_deliveries(status, limit))

    async def redeliver(self, delivery_id: str) -> Delivery:
        """Send one delivery again now (admins)."""
        return await self._run(_Ops.redeliver(delivery_id))

    async def get_task(self, task_id: str) -> Task:
        """A hosted task this caller may see (without the agent's stored messages)."""
        return await self._run(_Ops.get_task(task_id))

    async def list_tasks(self, *, status: str | None = None, limit: int = 100) -> list[Task]:
        """Hosted tasks this caller may see, newest first."""
        return await self._run(_Ops.list_tasks(status, limit))

    async def events(
        self, *, since: int | None = None, session_id: str | None = None
    ) -> AsyncIterator[Event]:
        """Events from the server-sent event stream, replaying after ``since``."""
        params: dict[str, Any] = {}
        if since is not None:
            params["since"] = since
        if session_id is not None:
            params["session_id"] = session_id
        try:
            async with self._http.stream(
                "GET", f"{API}/events", params=params, timeout=httpx.Timeout(30, read=None)
            ) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise _error(response, None)
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        yield Event.model_validate(json.loads(line[6:]))
        except httpx.TransportError as exc:
            raise StoreUnavailable(f"cannot reach {self.base_url}: {exc}") from None


class Client:
    """signoff over HTTP, blocking. Same operations as :class:`AsyncClient`."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._http = httpx.Client(
            base_url=self.base_url, headers=_headers(token), timeout=timeout, transport=transport
        )

    def to_async(self) -> AsyncClient:
        """An :class:`AsyncClient` for the same server and token (for async integrations)."""
        return AsyncClient(self.base_url, self._token, timeout=self._timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def _run(self, op: _Op[T]) -> T:
        try:
            response = self._http.request(
                op.method,
                op.path,
                json=op.json,
                params=op.params,
                timeout=op.timeout if op.timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.TransportError as exc:
            raise StoreUnavailable(f"cannot reach {self.base_url}: {exc}") from None
        if response.status_code not in op.ok:
            raise _error(response, op.subject)
        return op.parse(response)

    def submit(self, new: NewRequest | Mapping[str, Any]) -> Submitted:
        """Open a request (or get the same one back for a repeated submit)."""
        return self._run(_submit(new))

    def get(self, request_id: str) -> Request:
        """One request."""
        return self._run(_one("GET", request_id))

    def list_requests(self, query: RequestQuery) -> Page:
        """A page of requests, newest first."""
        return self._run(_Ops.list_requests(query))

    def decide(
        self,
        request_id: str,
        decision: Decision | Mapping[str, Any],
        *,
        via: Channel = "person",
        client: str | None = None,
    ) -> Request:
        """Decide a pending request (``via``/``client``: answered in an MCP client's prompt)."""
        return self._run(_decide(request_id, decision, via, client))

    def decide_many(
        self, request_ids: Sequence[str], type_: str, reason: str = ""
    ) -> list[BatchOutcome]:
        """Approve or reject several requests; each gets its own outcome.

        A ``reject`` needs a ``reason`` that is not blank: without one the server refuses
        the whole batch (``InvalidDecision``) and nothing changes.
        """
        return self._run(_Ops.decide_many(request_ids, type_, reason))

    def preview_edit(self, request_id: str, args: Mapping[str, JsonValue]) -> EditPreview:
        """The call's preview for edited ``args`` and their schema misfits; changes nothing."""
        return self._run(_Ops.preview_edit(request_id, args))

    def wait(self, request_id: str, timeout: float) -> Request:
        """The request once decided, or as it is after ``timeout`` seconds.

        A server that stops meanwhile (503 ``ServerStopping``) is asked again once it is
        back, within ``timeout``.
        """
        waiting = _Waiting(time.monotonic() + timeout)
        while True:
            try:
                request = self._run(_wait(request_id, waiting.chunk()))
            except (ServerStopping, StoreUnavailable) as exc:
                pause = waiting.pause_after(exc)
                if pause is None:
                    raise
                time.sleep(pause)
                continue
            if request.status != "pending" or waiting.over():
                return request

    def claim(
        self, request_id: str, args: Mapping[str, JsonValue], *, lease: float | None = None
    ) -> Request:
        """Take an approved call for execution with exactly the approved args.

        The claim holds ``lease`` seconds (the server's default, 300, unless given): report
        or ``renew`` before then, or the server fails the call.
        """
        return self._run(_claim(request_id, args, lease))

    def renew(self, request_id: str, *, lease: float | None = None) -> Request:
        """Extend the lease of a call this client claimed to ``lease`` seconds from now."""
        return self._run(_renew(request_id, lease))

    def complete(self, request_id: str, result: JsonValue = None) -> Request:
        """Report that a claimed call succeeded."""
        return self._run(_one("POST", request_id, "/result", {"ok": True, "result": result}))

    def fail(self, request_id: str, error: str) -> Request:
        """Report that a claimed call failed."""
        return self._run(_one("POST", request_id, "/result", {"ok": False, "error": error}))

    def cancel(self, request_id: str, reason: str = "") -> Request:
        """Withdraw a pending request."""
        return self._run(_one("POST", request_id, "/cancel", {"reason": reason}))

    def audit(self, request_id: str | None = None) -> list[AuditEntry]:
        """Audit entries, all (admins) or one request's."""
        return self._run(_Ops.audit(request_id))

    def verify_audit(self, anchor: str | None = None) -> ChainReport:
        """Check the audit log (admins), against an anchor (``SEQ:HASH``) if given."""
        return self._run(_Ops.verify_audit(anchor))

    def audit_anchor(self) -> Anchor:
        """The chain head as an anchor (approvers and admins)."""
        return self._run(_Ops.audit_anchor())

    def list_grants(self, *, live_only: bool = True) -> list[Grant]:
        """Standing grants."""
        return self._run(_Ops.list_grants(live_only))

    def revoke_grant(self, grant_id: str) -> Grant:
        """Revoke a standing grant."""
        return self._run(_Ops.revoke_grant(grant_id))

    def revoke_token(self, token_id: str) -> TokenRecord:
        """Revoke a token (admins)."""
        return self._run(_Ops.revoke_token(token_id))

    def me(self) -> Principal:
        """Who this client's token belongs to."""
        return self._run(_Ops.me())

    def create_token(self, name: str, role: Role) -> tuple[str, TokenRecord]:
        """Create a token (admins); returns it once with its record."""
        return self._run(_Ops.create_token(name, role))

    def list_tokens(self) -> list[TokenRecord]:
        """Tokens' records (admins), without their hashes."""
        return self._run(_Ops.list_tokens())

    def add_webhook(self, url: str, *, secret: str | None = None, fmt: str = "json") -> Webhook:
        """Add a webhook endpoint (admins); the answer carries its secret."""
        return self._run(_Ops.add_webhook(url, secret, fmt))

    def list_webhooks(self) -> list[Webhook]:
        """Webhook endpoints (admins), secrets hidden."""
        return self._run(_Ops.list_webhooks())

    def add_route(self, spec: Mapping[str, Any]) -> Route:
        """Add a notification route (admins)."""
        return self._run(_Ops.add_route(spec))

    def list_routes(self) -> list[RouteStatus]:
        """Notification routes and whether each is failing (admins)."""
        return self._run(_Ops.list_routes())

    def remove_route(self, name: str) -> Route:
        """Remove a stored notification route (admins)."""
        return self._run(_Ops.remove_route(name))

    def link_person(self, kind: str, external_id: str, name: str) -> PersonLink:
        """Link a Slack user id or an email address to a person (admins)."""
        return self._run(_Ops.link_person(kind, external_id, name))

    def unlink_person(self, kind: str, external_id: str) -> PersonLink:
        """Remove a person link (admins)."""
        return self._run(_Ops.unlink_person(kind, external_id))

    def list_links(self) -> list[PersonLink]:
        """Every person link (admins)."""
        return self._run(_Ops.list_links())

    def remove_webhook(self, webhook_id: str) -> Webhook:
        """Stop sending to an endpoint (admins)."""
        return self._run(_Ops.remove_webhook(webhook_id))

    def list_deliveries(self, *, status: str | None = None, limit: int = 100) -> list[Delivery]:
        """The webhook delivery log, newest first (admins)."""
        return self._run(_Ops.list_deliveries(status, limit))

    def redeliver(self, delivery_id: str) -> Delivery:
        """Send one delivery again now (admins)."""
        return self._run(_Ops.redeliver(delivery_id))

    def get_task(self, task_id: str) -> Task:
        """A hosted task this caller may see (without the agent's stored messages)."""
        return self._run(_Ops.get_task(task_id))

    def list_tasks(self, *, status: str | None = None, limit: int = 100) -> list[Task]:
        """Hosted tasks this caller may see, newest first."""
        return self._run(_Ops.list_tasks(status, limit))


def _task(view: Mapping[str, Any]) -> Task:
    """A task from the API's view of it (which leaves out the agent's stored messages)."""
    return Task.model_validate({k: v for k, v in view.items() if k in Task.model_fields})
