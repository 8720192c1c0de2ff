"""Claude Code's ``http`` hook: ``POST /api/v1/hooks/claude-code`` on ``signoff serve``.

Claude Code's ``"type": "http"`` hook handler POSTs the JSON a command hook reads on stdin
and reads a 2xx answer's JSON body exactly as it reads a command hook's stdout. Anything
else (a status that is not 2xx, a connection failure, a timeout, a body that is not JSON)
is a *non-blocking error*: the tool runs. So this endpoint answers every failure it can
catch with **200 and a deny** in Claude Code's own JSON, never with 4xx/5xx: a body that is
not the hook's JSON, a missing or wrong token, an approver's token, a body over the size
limit, no decision in time, the server shutting down (:class:`FailClosedHooks` turns the
answers other layers give into that deny). Nothing is filed for a call refused that way.

The call is filed through :func:`signoff.integrations.hooks.gate.answer` as the agent the
token belongs to, exactly like ``signoff hook claude-code``. It waits ``?timeout=S``
seconds (default :data:`DEFAULT_WAIT`), ending before the hook's own timeout; a call whose
hook gives up first (Claude Code's timeout, the person pressing Esc) is withdrawn at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Final

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from signoff.backends import Backend, LocalBackend
from signoff.domain.principals import Principal
from signoff.integrations.hooks.contracts import (
    DEFAULT_WAIT,
    AgentName,
    HookCall,
    HookReply,
    Verdict,
    reply,
)
from signoff.integrations.hooks.gate import answer
from signoff.server.deps import API, current_principal, service_of
from signoff.server.shutdown import Shutdown

__all__ = ["HOOKS_PATH", "HTTP_HOOK_AGENTS", "MAX_HOOK_WAIT", "FailClosedHooks", "hooks_router"]

logger = logging.getLogger(__name__)

HOOKS_PATH: Final = f"{API}/hooks/"
"""Where the hook endpoints live."""

HTTP_HOOK_AGENTS: tuple[AgentName, ...] = ("claude-code",)
"""The agents with an HTTP hook handler (Codex CLI, Gemini CLI and Cursor run commands only)."""

MAX_HOOK_WAIT = 3600.0
"""The longest ``?timeout=`` a hook call may wait for a person, in seconds."""

SUBMITTER_ROLES = ("agent", "admin")
"""Who may file requests (as ``POST /requests`` allows): an approver's token files nothing."""

_DRAIN_LIMIT = 16 * 1_048_576
"""Request bytes read and dropped before a refusal is sent, so the agent reads the deny."""
_DRAIN_SECONDS = 10.0
_KEPT = 65_536
"""Request bytes kept to find the hook event in when a layer refused the body unread."""

Caller = Annotated[Principal, Depends(current_principal)]


def hooks_router() -> APIRouter:
    """``POST /api/v1/hooks/claude-code``."""
    router = APIRouter(prefix=API)

    @router.post("/hooks/claude-code")
    async def claude_code(
        request: Request,
        caller: Caller,
        timeout: Annotated[float | None, Query(gt=0, le=MAX_HOOK_WAIT)] = None,
    ) -> JSONResponse:
        """Answer Claude Code's ``http`` hook (PreToolUse or PermissionRequest) like
        ``signoff hook claude-code``: always 200, with allow, a deny and its reason, or an
        allow with the person's edited input; ``?timeout=S`` caps the wait (570 s)."""
        return await _hook("claude-code", request, caller, timeout)

    return router


def deny_reply(agent: AgentName, reason: str, raw: bytes | None = None) -> HookReply:
    """The deny ``agent`` honours for the hook input ``raw`` (None: not read)."""
    failed = Verdict(allow=False, reason=reason, failure=True)
    return reply(agent, _event_name(raw) if raw is not None else None, failed)


_EVENT_NAME = re.compile(rb'"hook_event_name"\s*:\s*"([A-Za-z]{1,64})"')


def _event_name(raw: bytes) -> str | None:
    """The hook event the agent named, so that a deny answers that event (Claude Code
    takes a reply naming another event for a failed hook, and runs the tool). A body that
    is not whole JSON (cut at the size limit) is searched for the field instead."""
    try:
        data = json.loads(raw)
    except ValueError:
        found = _EVENT_NAME.search(raw)
        return found.group(1).decode() if found else None
    event = data.get("hook_event_name") if isinstance(data, dict) else None
    return event if isinstance(event, str) else None


