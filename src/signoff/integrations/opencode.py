"""OpenCode: a bridge that answers an ``opencode serve`` instance's permission requests.

OpenCode asks before a tool runs when its permission rules say ``"ask"``. The bridge
follows the server's event stream, files a signoff request for each permission it asks,
waits for the decision (made in any of signoff's transports) and replies through OpenCode's
permission API. Framework-free: httpx and the :class:`signoff.backends.Backend` only.

What it relies on, read in anomalyco/opencode (formerly sst/opencode), OpenCode 1.x (the V1
server API, November 2026: ``packages/opencode/src/permission/index.ts``,
``src/server/instance/permission.ts``, ``src/server/instance/event.ts``) and the V1 server docs:

- ``GET /event``: server-sent events, each ``data:`` line one JSON object
  ``{"type": ..., "properties": {...}}``; the first is ``server.connected``; newer servers
  send ``server.heartbeat`` every 10 s.
- ``permission.asked``: properties are the permission request ``{id ("per..."), sessionID
  ("ses..."), permission (the kind: "bash", "edit", "webfetch", "external_directory"...),
  patterns: [str], metadata: {..}, always: [str] (what "always" would allow from now on),
  tool?: {messageID, callID}}``. Older servers sent ``permission.updated`` with ``{id, type,
  pattern (str or list), sessionID, messageID, callID, title, metadata}``; both are read.
- ``permission.replied``: ``{sessionID, requestID, reply}`` (older: ``permissionID``,
  ``response``), also sent when OpenCode answers a permission itself: a ``reject`` rejects
  every other pending permission of that session, an ``always`` approves the others it covers.
- ``GET /permission``: the pending permission requests (a list of the objects above); they
  live in the server's memory only, so a restarted OpenCode has none.
- ``POST /permission/{requestID}/reply`` with ``{"reply": "once" | "always" | "reject",
  "message"?: str}``: a reject with a message lets the model continue with that feedback;
  without one the session stops. It answers 200 even for an unknown id. Older servers
  only have ``POST /session/{sessionID}/permissions/{permissionID}`` with
  ``{"response": ...}``, used when the first route is missing (404).
- ``?directory=PATH`` selects the project on every route; without it, the server's own.
- Auth: with ``OPENCODE_SERVER_PASSWORD`` set, HTTP basic auth, user ``opencode`` unless
  ``OPENCODE_SERVER_USERNAME`` says otherwise.
- OpenCode itself never times a permission out: it waits until it is answered.
- An ``always`` adds the permission's ``always`` patterns to the project's allow rules
  (every session of that OpenCode instance, at least until it restarts: the rules are
  loaded from the project's database at start), and OpenCode no longer asks for what they
  cover: the edit tool's ``always`` is ``["*"]``, every later edit; bash's is a prefix of
  the command (e.g. ``git push *``). signoff cannot take that back, so revoking the
  grant in signoff does not stop OpenCode; ``use_always=False`` (``--no-always``) answers
  ``once`` instead and keeps every call coming back to signoff, where the grant decides.

The signoff request: tool name the permission kind, arguments ``patterns`` beside the
metadata's keys (an edit's ``filepath`` and unified ``diff``, which gives the inbox its diff
preview; not editable: OpenCode cannot run edited arguments), session the OpenCode session id,
tool call id the permission id (so a reconnect files nothing twice), context ``{via:
"opencode", url, title, always, call_id}``. Approved: ``once``; approved by a standing
grant, or by a person for the session or always: ``always`` (unless ``use_always`` is off).
Rejected, answered, expired, canceled, or any failure to reach signoff: ``reject`` with the
reason (a person's reject with no reason: ``reject`` alone, and OpenCode stops the session,
as its own "Reject" does). Stopping the bridge leaves both sides pending; started again,
it picks them up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote

import httpx
from pydantic import JsonValue

from signoff.backends import Backend
from signoff.domain.decisions import Approve
from signoff.domain.requests import ApprovalRequest, Request
from signoff.errors import InvalidTransition, SignoffError
from signoff.integrations.outcomes import DENIED_NO_DECISION, denial, wait_decided

__all__ = [
    "MAX_ARGS_BYTES",
    "OpenCodeApi",
    "OpenCodeBridge",
    "OpenCodeError",
    "Permission",
    "PermissionFormatError",
    "Reply",
    "parse_permission",
    "reply_for",
    "request_body",
]

MAX_ARGS_BYTES = 512 * 1024
"""A permission whose arguments are larger is rejected unseen: no person could review it."""

_ID = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
_LONGEST_PAUSE = 30.0

ReplyKind = Literal["once", "always", "reject"]


class OpenCodeError(Exception):
    """The OpenCode server cannot be used as configured (wrong password, not OpenCode)."""


class PermissionFormatError(ValueError):
    """A permission event that is not the shape OpenCode sends."""


@dataclass(frozen=True)
class Permission:
    """One permission OpenCode asks for, as read from its event or list."""

    id: str
    """OpenCode's permission id (``per...``)."""
    session_id: str
    """The OpenCode session asking (``ses...``)."""
    kind: str
    """The permission: ``bash``, ``edit``, ``webfetch``... (the tool's gate)."""
    patterns: tuple[str, ...]
    """What it asks for: commands, paths, URLs."""
    metadata: dict[str, JsonValue]
    """The tool's details (a diff, a file path...)."""
    always: tuple[str, ...] = ()
    """The patterns an ``always`` reply would allow from now on."""
    title: str | None = None
    """Older servers: a one-line description."""
    call_id: str | None = None
    """The model's tool call id, when the permission belongs to a tool call."""


