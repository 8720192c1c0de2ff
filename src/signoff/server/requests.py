"""Requests over HTTP: submit, read, wait, decide (one or many), claim, report, cancel.

Every answer that is one request carries OpenAPI links to the calls that take its id
(:mod:`signoff.server.links`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Annotated, Any, Literal

from fastapi import APIRouter, FastAPI, Header, Query, Request, Response
from pydantic import Field, JsonValue
from starlette.types import Message, Scope, Send

from signoff.domain.decisions import ClientChannel, Decision, DecisionAdapter
from signoff.domain.principals import Principal
from signoff.domain.requests import Request as SignoffRequest
from signoff.domain.requests import RequestAdapter, RequestKind
from signoff.domain.submission import NewRequest
from signoff.domain.text import NoNul
from signoff.domain.transitions import MAX_CLIENT_NAME, MAX_LEASE, MIN_LEASE
from signoff.errors import ServerStopping, SignoffError
from signoff.server.bodies import StrictBody
from signoff.server.deps import API, Caller, ServiceDep
from signoff.server.errors import status_of
from signoff.server.links import links_from
from signoff.server.parking import Park, ParkedResponse, park_of
from signoff.server.shutdown import Shutdown
from signoff.service import BatchOutcome, Service
from signoff.store.base import MAX_PAGE, RequestQuery, StatusFilter
from signoff.store.search import MAX_FILTER, MAX_TEXT
from signoff.wire import BatchDecided, BatchRefused, BatchResults, RequestPage

__all__ = [
    "MAX_WAIT",
    "BatchDecision",
    "CancelBody",
    "ClaimBody",
    "LeaseBody",
    "ResultBody",
    "requests_router",
]

MAX_WAIT = 300.0
"""The longest long poll ``/wait`` holds, in seconds."""

_Filter = Annotated[str | None, Query(min_length=1, max_length=MAX_FILTER)]


class BatchDecision(StrictBody):
    """Decide several requests alike."""

    ids: list[Annotated[NoNul, Field(min_length=1, max_length=100)]] = Field(
        min_length=1, max_length=500
    )
    type: Literal["approve", "reject"]
    reason: str = Field(default="", max_length=20_000)


class ClaimBody(StrictBody):
    """The arguments about to run, and how long the claim holds without a report."""

    args: dict[str, JsonValue]
    lease: float | None = Field(default=None, ge=MIN_LEASE, le=MAX_LEASE)
    """Seconds until the server fails the call unless it is reported or renewed (300)."""


class LeaseBody(StrictBody):
    """How long a renewed claim holds from now."""

    lease: float | None = Field(default=None, ge=MIN_LEASE, le=MAX_LEASE)
    """Seconds from now (300)."""


class ResultBody(StrictBody):
    """What happened when the call ran."""

    ok: bool
    result: JsonValue = None
    error: Annotated[str, Field(max_length=20_000)] | None = None


class CancelBody(StrictBody):
    """Why the request is withdrawn."""

    reason: str = Field(default="", max_length=20_000)


def _submit_answers() -> dict[int | str, dict[str, Any]]:
    # 201 is the route's own status; the repeated submit's 200 needs its model named
    answers = links_from(201, 200)
    answers[200]["model"] = SignoffRequest
    return answers


def _batch_results(outcomes: list[BatchOutcome]) -> BatchResults:
    results: list[BatchDecided | BatchRefused] = []
    for outcome in outcomes:
        if outcome.error is None:
            decided = {"id": outcome.id, "status": outcome.status}
            results.append(BatchDecided.model_validate(decided))
        else:
            results.append(
                BatchRefused(
                    id=outcome.id,
                    error=type(outcome.error).__name__,
                    detail=outcome.error.message,
                    code=status_of(outcome.error),
                )
            )
    return BatchResults(results=results)


def requests_router() -> APIRouter:
    """``/requests`` and what each request can go through, and ``/decisions``."""
    router = APIRouter(prefix=API, tags=["requests"])
    _reading(router)
    _deciding(router)
    _running(router)
    return router


def _reading(router: APIRouter) -> None:
    """Submit, list, read and wait."""

    @router.post(
        "/requests",
        status_code=201,
        response_model=SignoffRequest,
        responses=_submit_answers(),
    )
    async def submit(
        body: NewRequest,
        service: ServiceDep,
        caller: Caller,
        response: Response,
        idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
    ) -> SignoffRequest:
        """Open a request; the caller's own call id or Idempotency-Key again returns it with 200."""
        if idempotency_key and body.idempotency_key is None:
            body = body.model_copy(update={"idempotency_key": idempotency_key})
        submitted = await service.submit(body, caller)
        if not submitted.created:
            response.status_code = 200
        return submitted.request

    @router.get("/requests", response_model=RequestPage)
    async def list_requests(
        service: ServiceDep,
        caller: Caller,
        status: StatusFilter | None = None,
        session_id: Annotated[str | None, Query(max_length=200)] = None,
        kind: RequestKind | None = None,
        requested_by: _Filter = None,
        decided_by: _Filter = None,
        tool_name: _Filter = None,
        q: Annotated[str | None, Query(min_length=1, max_length=MAX_TEXT)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        cursor: Annotated[str | None, Query(max_length=500)] = None,
    ) -> RequestPage:
        """Requests newest first, a page at a time; the filters combine, ``q``'s words must
        each occur (in any case) in the tool name and arguments or the prompt and questions,
        and ``status=ended`` is every status but pending. An agent sees only its own."""
        query = RequestQuery(
            status=status,
            session_id=session_id,
            kind=kind,
            requested_by=requested_by,
            decided_by=decided_by,
            tool_name=tool_name,
            text=q,
            limit=limit,
            cursor=cursor,
        )
        page = await service.list_requests(query, caller)
        return RequestPage(items=page.items, next_cursor=page.next_cursor)

    @router.get("/requests/{request_id}", response_model=SignoffRequest, responses=links_from(200))
    async def get_request(request_id: str, service: ServiceDep, caller: Caller) -> SignoffRequest:
        """One request; 404 when unknown or not visible to the caller."""
        return await service.get(request_id, caller)

    @router.get(
        "/requests/{request_id}/wait", response_model=SignoffRequest, responses=links_from(200)
    )
    async def wait(
        request_id: str,
        request: Request,
        service: ServiceDep,
        caller: Caller,
        timeout: Annotated[float, Query(ge=0, le=MAX_WAIT)] = 30.0,
    ) -> SignoffRequest | Response:
        """Long poll: returns once the request is no longer pending, or after ``timeout``.

        A server that is shutting down answers 503 ``ServerStopping`` with ``Retry-After``.
        """
        stopping: Shutdown = request.app.state.shutdown
        park = park_of(request.scope)
        if park is not None:  # under `signoff serve`: an idle poll holds no call chain
            waited = await service.wait(request_id, 0, caller)  # who may see it, expiry
            if waited.status != "pending" or timeout == 0:
                return waited
            if stopping.stopping:
                raise _stopping()
            deadline = asyncio.get_running_loop().time() + timeout
            later = functools.partial(
                _answer_later, request.scope, park, service, request_id, caller, deadline
            )
            return ParkedResponse(park, later)
        going = stopping.future()
        try:
            # the wait itself wakes on the stop: no task per long poll, ten thousand of them
            # held open cost only their own request's coroutine
            waited = await service.wait(request_id, timeout, caller, until=going)
            if waited.status == "pending" and going.done():
                raise _stopping()
            return waited
        finally:
            going.cancel()


async def _answer_later(
    scope: Scope,
    park: Park,
    service: Service,
    request_id: str,
    caller: Principal,
    deadline: float,
    send: Send,
) -> None:
    """The rest of a parked ``/wait``: the same wait, answered as the route would.

    The wait subscribes and reads again, so no decision made since the route's read is
    missed; it wakes on its request's events, its timer, the server stopping or the client
    going away. The answer goes through the call chain's ``send``: the middlewares still add
    their headers and log it. It keeps the scope, not the route's ``Request`` and what that
    parsed.
    """
    app: FastAPI = scope["app"]
    stopping: Shutdown = app.state.shutdown
    going = stopping.future()
    park.on_lost(functools.partial(_wake, going))
    answer: Response
    try:
        remaining = max(0.0, deadline - asyncio.get_running_loop().time())
        waited = await service.wait(request_id, remaining, caller, until=going)
        if waited.status == "pending" and stopping.stopping:
            raise _stopping()
        body = RequestAdapter.dump_json(RequestAdapter.validate_python(waited), by_alias=True)
        answer = Response(content=body, media_type="application/json")
    except SignoffError as exc:
        handled = app.exception_handlers[SignoffError](Request(scope), exc)
        answer = await handled if inspect.isawaitable(handled) else handled
    finally:
        going.cancel()
    await answer(scope, _nothing_to_read, send)


async def _nothing_to_read() -> Message:
    # a Response only sends; a GET's (empty) body was read before the route ran
    raise AssertionError("a parked answer reads nothing")


def _stopping() -> ServerStopping:
    """What a long poll still pending answers when the server stops (retryable: 503)."""
    return ServerStopping("the server is shutting down; ask again once it is back")


def _wake(going: asyncio.Future[None]) -> None:
    if not going.done():
        going.set_result(None)


def _deciding(router: APIRouter) -> None:
    """Decide one request, or several alike."""

    @router.post(
        "/requests/{request_id}/decision",
        response_model=SignoffRequest,
        responses=links_from(200),
    )
    async def decide(
        request_id: str,
        body: Decision,
        service: ServiceDep,
        caller: Caller,
        via: ClientChannel = "person",
        client: Annotated[str | None, Query(max_length=MAX_CLIENT_NAME)] = None,
    ) -> SignoffRequest:
        """Decide a pending request; 403 for an agent, whatever the id.

        A ``reject`` needs a ``reason`` that is not blank (it is told to the agent): 422
        ``a reason is required to reject`` otherwise, and nothing changes.

        ``?via=mcp-elicitation&client=NAME`` records that the person answered in an MCP
        client's prompt (as ``signoff mcp-proxy --form-elicitation`` does).
        ``?via=mcp-url`` records that they decided on the request's page opened from the
        link ``signoff mcp-proxy`` gave their MCP client.
        """
        return await service.decide(request_id, body, caller, via=via, client=client)

    @router.post("/decisions", response_model=BatchResults)
    async def decide_many(body: BatchDecision, service: ServiceDep, caller: Caller) -> BatchResults:
        """Decide several requests; each id gets its status or its error.

        A ``reject`` needs a ``reason`` that is not blank: without one the whole batch is
        refused (422 ``a reason is required to reject``) and nothing changes.
        """
        if body.type == "approve":
            decision: Decision = DecisionAdapter.validate_python({"type": "approve"})
        else:
            decision = DecisionAdapter.validate_python({"type": "reject", "reason": body.reason})
        return _batch_results(await service.decide_many(body.ids, decision, caller))


def _running(router: APIRouter) -> None:
    """Claim an approved call, renew its lease, report it; withdraw a pending request."""

    @router.post(
        "/requests/{request_id}/claim", response_model=SignoffRequest, responses=links_from(200)
    )
    async def claim(
        request_id: str, body: ClaimBody, service: ServiceDep, caller: Caller
    ) -> SignoffRequest:
        """Take an approved call for execution: once, with the approved args only.

        The claim holds for ``lease`` seconds (300 unless given); a call neither reported
        nor renewed by then is failed by the server and never run again.
        """
        await service.get(request_id, caller)
        return await service.claim(request_id, body.args, caller, lease=body.lease)

    @router.post(
        "/requests/{request_id}/lease", response_model=SignoffRequest, responses=links_from(200)
    )
    async def renew_lease(
        request_id: str,
        service: ServiceDep,
        caller: Caller,
        body: LeaseBody | None = None,
    ) -> SignoffRequest:
        """Renew the lease of a call the caller claimed: it holds ``lease`` seconds from now."""
        await service.get(request_id, caller)
        lease = body.lease if body is not None else None
        return await service.renew(request_id, caller, lease=lease)

    @router.post(
        "/requests/{request_id}/result", response_model=SignoffRequest, responses=links_from(200)
    )
    async def result(
        request_id: str, body: ResultBody, service: ServiceDep, caller: Caller
    ) -> SignoffRequest:
        """Report what happened when a claimed call ran."""
        await service.get(request_id, caller)
        if body.ok:
            return await service.complete(request_id, caller, body.result)
        return await service.fail(request_id, caller, body.error or "failed")

    @router.post(
        "/requests/{request_id}/cancel", response_model=SignoffRequest, responses=links_from(200)
    )
    async def cancel(
        request_id: str,
        service: ServiceDep,
        caller: Caller,
        body: CancelBody | None = None,
    ) -> SignoffRequest:
        """The asker withdraws a pending request."""
        await service.get(request_id, caller)
        return await service.cancel(request_id, caller, body.reason if body else "")
