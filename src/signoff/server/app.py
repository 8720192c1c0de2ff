"""The ASGI app: the public HTTP contract under ``/api/v1``, over one service."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from signoff.__version__ import __version__
from signoff.domain.decisions import Channel, Decision, DecisionAdapter
from signoff.domain.principals import Principal, Role
from signoff.domain.requests import RequestAdapter, RequestKind, Status
from signoff.domain.submission import NewRequest
from signoff.domain.text import NoNul, refuse_unstorable
from signoff.domain.transitions import MAX_CLIENT_NAME, MAX_LEASE, MIN_LEASE, check_may_decide
from signoff.domain.webhooks import DeliveryStatus, WebhookFormat
from signoff.errors import NotAllowed
from signoff.hosting import host_agents
from signoff.preview_root import PreviewRoot
from signoff.server.auth import cookie_principal
from signoff.server.deps import API, current_principal, service_of
from signoff.server.errors import install_error_handlers, status_of
from signoff.server.events import events_router
from signoff.server.hooks import FailClosedHooks, hooks_router
from signoff.server.limits import BodyLimit, NoNulInUrl
from signoff.server.links import links_from
from signoff.server.shutdown import Shutdown
from signoff.server.tasks import tasks_router
from signoff.service import Service
from signoff.store.base import MAX_PAGE, RequestQuery
from signoff.web.routes import SecurityHeaders, static_files, web_router
from signoff.webhooks import WebhookDispatcher, add_webhook, redeliver, remove_webhook

__all__ = ["API", "create_app"]

MAX_WAIT = 300.0


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _encodable(cls, data: object) -> object:
        return refuse_unstorable(data)


class BatchDecision(_Body):
    """Decide several requests alike."""

    ids: list[Annotated[NoNul, Field(min_length=1, max_length=100)]] = Field(
        min_length=1, max_length=500
    )
    type: Literal["approve", "reject"]
    reason: str = Field(default="", max_length=20_000)


class ClaimBody(_Body):
    """The arguments about to run, and how long the claim holds without a report."""

    args: dict[str, JsonValue]
    lease: float | None = Field(default=None, ge=MIN_LEASE, le=MAX_LEASE)
    """Seconds until the server fails the call unless it is reported or renewed (300)."""


class LeaseBody(_Body):
    """How long a renewed claim holds from now."""

    lease: float | None = Field(default=None, ge=MIN_LEASE, le=MAX_LEASE)
    """Seconds from now (300)."""


class ResultBody(_Body):
    """What happened when the call ran."""

    ok: bool
    result: JsonValue = None
    error: Annotated[str, Field(max_length=20_000)] | None = None


class TokenBody(_Body):
    """A token to create."""

    name: NoNul = Field(min_length=1, max_length=200)
    role: Role


class WebhookBody(_Body):
    """A webhook endpoint to add."""

    url: str = Field(min_length=8, max_length=2000)
    secret: str | None = Field(default=None, min_length=8, max_length=200)
    format: WebhookFormat = "json"


class CancelBody(_Body):
    """Why the request is withdrawn."""

    reason: str = Field(default="", max_length=20_000)


Caller = Annotated[Principal, Depends(current_principal)]
ServiceDep = Annotated[Service, Depends(service_of)]


def _dump(request: Any) -> dict[str, Any]:
    out: dict[str, Any] = RequestAdapter.dump_python(request, mode="json")
    return out


def api_router() -> APIRouter:
    """The REST endpoints of the public contract."""
    router = APIRouter(prefix=API)

    @router.post("/requests", status_code=201, responses=links_from(201, 200))
    async def submit(
        body: NewRequest,
        service: ServiceDep,
        caller: Caller,
        response: Response,
        idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
    ) -> dict[str, Any]:
        """Open a request; the caller's own call id or Idempotency-Key again returns it with 200."""
        if idempotency_key and body.idempotency_key is None:
            body = body.model_copy(update={"idempotency_key": idempotency_key})
        submitted = await service.submit(body, caller)
        if not submitted.created:
            response.status_code = 200
        return _dump(submitted.request)

    @router.get("/requests")
    async def list_requests(
        service: ServiceDep,
        caller: Caller,
        status: Status | None = None,
        session_id: Annotated[str | None, Query(max_length=200)] = None,
        kind: RequestKind | None = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        cursor: Annotated[str | None, Query(max_length=500)] = None,
    ) -> dict[str, Any]:
        """Requests newest first, a page at a time."""
        query = RequestQuery(
            status=status, session_id=session_id, kind=kind, limit=limit, cursor=cursor
        )
        page = await service.list_requests(query, caller)
        return {"items": [_dump(r) for r in page.items], "next_cursor": page.next_cursor}

    @router.get("/requests/{request_id}", responses=links_from(200))
    async def get_request(request_id: str, service: ServiceDep, caller: Caller) -> dict[str, Any]:
        """One request; 404 when unknown or not visible to the caller."""
        return _dump(await service.get(request_id, caller))

    @router.post("/requests/{request_id}/decision", responses=links_from(200))
    async def decide(
        request_id: str,
        body: Decision,
        service: ServiceDep,
        caller: Caller,
        via: Channel = "person",
        client: Annotated[str | None, Query(max_length=MAX_CLIENT_NAME)] = None,
    ) -> dict[str, Any]:
        """Decide a pending request; 403 for an agent, whatever the id.

        ``?via=mcp-elicitation&client=NAME`` records that the person answered in an MCP
        client's prompt (as ``signoff mcp-proxy --approver-token`` does).
        """
        check_may_decide(caller)
        await service.get(request_id, caller)
        return _dump(await service.decide(request_id, body, caller, via=via, client=client))

    @router.post("/decisions")
    async def decide_many(
        body: BatchDecision, service: ServiceDep, caller: Caller
    ) -> dict[str, Any]:
        """Decide several requests; each id gets its status or its error."""
        if body.type == "approve":
            decision: Decision = DecisionAdapter.validate_python({"type": "approve"})
        else:
            decision = DecisionAdapter.validate_python({"type": "reject", "reason": body.reason})
        outcomes = await service.decide_many(body.ids, decision, caller)
        results: list[dict[str, Any]] = []
        for o in outcomes:
            if o.error is None:
                results.append({"id": o.id, "status": o.status})
            else:
                results.append(
                    {
                        "id": o.id,
                        "error": type(o.error).__name__,
                        "detail": o.error.message,
                        "code": status_of(o.error),
                    }
                )
        return {"results": results}

    @router.get("/requests/{request_id}/wait", responses=links_from(200))
    async def wait(
        request_id: str,
        request: Request,
        service: ServiceDep,
        caller: Caller,
        timeout: Annotated[float, Query(ge=0, le=MAX_WAIT)] = 30.0,
    ) -> dict[str, Any]:
        """Long poll: returns once the request is no longer pending, or after ``timeout``.

        A server that is shutting down answers 503 ``ServerStopping`` with ``Retry-After``.
        """
        stopping: Shutdown = request.app.state.shutdown
        return _dump(await stopping.unless_stopping(service.wait(request_id, timeout, caller)))

    @router.post("/requests/{request_id}/claim", responses=links_from(200))
    async def claim(
        request_id: str, body: ClaimBody, service: ServiceDep, caller: Caller
    ) -> dict[str, Any]:
        """Take an approved call for execution: once, with the approved args only.

        The claim holds for ``lease`` seconds (300 unless given); a call neither reported
        nor renewed by then is failed by the server and never run again.
        """
        await service.get(request_id, caller)
        return _dump(await service.claim(request_id, body.args, caller, lease=body.lease))

    @router.post("/requests/{request_id}/lease", responses=links_from(200))
    async def renew_lease(
        request_id: str,
        service: ServiceDep,
        caller: Caller,
        body: LeaseBody | None = None,
    ) -> dict[str, Any]:
        """Renew the lease of a call the caller claimed: it holds ``lease`` seconds from now."""
        await service.get(request_id, caller)
        lease = body.lease if body is not None else None
        return _dump(await service.renew(request_id, caller, lease=lease))

    @router.post("/requests/{request_id}/result", responses=links_from(200))
    async def result(
        request_id: str, body: ResultBody, service: ServiceDep, caller: Caller
    ) -> dict[str, Any]:
        """Report what happened when a claimed call ran."""
        await service.get(request_id, caller)
        if body.ok:
            return _dump(await service.complete(request_id, caller, body.result))
        return _dump(await service.fail(request_id, caller, body.error or "failed"))

    @router.post("/requests/{request_id}/cancel", responses=links_from(200))
    async def cancel(
        request_id: str,
        service: ServiceDep,
        caller: Caller,
        body: CancelBody | None = None,
    ) -> dict[str, Any]:
        """The asker withdraws a pending request."""
        await service.get(request_id, caller)
        return _dump(await service.cancel(request_id, caller, body.reason if body else ""))

    @router.get("/grants")
    async def grants(service: ServiceDep, caller: Caller, live: bool = True) -> dict[str, Any]:
        """Standing grants (approvers and admins)."""
        if caller.role == "agent":
            raise NotAllowed("agents may not list grants")
        items = await service.list_grants(live_only=live)
        return {"items": [g.model_dump(mode="json") for g in items]}

    @router.post("/grants/{grant_id}/revoke")
    async def revoke(grant_id: str, service: ServiceDep, caller: Caller) -> dict[str, Any]:
        """Stop a standing grant approving anything more."""
        return (await service.revoke_grant(grant_id, caller)).model_dump(mode="json")

    @router.get("/audit")
    async def audit(
        service: ServiceDep,
        caller: Caller,
        request_id: Annotated[str | None, Query(max_length=100)] = None,
    ) -> dict[str, Any]:
        """The audit chain, all of it (admins) or one request's entries."""
        if request_id is None and caller.role != "admin":
            raise NotAllowed("only admins may read the whole audit log")
        if request_id is not None:
            await service.get(request_id, caller)
        entries = await service.audit(request_id)
        return {"items": [e.model_dump(mode="json") for e in entries]}

    @router.get("/audit/verify")
    async def audit_verify(
        service: ServiceDep,
        caller: Caller,
        anchor: Annotated[str | None, Query(max_length=100)] = None,
    ) -> dict[str, Any]:
        """Check the audit log: edits, deletions, its head, unaudited requests and events,
        and, given ``anchor`` (``SEQ:HASH`` from /audit/anchor), that it extends that entry."""
        if caller.role != "admin":
            raise NotAllowed("only admins may verify the audit log")
        return (await service.verify_audit(anchor)).model_dump(mode="json")

    @router.get("/audit/anchor")
    async def audit_anchor(service: ServiceDep, caller: Caller) -> dict[str, Any]:
        """The chain head (approvers and admins), to keep outside the database."""
        if caller.role == "agent":
            raise NotAllowed("agents may not read the audit anchor")
        anchor = await service.audit_anchor()
        return {
            **anchor.model_dump(mode="json"),
            "anchor": str(anchor),
            "at": service.clock().isoformat(),
        }

    @router.post("/tokens", status_code=201)
    async def create_token(body: TokenBody, service: ServiceDep, caller: Caller) -> dict[str, Any]:
        """Create a token (admins); the token is in this answer only, stored hashed."""
        if caller.role != "admin":
            raise NotAllowed("only admins may create tokens")
        token, record = await service.create_token(body.name, body.role, created_by=caller.name)
        return {"token": token, **record.model_dump(mode="json", exclude={"token_hash"})}

    @router.get("/tokens")
    async def list_tokens(service: ServiceDep, caller: Caller) -> dict[str, Any]:
        """Tokens' ids, names and roles (admins); never the tokens or their hashes."""
        if caller.role != "admin":
            raise NotAllowed("only admins may list tokens")
        records = await service.store.list_tokens()
        return {"items": [t.model_dump(mode="json", exclude={"token_hash"}) for t in records]}

    @router.post("/tokens/{token_id}/revoke")
    async def revoke_token(token_id: str, service: ServiceDep, caller: Caller) -> dict[str, Any]:
        """Revoke a token (admins): it and the inbox sessions made with it stop working."""
        revoked = await service.revoke_token(token_id, caller)
        return revoked.model_dump(mode="json", exclude={"token_hash"})

    @router.post("/webhooks", status_code=201)
    async def create_webhook(
        body: WebhookBody, request: Request, service: ServiceDep, caller: Caller
    ) -> dict[str, Any]:
        """Add an endpoint that receives every event (admins); the secret is in this answer.

        422 for a loopback, private or link-local target unless private ones are allowed.
        """
        webhook = await add_webhook(
            service, caller, body.url, secret=body.secret, fmt=body.format,
            allow_private=request.app.state.allow_private_webhooks,
        )  # fmt: skip
        return webhook.model_dump(mode="json")

    @router.get("/webhooks")
    async def list_webhooks(service: ServiceDep, caller: Caller) -> dict[str, Any]:
        """Endpoints (admins), without their secrets."""
        if caller.role != "admin":
            raise NotAllowed("only admins manage webhooks")
        items = await service.store.list_webhooks()
        return {"items": [w.model_dump(mode="json", exclude={"secret"}) for w in items]}

    @router.post("/webhooks/{webhook_id}/remove")
    async def delete_webhook(
        webhook_id: str, service: ServiceDep, caller: Caller
    ) -> dict[str, Any]:
        """Stop sending to an endpoint (admins)."""
        removed = await remove_webhook(service, caller, webhook_id)
        return removed.model_dump(mode="json", exclude={"secret"})

    @router.get("/webhooks/deliveries")
    async def deliveries(
        service: ServiceDep,
        caller: Caller,
        status: DeliveryStatus | None = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    ) -> dict[str, Any]:
        """The delivery log, newest first (admins)."""
        if caller.role != "admin":
            raise NotAllowed("only admins manage webhooks")
        items = await service.store.list_deliveries(status=status, limit=limit)
        return {"items": [d.model_dump(mode="json") for d in items]}

    @router.post("/webhooks/deliveries/{delivery_id}/redeliver")
    async def redeliver_one(
        delivery_id: str, request: Request, service: ServiceDep, caller: Caller
    ) -> dict[str, Any]:
        """Send one delivery again now (admins)."""
        public = getattr(request.app.state, "public_url", None)
        delivery = await redeliver(
            service, caller, delivery_id, base_url=public,
            allow_private=request.app.state.allow_private_webhooks,
        )  # fmt: skip
        return delivery.model_dump(mode="json")

    @router.get("/me")
    async def me(caller: Caller) -> dict[str, Any]:
        """Who the token belongs to."""
        return caller.model_dump()

    return router