@dataclass(frozen=True)
class Reply:
    """What the bridge answers OpenCode."""

    reply: ReplyKind
    """``once``, ``always`` or ``reject``."""
    message: str | None = None
    """For ``reject``: what the model is told (None: the session stops)."""


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise PermissionFormatError(f"{what} is not a string")
    return value


def _texts(value: object, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PermissionFormatError(f"{what} is not a list of strings")
    return tuple(value)


def _ident(value: object, what: str) -> str:
    text = _text(value, what)
    if not _ID.fullmatch(text):
        raise PermissionFormatError(f"{what} is not an OpenCode id")
    return text


def parse_permission(data: object) -> Permission:
    """A ``permission.asked`` (or older ``permission.updated``) payload, checked."""
    if not isinstance(data, dict):
        raise PermissionFormatError("a permission is not a JSON object")
    tool = data.get("tool")
    call_id = tool.get("callID") if isinstance(tool, dict) else data.get("callID")
    metadata = data.get("metadata")
    title = data.get("title")
    return Permission(
        id=_ident(data.get("id"), "id"),
        session_id=_ident(data.get("sessionID"), "sessionID"),
        kind=_text(data.get("permission", data.get("type")), "permission"),
        patterns=_texts(data.get("patterns", data.get("pattern")), "patterns"),
        metadata=metadata if isinstance(metadata, dict) else {},
        always=_texts(data.get("always"), "always"),
        title=title if isinstance(title, str) else None,
        call_id=call_id if isinstance(call_id, str) else None,
    )


def _replied(data: object) -> tuple[str, str] | None:
    """``(session id, permission id)`` of a ``permission.replied`` payload, or None."""
    if not isinstance(data, dict):
        return None
    session = data.get("sessionID")
    permission = data.get("requestID", data.get("permissionID"))
    if isinstance(session, str) and isinstance(permission, str):
        return session, permission
    return None


def _tool_args(permission: Permission) -> dict[str, JsonValue]:
    """``patterns`` beside the metadata's own keys, so an edit's ``diff`` gets the inbox's
    diff preview; metadata that has a ``patterns`` key of its own stays whole beneath it."""
    patterns: list[JsonValue] = list(permission.patterns)
    if "patterns" in permission.metadata:
        return {"patterns": patterns, "metadata": permission.metadata}
    return {"patterns": patterns, **permission.metadata}


def request_body(
    permission: Permission, url: str, *, expires_in: float | None
) -> dict[str, JsonValue]:
    """The signoff request filed for ``permission`` asked by the OpenCode at ``url``."""
    context: dict[str, JsonValue] = {
        "via": "opencode",
        "url": url,
        "title": permission.title or f"{permission.kind} {' '.join(permission.patterns)}",
        "always": list(permission.always),
    }
    if permission.call_id:
        context["call_id"] = permission.call_id
    body: dict[str, JsonValue] = {
        "session_id": permission.session_id,
        "kind": "approval",
        "tool_name": permission.kind,
        "tool_args": _tool_args(permission),
        "tool_call_id": permission.id,
        "editable": False,
        "context": context,
    }
    if expires_in is not None:
        body["expires_in"] = expires_in
    return body


def reply_for(request: Request, *, use_always: bool = True) -> Reply:
    """OpenCode's answer for a settled request."""
    if request.status in ("approved", "executing", "completed"):
        record = request.decision
        decision = record.decision if record is not None else None
        if (
            isinstance(request, ApprovalRequest)
            and isinstance(decision, Approve)
            and decision.args is not None
            and decision.args != request.tool_args
        ):
            return Reply(
                "reject",
                "A person approved this call only with edited arguments, which OpenCode "
                "cannot apply, so it was not run. Their arguments: "
                + json.dumps(decision.args, ensure_ascii=False, sort_keys=True),
            )
        standing = request.grant_id is not None or (
            isinstance(decision, Approve) and decision.scope != "once"
        )
        return Reply("always" if standing and use_always else "once")
    record = request.decision
    if request.status == "rejected" and record is not None and record.by_person:
        decision = record.decision
        if decision.type == "reject" and not decision.reason.strip():
            return Reply("reject")  # a plain "no": OpenCode stops the session, as its own Reject
    if request.status in ("expired", "canceled"):
        return Reply("reject", DENIED_NO_DECISION)
    return Reply("reject", denial(request))


def _json_size(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "replace"))


