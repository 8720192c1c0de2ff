"""A coding agent's tool call through signoff: file it, let policy or a person decide, answer.

:func:`gate` is the decision: the call becomes an approval request like any other (the
inbox, the terminal inbox, the CLI, grants and the audit see it), tools.toml and standing
grants answer at submit, and otherwise the hook waits for a person until shortly before the
agent would kill it, then withdraws the request so nothing approvable is left behind.

:func:`answer` wraps it for a hook process or endpoint and never raises: every failure
(bad input, signoff unreachable, a crash) is a deny with exit 2.
"""

from __future__ import annotations

import asyncio
import json
import math
import secrets
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from pydantic import JsonValue

from signoff.backends import Backend
from signoff.domain.requests import ApprovalRequest, Request
from signoff.domain.text import refuse_unstorable
from signoff.errors import InvalidTransition, SignoffError
from signoff.integrations.hooks.contracts import (
    AGENT_LABELS,
    MAX_INPUT_BYTES,
    AgentName,
    HookCall,
    HookInputError,
    HookReply,
    Verdict,
    parse_call,
    reply,
)
from signoff.integrations.outcomes import denial

__all__ = ["Connect", "answer", "gate", "verdict_for"]

Connect = Callable[[HookCall], AbstractAsyncContextManager[Backend]]
"""Opens the backend a hook files its request through (a server, or the local database)."""

_RAN = ("approved", "executing", "completed", "failed")
_GAVE_UP = "the hook stopped waiting for a decision"


def _request_body(call: HookCall, wait: float) -> dict[str, Any]:
    context: dict[str, JsonValue] = {"via": f"{AGENT_LABELS[call.agent]} hook ({call.event})"}
    if call.cwd:
        context["cwd"] = call.cwd
    if call.transcript_path:
        context["transcript_path"] = call.transcript_path
    body: dict[str, Any] = {
        "session_id": call.session_id,
        "kind": "approval",
        "tool_name": call.tool_name,
        "tool_args": call.tool_input,
        "tool_call_id": call.tool_use_id,
        "context": context,
        # expires a moment after the hook gives up: a hook the agent killed leaves nothing
        "expires_in": math.ceil(wait) + 2,
    }
    if call.tool_use_id is None:  # filed again only as this run's own (see _withdraw_filed)
        body["idempotency_key"] = f"hook-{secrets.token_urlsafe(16)}"
    return body


def verdict_for(call: HookCall, request: Request) -> Verdict:
    """What the hook answers for a request that left pending (or never was)."""
    if request.status in _RAN and isinstance(request, ApprovalRequest):
        record = request.decision
        if request.grant_id is not None:
            why = f"approved in signoff by standing grant {request.grant_id}"
        elif record is not None and record.via == "policy":
            why = "allowed by signoff policy"
        elif record is not None:
            why = f"approved in signoff by {record.decided_by}"
        else:
            why = "approved in signoff"
        approved = request.approved_args
        edited = approved if approved is not None and approved != call.tool_input else None
        if edited is not None:
            why += " with edited arguments"
        return Verdict(allow=True, reason=why, updated_input=edited)
    if request.status == "rejected":
        return Verdict(allow=False, reason=denial(request))
    if request.status == "pending":
        return Verdict(allow=False, reason="no decision came in time", failure=True)
    # expired or canceled: nobody said yes in time
    return Verdict(allow=False, reason=denial(request), failure=True)


async def _withdraw(backend: Backend, request_id: str) -> Request | None:
    try:
        return await backend.cancel(request_id, _GAVE_UP)
    except InvalidTransition:
        return await backend.get(request_id)  # decided (or expired) in the meantime: it stands


async def _withdraw_filed(backend: Backend, body: dict[str, Any]) -> None:
    """Withdraw what a submit stopped on its way may have filed: the server may have filed
    it with its answer lost. The same body filed again returns that request (its call id,
    or its idempotency key, makes a submit idempotent), or files one, and it is withdrawn."""
    request = (await backend.submit(body)).request
    if request.status == "pending":
        await _withdraw(backend, request.id)


async def gate(backend: Backend, call: HookCall, *, wait: float) -> Verdict:
    """File ``call``, wait up to ``wait`` seconds (filing included) for its decision, and
    say what to answer.

    A request still pending at the end (or when the hook is cancelled, e.g. on SIGTERM,
    even while it files the call) is withdrawn; a decision that lands in between stands.
    """
    deadline = time.monotonic() + wait
    body = _request_body(call, wait)
    try:
        request = (await backend.submit(body)).request
    except asyncio.CancelledError:
        await asyncio.shield(_withdraw_filed(backend, body))
        raise
    try:
        while request.status == "pending":
            left = deadline - time.monotonic()
            if left <= 0:
                break
            request = await backend.wait(request.id, min(left, 60.0))
    except asyncio.CancelledError:
        await asyncio.shield(_withdraw(backend, request.id))
        raise
    if request.status == "pending":
        request = await _withdraw(backend, request.id) or request
    return verdict_for(call, request)


MAX_REASON = 1_000
"""A failure's reason is cut to this many characters (a validator's path into deeply nested
hostile input can run to kilobytes)."""


def _failure(reason: str) -> Verdict:
    if len(reason) > MAX_REASON:
        reason = reason[: MAX_REASON - 1] + "…"
    return Verdict(allow=False, reason=reason, failure=True)


async def answer(agent: AgentName, raw: bytes | str, connect: Connect, *, wait: float) -> HookReply:
    """The full hook: read the agent's JSON, gate the call, answer in its shape. Never raises
    (except for cancellation): anything that goes wrong is a deny with exit 2."""
    event: str | None = None
    try:
        if len(raw) > MAX_INPUT_BYTES:
            raise HookInputError(f"the hook input is over {MAX_INPUT_BYTES} bytes")
        try:
            data = json.loads(raw)
        except ValueError:
            raise HookInputError("the hook input is not JSON") from None
        if isinstance(data, dict) and isinstance(data.get("hook_event_name"), str):
            event = data["hook_event_name"]
        try:
            refuse_unstorable(data)
        except ValueError as exc:
            raise HookInputError(str(exc)) from None
        call = parse_call(agent, data)
        async with connect(call) as backend:
            verdict = await gate(backend, call, wait=wait)
    except HookInputError as exc:
        verdict = _failure(f"signoff could not read the hook input: {exc}; the call was blocked")
    except SignoffError as exc:
        verdict = _failure(f"signoff could not decide ({exc.message}); the call was blocked")
    except Exception as exc:  # a hook fails closed, whatever broke
        verdict = _failure(f"signoff hook failed ({type(exc).__name__}: {exc}); blocked")
    return reply(agent, event, verdict)