async def _hook(
    agent: AgentName, request: Request, caller: Principal, timeout: float | None
) -> JSONResponse:
    raw = await request.body()
    if caller.role not in SUBMITTER_ROLES:
        reason = (
            f"signoff refused the hook's token: it belongs to {caller.name}, an "
            f"{caller.role}, and only an agent's token may file requests; the call was blocked"
        )
        return _answer_json(deny_reply(agent, reason, raw), refused=403)
    service = service_of(request)

    @asynccontextmanager
    async def connect(call: HookCall) -> AsyncIterator[Backend]:
        yield LocalBackend(service, caller)

    wait = timeout if timeout is not None else DEFAULT_WAIT[agent]
    stopping: Shutdown = request.app.state.shutdown
    result = await _while_wanted(
        answer(agent, raw, connect, wait=wait), request, stopping, agent, raw
    )
    return _answer_json(result)


async def _while_wanted(
    work: Awaitable[HookReply], request: Request, stopping: Shutdown, agent: AgentName, raw: bytes
) -> HookReply:
    """``work``'s reply, or a deny once the server stops or the agent hangs up (the call's
    request withdrawn either way: :func:`gate` withdraws it when cancelled)."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_hung_up(request))
    stop = stopping.future()
    either_one: list[asyncio.Future[Any]] = [task, gone, stop]
    try:
        await asyncio.wait(either_one, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        raise
    finally:
        gone.cancel()
        stop.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    if stopping.stopping:
        why = "signoff is shutting down, so nobody decided this call; it was blocked"
    else:
        why = "the hook stopped waiting for a decision; the call was blocked"
    return deny_reply(agent, why, raw)


async def _hung_up(request: Request) -> None:
    """Return once the client has gone away (its body is already read)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _answer_json(result: HookReply, *, refused: int | None = None) -> JSONResponse:
    headers = {"X-Signoff-Refused": str(refused)} if refused is not None else None
    return JSONResponse(result.body, status_code=200, headers=headers)


# -- every other layer's refusal becomes a deny -------------------------------------------


def _hook_agent(scope: Scope) -> AgentName | None:
    if scope["type"] != "http":
        return None
    path: str = scope.get("path", "")
    if not path.startswith(HOOKS_PATH):
        return None
    name = path[len(HOOKS_PATH) :].rstrip("/")
    return next((agent for agent in HTTP_HOOK_AGENTS if agent == name), None)


def _refusal_reason(status: int, body: bytes) -> str:
    detail = ""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        kind, said = data.get("error"), data.get("detail")
        detail = f" {kind}: {said}" if isinstance(kind, str) and isinstance(said, str) else ""
    if status == 401:
        what = "signoff refused the hook's token"
    elif status == 413:
        what = "the hook input is over signoff's size limit"
    else:
        what = "signoff could not take the hook call"
    return f"{what} ({status}{detail}); the call was blocked"


class FailClosedHooks:
    """Under ``/api/v1/hooks/AGENT``: an answer that is not 2xx goes out as 200 + deny.

    Claude Code runs the tool on any other status, so a refusal from any layer (a missing
    token's 401, the body limit's 413, a bad ``?timeout``'s 422, a crash's 500) becomes a
    deny whose reason names it; the original status is in ``X-Signoff-Refused``. The rest
    of an unread body is read and dropped first (up to 16 MiB), so the agent reads the
    answer instead of a reset connection.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        agent = _hook_agent(scope)
        if agent is None:
            await self.app(scope, receive, send)
            return
        body_done = False
        refused: int | None = None
        said = bytearray()
        kept = bytearray()
        answered = False

        async def tracked_receive() -> Message:
            nonlocal body_done
            message = await receive()
            if message["type"] == "http.disconnect" or not message.get("more_body", False):
                body_done = True
            if len(kept) < _KEPT:
                kept.extend(message.get("body", b"")[: _KEPT - len(kept)])
            return message

        async def drain() -> None:
            nonlocal body_done
            dropped = 0
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_DRAIN_SECONDS):
                    while not body_done and dropped <= _DRAIN_LIMIT:
                        dropped += len((await tracked_receive()).get("body", b""))

        async def deny(status: int) -> None:
            nonlocal answered
            answered = True
            await drain()
            result = deny_reply(agent, _refusal_reason(status, bytes(said)), bytes(kept))
            body = json.dumps(result.body, ensure_ascii=False).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"x-signoff-refused", str(status).encode()),
            ]
            if not body_done:
                headers.append((b"connection", b"close"))
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        async def guarded_send(message: Message) -> None:
            nonlocal refused, answered
            if message["type"] == "http.response.start":
                if 200 <= message["status"] < 300:
                    answered = True
                    await send(message)
                else:
                    refused = message["status"]
                return
            if refused is None:
                await send(message)
                return
            if message["type"] == "http.response.body" and not answered:
                said.extend(message.get("body", b"")[: 4096 - len(said)])
                if not message.get("more_body", False):
                    await deny(refused)

        try:
            await self.app(scope, tracked_receive, guarded_send)
        except Exception:
            logger.exception("the %s hook endpoint failed", agent)
            if not answered:
                await deny(refused or 500)