class OpenCodeApi:
    """The parts of an OpenCode server's HTTP API the bridge uses."""

    def __init__(
        self,
        url: str,
        *,
        username: str = "opencode",
        password: str | None = None,
        directory: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._params = {"directory": directory} if directory else {}
        self._http = httpx.AsyncClient(
            base_url=self.url,
            auth=httpx.BasicAuth(username, password) if password else None,
            timeout=httpx.Timeout(15.0, read=90.0),
            transport=transport,
        )

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    def _check(self, response: httpx.Response, what: str) -> None:
        if response.status_code in (401, 403):
            raise OpenCodeError(
                f"OpenCode at {self.url} refused {what} ({response.status_code}): check "
                "--password / OPENCODE_SERVER_PASSWORD and --username"
            )
        response.raise_for_status()

    async def pending(self) -> list[object] | None:
        """The pending permissions' raw payloads, or None when the server cannot list them."""
        response = await self._http.get("/permission", params=self._params)
        if response.status_code == 404:
            return None
        self._check(response, "the permission list")
        data = response.json()
        return list(data) if isinstance(data, list) else None

    async def reply(self, permission: Permission, answer: Reply) -> None:
        """Answer a permission (the older per-session route when the newer one is missing)."""
        body: dict[str, Any] = {"reply": answer.reply}
        if answer.message:
            body["message"] = answer.message
        path = f"/permission/{quote(permission.id, safe='')}/reply"
        response = await self._http.post(path, json=body, params=self._params)
        if response.status_code == 404:
            path = (
                f"/session/{quote(permission.session_id, safe='')}"
                f"/permissions/{quote(permission.id, safe='')}"
            )
            response = await self._http.post(
                path, json={"response": answer.reply}, params=self._params
            )
        self._check(response, "the reply")

    @contextlib.asynccontextmanager
    async def events(self) -> AsyncIterator[AsyncIterator[tuple[str, object]]]:
        """The event stream once connected: ``(type, properties)`` pairs."""
        async with self._http.stream("GET", "/event", params=self._params) as response:
            if response.status_code == 404:
                raise OpenCodeError(f"{self.url} has no /event stream: is it `opencode serve`?")
            self._check(response, "the event stream")
            yield _sse_events(response)


async def _sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, object]]:
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            continue
        if line or not data:
            continue
        raw, data = "\n".join(data), []
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("type"), str):
            yield event["type"], event.get("properties")