def create_app(
    service: Service,
    *,
    max_body: int = 1_048_576,
    body_timeout: float | None = None,
    sweep: bool = True,
    webhooks: bool = True,
    allow_private_webhooks: bool = False,
    heartbeat: float = 15.0,
    public_url: str | None = None,
    agents: Mapping[str, Any] | None = None,
    preview_root: PreviewRoot | None = None,
    session_key: bytes | None = None,
    secure_cookies: bool = False,
    trust_forwarded_proto: bool = False,
) -> FastAPI:
    """The signoff ASGI app over an open ``service``.

    While it runs (its lifespan) it expires overdue requests (``sweep``) and delivers
    events to webhooks; ``public_url`` is where links in webhook messages point. Webhooks
    go to public addresses only, unless ``allow_private_webhooks`` (loopback, private,
    link-local and the like allowed too).
    ``agents`` (name to pydantic-ai Agent) are hosted as durable tasks (needs pydantic-ai).
    Diff previews read files only inside ``preview_root``; without one, none at all.
    A request body must be whole within ``body_timeout`` seconds (None: no limit).
    Inbox session cookies are signed with ``session_key`` (from the server secret; None:
    a random key, so sessions end with the process); they are Secure with
    ``secure_cookies``, or when a trusted proxy says ``X-Forwarded-Proto: https``
    (``trust_forwarded_proto``).
    """
    # requests reach this service from agents over HTTP: previews read only inside the
    # operator's preview root, or nothing at all (its in-process default reads anywhere)
    service.confine_previews(preview_root)
    # the agents run through the host an integration registers (signoff.hosting)
    runner = host_agents(service, agents) if agents else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # with several servers on one database, exactly one should send webhooks
        dispatcher = (
            WebhookDispatcher(service, base_url=public_url, allow_private=allow_private_webhooks)
            if webhooks
            else None
        )
        if sweep:
            service.start_sweeper()
        if dispatcher is not None:
            await dispatcher.start()
        if runner is not None:
            await runner.start()
        try:
            yield
        finally:
            if runner is not None:
                await runner.stop()
            if dispatcher is not None:
                await dispatcher.stop()
            await service.stop_sweeper()

    app = FastAPI(
        title="signoff",
        summary="Human sign-off for what AI agents do.",
        version=__version__,
        lifespan=lifespan,
    )
    app.state.service = service
    install_error_handlers(app)
    app.state.heartbeat = heartbeat
    app.state.shutdown = Shutdown()
    app.state.public_url = public_url
    app.state.allow_private_webhooks = allow_private_webhooks
    app.include_router(api_router())
    app.include_router(events_router())
    app.state.tasks = runner
    app.include_router(tasks_router())

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        """Liveness: no authentication."""
        return JSONResponse({"ok": True})

    app.state.cookie_principal = cookie_principal
    app.state.session_key = session_key if session_key is not None else secrets.token_bytes(32)
    app.state.secure_cookies = secure_cookies
    app.state.trust_forwarded_proto = trust_forwarded_proto
    app.include_router(web_router())
    app.mount("/static", static_files(), name="static")
    app.include_router(hooks_router())
    app.add_middleware(BodyLimit, max_body=max_body, body_timeout=body_timeout)
    app.add_middleware(NoNulInUrl)
    app.add_middleware(FailClosedHooks)  # outside every refusal: a hook's is a 200 deny
    app.add_middleware(SecurityHeaders)
    return app