@dataclass
class _Open:
    """A permission the bridge is answering."""

    permission: Permission
    task: asyncio.Task[None] | None = None
    request_id: str | None = None
    submitting: bool = False
    answering: bool = False


@dataclass
class OpenCodeBridge:
    """Files OpenCode's permissions as signoff requests and relays the decisions."""

    api: OpenCodeApi
    backend: Backend
    wait: float = 86_400.0
    """Seconds a request waits for a person before it is withdrawn and OpenCode told no."""
    use_always: bool = True
    """Answer ``always`` for standing grants (OpenCode then stops asking for what the
    permission's ``always`` patterns cover); off: every call is asked for again."""
    log: Callable[[str], None] = lambda _message: None
    _open: dict[str, _Open] = field(default_factory=dict)
    _poisoned: set[str] = field(default_factory=set)
    _background: set[asyncio.Task[None]] = field(default_factory=set)

    async def run(self) -> None:
        """Follow OpenCode until cancelled, reconnecting with backoff when it goes away."""
        pause = 0.5
        try:
            while True:
                try:
                    async with self.api.events() as events:
                        await self._catch_up()
                        pause = 0.5
                        self.log(f"following {self.api.url}")
                        async for kind, properties in events:
                            await self._on_event(kind, properties)
                    why = "closed the event stream"
                except (httpx.TransportError, httpx.HTTPStatusError, ValueError) as exc:
                    why = f"unreachable ({type(exc).__name__})"
                self.log(f"OpenCode at {self.api.url} {why}; retrying in {pause:.1f}s")
                await asyncio.sleep(pause)
                pause = min(pause * 2, _LONGEST_PAUSE)
        finally:
            await self._stop_all()

    async def _stop_all(self) -> None:
        tasks = [o.task for o in self._open.values() if o.task is not None]
        for task in tasks:
            task.cancel()
        # withdrawals and refusals under way finish: OpenCode no longer asks those, or is told no
        await asyncio.gather(*tasks, *self._background, return_exceptions=True)

    async def _catch_up(self) -> None:
        """On (re)connecting: take up pending permissions, drop those answered meanwhile."""
        raw = await self.api.pending()
        if raw is None:
            return
        listed: dict[str, object] = {}
        for item in raw:
            with contextlib.suppress(PermissionFormatError):
                listed[parse_permission(item).id] = item
        for permission_id, entry in list(self._open.items()):
            if permission_id not in listed and not entry.answering:
                self._withdraw(permission_id, "answered in OpenCode while the bridge was away")
        for item in raw:
            await self._on_asked(item)

    async def _on_event(self, kind: str, properties: object) -> None:
        if kind in ("permission.asked", "permission.updated"):
            await self._on_asked(properties)
        elif kind == "permission.replied" and (replied := _replied(properties)):
            entry = self._open.get(replied[1])
            if entry and entry.permission.session_id == replied[0] and not entry.answering:
                self._withdraw(replied[1], "answered in OpenCode")

    async def _on_asked(self, data: object) -> None:
        try:
            permission = parse_permission(data)
        except PermissionFormatError as exc:
            self._refuse_malformed(data, str(exc))
            return
        if permission.id in self._poisoned:
            self._spawn(self._send(permission, Reply("reject", "This permission id was reused.")))
            return
        entry = self._open.get(permission.id)
        if entry is not None:
            if entry.permission.session_id != permission.session_id:
                self._on_reused(permission)
            return
        entry = _Open(permission)
        self._open[permission.id] = entry
        entry.task = asyncio.create_task(self._answer(entry))

    def _on_reused(self, permission: Permission) -> None:
        """One id asked by two sessions: neither may get the other's decision, so both lose."""
        self.log(f"permission id {permission.id} reused by another session: rejected")
        self._poisoned.add(permission.id)
        self._withdraw(permission.id, "its permission id was reused by another session")
        self._spawn(self._send(permission, Reply("reject", "This permission id was reused.")))

    def _refuse_malformed(self, data: object, why: str) -> None:
        self.log(f"a permission OpenCode sent could not be read: {why}")
        permission_id = data.get("id") if isinstance(data, dict) else None
        session_id = data.get("sessionID") if isinstance(data, dict) else None
        if isinstance(permission_id, str) and _ID.fullmatch(permission_id):
            placeholder = Permission(
                id=permission_id,
                session_id=session_id if isinstance(session_id, str) else "",
                kind="",
                patterns=(),
                metadata={},
            )
            self._spawn(
                self._send(placeholder, Reply("reject", f"signoff could not read it: {why}"))
            )

    def _withdraw(self, permission_id: str, why: str) -> None:
        """Stop waiting on a permission OpenCode no longer asks, and cancel its request."""
        entry = self._open.pop(permission_id, None)
        if entry is None:
            return
        if entry.task is not None:
            entry.task.cancel()
        self._spawn(self._cancel_request(entry, why))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` beside the event stream (kept until done, awaited on stop)."""
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _cancel_request(self, entry: _Open, why: str) -> None:
        if entry.task is not None:
            await asyncio.gather(entry.task, return_exceptions=True)
        request_id = entry.request_id
        try:
            if request_id is None and entry.submitting:
                # the submit may have landed: the same session and call id find it again
                body = request_body(entry.permission, self.api.url, expires_in=self.wait)
                request_id = (await self.backend.submit(body)).request.id
            if request_id is not None:
                await self.backend.cancel(request_id, why)
                self.log(f"{request_id} canceled: {why}")
        except InvalidTransition:
            pass
        except SignoffError as exc:
            self.log(f"could not cancel the request for {entry.permission.id}: {exc}")

    async def _answer(self, entry: _Open) -> None:
        permission = entry.permission
        try:
            answer = await self._decision(entry)
        except asyncio.CancelledError:
            raise
        except SignoffError as exc:
            answer = Reply("reject", f"signoff could not take this call, so it was not run: {exc}")
        except Exception as exc:  # any failure must still answer no
            answer = Reply("reject", f"signoff failed on this call, so it was not run: {exc!r}")
        entry.answering = True
        try:
            await self._send(permission, answer)
        finally:
            if self._open.get(permission.id) is entry:
                del self._open[permission.id]

    async def _decision(self, entry: _Open) -> Reply:
        permission = entry.permission
        body = request_body(permission, self.api.url, expires_in=self.wait)
        if _json_size(body["tool_args"]) > MAX_ARGS_BYTES:
            return Reply(
                "reject",
                f"This call's details are larger than {MAX_ARGS_BYTES // 1024} KiB, too "
                "large for a person to review, so it was not run.",
            )
        entry.submitting = True
        submitted = await self.backend.submit(body)
        request = submitted.request
        entry.request_id = request.id
        if request.status == "pending":
            self.log(
                f"{request.id}: {permission.kind} in session {permission.session_id} "
                "waits for a person"
            )
            request = await wait_decided(self.backend, request.id, time.monotonic() + self.wait)
        return reply_for(request, use_always=self.use_always)

    async def _send(self, permission: Permission, answer: Reply) -> None:
        """Reply to OpenCode, retrying a few times while it is unreachable."""
        for pause in (0.5, 1.0, 2.0, 4.0, None):
            try:
                await self.api.reply(permission, answer)
                self.log(f"{permission.id}: replied {answer.reply}")
                return
            except (httpx.TransportError, httpx.HTTPStatusError) as exc:
                if pause is None:
                    self.log(
                        f"{permission.id}: could not reply ({type(exc).__name__}); "
                        "it is taken up again on reconnect"
                    )
                    return
                await asyncio.sleep(pause)
