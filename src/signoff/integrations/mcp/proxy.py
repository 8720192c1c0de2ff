"""An approval gateway in front of any MCP server: ``signoff mcp-proxy -- COMMAND ARGS...``.

:class:`McpProxy` starts the wrapped stdio MCP server as a child (:class:`Upstream`) and
serves its tools, resources and prompts to the client unchanged, with one tool added,
``signoff_await``. Each ``tools/call`` is checked first:

- tools.toml rules and ``need_approval`` globs decide when they name the call;
- otherwise the wrapped server's own annotations are the default (``readOnlyHint`` runs,
  ``destructiveHint`` asks), never over an explicit rule, and ignored with
  ``trust_hints=False``;
- otherwise the file's ``default``, or the built-in fail-closed ``ask``.

A call that asks becomes a signoff approval request (tool name and arguments as sent).
It is forwarded only once a person approved it and the proxy claimed it, with the
approved arguments (edited ones if the person edited them; the model is told). A
rejection comes back as a tool error carrying the reason; nothing is forwarded.

The call is held for at most ``hold`` seconds (see :mod:`signoff.integrations.mcp.holding`).
Meanwhile the MCP client may be asked too, in one of two ways:

- URL mode (the default, for a client that declares it, when the proxy knows the inbox's
  address ``page_base``): the client shows its person a link to the request's page in
  signoff's web inbox (``?via=mcp-url``), where they sign in and decide as any inbox
  decision, recorded ``via="mcp-url"``. The request's context records
  ``"elicitation": "mcp-url"``; once it is decided (anywhere) the client
  gets the elicitation-complete notification. A client whose person declines the link has
  the call rejected: the proxy withdraws the request, reason :data:`DECLINED`.
- Form mode (only with an ``approver``, which the operator turns on): the client answers
  approve / reject itself, as ``approver``. Such an answer is recorded
  ``via="mcp-elicitation"`` with the client's self-reported name: whoever controls the MCP
  client (its host app, and so possibly the model's own harness) can give it, so it is on
  the record as exactly that, not as the person's inbox.

Whichever of the inbox and the client answers first wins. On the 2025 protocol the question
goes to the client mid-call; on 2026-07-28 the call returns ``input_required`` at once and
the client's retry carries the answer (that protocol has no elicitation-complete
notification).

If the child exits, the call in flight gets a clear error (a claimed call is reported
failed and never run again) and the child is started again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import re
import secrets
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, TypeVar
from urllib.parse import quote

from pydantic import JsonValue

from signoff.integrations.mcp.holding import (
    AWAIT_TOOL,
    HOLD_SECONDS,
    await_tool,
    clamp_hold,
    held_request_id,
    text_result,
    waiting_result,
)

try:
    import anyio
    import mcp_types as types
    from mcp import Client, StdioServerParameters
    from mcp.server import Server
    from mcp.server.context import ServerRequestContext
    from mcp.shared.exceptions import MCPError
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("signoff mcp-proxy needs the MCP SDK: pip install 'signoff[mcp]'") from exc

from signoff.__version__ import __version__
from signoff.backends import Backend
from signoff.domain.decisions import Approve, Reject
from signoff.domain.policies import Policy, PolicyDecision
from signoff.domain.requests import ApprovalRequest, Request
from signoff.domain.schemas import sendable_schema
from signoff.domain.submission import NewRequest
from signoff.domain.transitions import MAX_CLIENT_NAME
from signoff.errors import (
    CallerError,
    InvalidTransition,
    NotAllowed,
    RequestNotFound,
    UpstreamDown,
)
from signoff.integrations.outcomes import denial, edit_note
from signoff.leases import holding

__all__ = ["DECLINED", "HintedPolicy", "McpProxy", "Upstream", "UpstreamDown"]

_T = TypeVar("_T")

AskMode = Literal["url", "form"]
"""How the MCP client is asked: a link to the request's page, or a form it answers itself."""

DECLINED = "declined by the MCP client's user"
"""The reason a request is withdrawn with when the client's person declines the link."""

URL_ELICITATION = "mcp-url"
"""The request's ``context["elicitation"]`` when the client is sent to the request's page."""

_TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
"""A tool name as MCP defines them; the client's prompt repeats no other name."""

ELICIT_KEY = "signoff_approval"
"""The key of the approve / reject question in a 2026-07-28 ``input_required`` result."""

_ELICIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve",
            "description": "Run this call (true) or reject it (false).",
        },
        "reason": {
            "type": "string",
            "title": "Reason",
            "description": "If you reject: why (the agent is told).",
        },
    },
    "required": ["approve"],
}


class HintedPolicy(Policy):
    """tools.toml, with the wrapped server's tool annotations as the default.

    A rule or ``need_approval`` glob always wins. For a tool no rule names,
    ``readOnlyHint`` allows and ``destructiveHint`` asks; then the file's ``default`` and
    the fail-closed fallback apply. The same object is the service's policy in process, so
    the verdict the proxy acts on is the one the service records.
    """

    def __init__(self, base: Policy, *, trust_hints: bool = True) -> None:
        super().__init__(base.files)
        self.trust_hints = trust_hints
        self.hints: dict[str, types.ToolAnnotations | None] = {}
        """Tool name -> the annotations the wrapped server lists for it (None: it lists none)."""

    def evaluate(self, tool_name: str, args: Mapping[str, object]) -> PolicyDecision:
        """The verdict on calling ``tool_name`` with ``args``."""
        explicit = self.explicit(tool_name, args)
        if explicit is not None:
            return explicit
        hints = self.hints.get(tool_name) if self.trust_hints else None
        if hints is not None and hints.destructive_hint is True:
            return self._hinted("ask", "destructiveHint")
        if hints is not None and hints.read_only_hint is True:
            return self._hinted("allow", "readOnlyHint")
        return self.fallback()

    def _hinted(self, verdict: Any, hint: str) -> PolicyDecision:
        return PolicyDecision(
            verdict=verdict,
            source="the MCP server's tool annotations",
            rule=f"{hint} (no rule names this tool)",
            governance=self.governance(),
        )


class Upstream:
    """The wrapped MCP server: a child process on stdio, started again whenever it exits."""

    def __init__(self, params: StdioServerParameters, *, start_timeout: float = 30.0) -> None:
        self.params = params
        self.start_timeout = start_timeout
        self.starts = 0
        """How many times the child has been started (restarts are ``starts - 1``)."""
        self.capabilities: types.ServerCapabilities | None = None
        self._client: Client | None = None
        self._ready = asyncio.Event()
        self._broken = asyncio.Event()
        self._first_done = asyncio.Event()
        self._first_error: UpstreamDown | None = None

    async def run(self) -> None:
        """Keep the child running until cancelled; the first start's error is raised."""
        backoff = 0.2
        while True:
            try:
                async with Client(self.params, mode="auto", cache=None) as client:
                    self._client = client
                    self.capabilities = client.server_capabilities
                    self.starts += 1
                    backoff = 0.2
                    self._broken.clear()
                    self._ready.set()
                    self._first_done.set()
                    await self._broken.wait()
            except Exception as exc:
                if not self._first_done.is_set():
                    self._first_error = UpstreamDown(_describe(exc))
                    self._first_done.set()
                    return
                print(f"signoff mcp-proxy: wrapped server: {_describe(exc)}", file=sys.stderr)
            finally:
                self._ready.clear()
                self._client = None
            print("signoff mcp-proxy: starting the wrapped server again", file=sys.stderr)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    async def started(self) -> None:
        """Wait for the first start; UpstreamDown if it failed."""
        await self._first_done.wait()
        if self._first_error is not None:
            raise self._first_error

    async def call(self, operation: Callable[[Client], Awaitable[_T]]) -> _T:
        """Run ``operation`` on the child; UpstreamDown (and a restart) if it goes away."""
        try:
            async with asyncio.timeout(self.start_timeout):  # (not wait_for: bus/postgres.py)
                await self._ready.wait()
        except TimeoutError:
            raise UpstreamDown(
                "the wrapped MCP server is not running; starting it failed"
            ) from None
        client = self._client
        assert client is not None
        try:
            return await operation(client)
        except MCPError as exc:
            if exc.code != types.CONNECTION_CLOSED:
                raise
            self._restart(client)
            raise UpstreamDown(
                "the wrapped MCP server exited during the call; signoff is starting it again"
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            self._restart(client)
            raise UpstreamDown(
                "the wrapped MCP server is gone; signoff is starting it again"
            ) from None

    def _restart(self, client: Client) -> None:
        if self._client is client:
            self._ready.clear()
            self._broken.set()


class McpProxy:
    """The MCP server the client talks to: the child's tools, gated by signoff."""

    def __init__(
        self,
        upstream: Upstream,
        backend: Backend,
        policy: HintedPolicy,
        *,
        session_id: str,
        approver: Backend | None = None,
        page_base: str | None = None,
        hold: float = HOLD_SECONDS,
        server_name: str = "signoff-mcp-proxy",
    ) -> None:
        self.upstream = upstream
        self.backend = backend
        self.policy = policy
        self.session_id = session_id
        self.approver = approver
        """Who decides when the client answers a form itself (None: no form elicitation);
        those decisions are recorded ``via="mcp-elicitation"`` with the client's name."""
        self.page_base = page_base.rstrip("/") if page_base else None
        """The web inbox's address as the person's browser reaches it (None: no URL
        elicitation); a request's page is ``{page_base}/requests/{id}?via=mcp-url``."""
        self.hold = clamp_hold(hold)
        self.server_name = server_name
        self._seal_key = secrets.token_bytes(32)
        self._schemas: dict[str, dict[str, JsonValue] | None] = {}
        """Each upstream tool's inputSchema as listed, sent with its requests."""

    def server(self) -> Server[Any]:
        """The lowlevel MCP server to serve; what the child offers, plus ``signoff_await``."""
        caps = self.upstream.capabilities or types.ServerCapabilities()
        handlers: dict[str, Any] = {
            "on_list_tools": self._list_tools,
            "on_call_tool": self._call_tool,
        }
        if caps.resources is not None:
            handlers["on_list_resources"] = self._list_resources
            handlers["on_list_resource_templates"] = self._list_resource_templates
            handlers["on_read_resource"] = self._read_resource
        if caps.prompts is not None:
            handlers["on_list_prompts"] = self._list_prompts
            handlers["on_get_prompt"] = self._get_prompt
        return Server(
            self.server_name,
            version=__version__,
            instructions=(
                "Some tool calls wait for a person's approval in signoff. A call that is "
                f"still waiting returns a request id: call {AWAIT_TOOL} with it to wait again."
            ),
            **handlers,
        )

    # forwarding what needs no approval

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        cursor = params.cursor if params is not None else None
        listed = await self._forward(lambda c: c.list_tools(cursor=cursor))
        for tool in listed.tools:
            self.policy.hints[tool.name] = tool.annotations
            self._schemas[tool.name] = sendable_schema(tool.input_schema)
        tools = [t for t in listed.tools if t.name != AWAIT_TOOL]
        if cursor is None:
            tools.append(await_tool())
        return types.ListToolsResult(tools=tools, next_cursor=listed.next_cursor)

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        cursor = params.cursor if params is not None else None
        return await self._forward(lambda c: c.list_resources(cursor=cursor))

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        cursor = params.cursor if params is not None else None
        return await self._forward(lambda c: c.list_resource_templates(cursor=cursor))

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await self._forward(lambda c: c.read_resource(params.uri))

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        cursor = params.cursor if params is not None else None
        return await self._forward(lambda c: c.list_prompts(cursor=cursor))

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        return await self._forward(lambda c: c.get_prompt(params.name, params.arguments))

    async def _forward(self, operation: Callable[[Client], Awaitable[_T]]) -> _T:
        try:
            return await self.upstream.call(operation)
        except UpstreamDown as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from None

    # tool calls

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        args: dict[str, Any] = dict(params.arguments or {})
        try:
            if params.request_state is not None:
                return await self._answered(ctx, params, args)
            if params.name == AWAIT_TOOL:
                request = await self.backend.get(held_request_id(args))
                return await self._settle(ctx, _approval(request))
            if params.name not in self.policy.hints:
                await self._refresh_hints()
            verdict = self.policy.evaluate(params.name, args)
            if verdict.verdict == "allow":
                return await self.upstream.call(lambda c: c.call_tool(params.name, args))
            if verdict.verdict == "deny":
                return text_result(
                    f"The call was denied by policy and not run ({verdict.explain()}).",
                    error=True,
                )
            submitted = await self.backend.submit(
                NewRequest(
                    session_id=self.session_id,
                    kind="approval",
                    tool_name=params.name,
                    tool_args=args,
                    args_schema=self._schemas.get(params.name),
                    context=self._context(ctx),
                )
            )
            return await self._settle(ctx, _approval(submitted.request))
        except UpstreamDown as exc:
            return text_result(f"The call could not be made: {exc}.", error=True)
        except CallerError as exc:
            return text_result(exc.message, error=True)

    def _context(self, ctx: ServerRequestContext[Any]) -> dict[str, JsonValue]:
        """The request's context: the proxy, the wrapped server, and the link sent, if any."""
        context: dict[str, JsonValue] = {"via": "mcp-proxy", "server": self.server_label()}
        if self._ask_mode(ctx) == "url":
            context["elicitation"] = URL_ELICITATION
        return context

    def page_url(self, request: Request) -> str:
        """The request's page in the web inbox: built from ``page_base`` and its id only;
        a decision made there is recorded ``via="mcp-url"``."""
        assert self.page_base is not None
        return f"{self.page_base}/requests/{quote(request.id, safe='')}?via={URL_ELICITATION}"

    def server_label(self) -> str:
        """The wrapped server's command line, for the reviewer."""
        return " ".join([self.upstream.params.command, *self.upstream.params.args])[:500]

    async def _refresh_hints(self) -> None:
        with contextlib.suppress(UpstreamDown, MCPError):
            cursor: str | None = None
            for _ in range(100):

                def page(client: Client, at: str | None = cursor) -> Awaitable[Any]:
                    return client.list_tools(cursor=at)

                listed: types.ListToolsResult = await self.upstream.call(page)
                for tool in listed.tools:
                    self.policy.hints[tool.name] = tool.annotations
                    self._schemas[tool.name] = sendable_schema(tool.input_schema)
                cursor = listed.next_cursor
                if cursor is None:
                    break

    async def _settle(
        self, ctx: ServerRequestContext[Any], request: ApprovalRequest
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Hold a pending request (asking the client too, where it can be asked), then act."""
        mode = self._ask_mode(ctx) if request.status == "pending" else None
        if mode is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return types.InputRequiredResult(
                input_requests={ELICIT_KEY: self._elicit_request(request, mode, modern=True)},
                request_state=self._seal(request.id),
            )
        if mode == "form":
            request = await self._race_elicitation(ctx, request)
        elif mode == "url":
            raced = await self._race_link(ctx, request)
            if raced is None:
                return await self._declined(request)
            request = raced
        elif request.status == "pending":
            request = _approval(await self.backend.wait(request.id, self.hold))
        return await self._outcome(request)

    async def _answered(
        self,
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        args: dict[str, Any],
    ) -> types.CallToolResult:
        """The client's retry carrying its answer to the approve / reject question."""
        request_id = self._unseal(params.request_state or "")
        request = _approval(await self.backend.get(request_id))
        bound = (
            held_request_id(args) == request.id
            if params.name == AWAIT_TOOL
            else (params.name == request.tool_name and args == request.tool_args)
        )
        if not bound:
            raise MCPError(types.INVALID_PARAMS, "requestState belongs to another call")
        answer = (params.input_responses or {}).get(ELICIT_KEY)
        mode = self._ask_mode(ctx)
        if request.status == "pending" and isinstance(answer, types.ElicitResult):
            if mode == "form":
                request = await self._apply(request, answer, _client_name(ctx))
            elif mode == "url" and answer.action == "decline":
                return await self._declined(request)
        if request.status == "pending":
            request = _approval(await self.backend.wait(request.id, self.hold))
        return await self._outcome(request)

    def _ask_mode(self, ctx: ServerRequestContext[Any]) -> AskMode | None:
        """How this client is asked: a form only where the operator allowed it, else a link."""
        caps = ctx.session.client_capabilities
        elicitation = caps.elicitation if caps is not None else None
        if elicitation is None:
            return None
        # an empty elicitation capability is the 2025-06-18 form of "form mode"
        if self.approver is not None and (elicitation.form is not None or elicitation.url is None):
            return "form"
        if self.page_base is not None and elicitation.url is not None:
            return "url"
        return None

    def _elicit_request(
        self, request: ApprovalRequest, mode: AskMode, *, modern: bool
    ) -> types.ElicitRequest:
        if mode == "form":
            return _form_request(request)
        return types.ElicitRequest(
            params=types.ElicitRequestURLParams(
                message=self._link_message(request),
                url=self.page_url(request),
                # 2026-07-28 has no elicitation ids (and no completion notification)
                elicitation_id=None if modern else f"{request.id}.{secrets.token_hex(8)}",
            )
        )

    def _link_message(self, request: ApprovalRequest) -> str:
        """The client's prompt for the link: what waits, and where to decide it.

        The tool is named only when the wrapped server lists it under a well-formed name: a
        model can call any name, and the prompt must not carry its text (a link, markup).
        """
        name = request.tool_name
        known = name in self.policy.hints and _TOOL_NAME.fullmatch(name) is not None
        return (
            f"The call to {name if known else 'a tool'} waits for a person's approval in "
            f"signoff (request {request.id}). Open the link to review it, sign in and approve "
            "or reject it there."
        )

    async def _race_elicitation(
        self, ctx: ServerRequestContext[Any], request: ApprovalRequest
    ) -> ApprovalRequest:
        """2025 protocol: ask the client mid-call while waiting; the first answer wins."""
        message = _form_request(request).params
        assert isinstance(message, types.ElicitRequestFormParams)
        asked = asyncio.create_task(
            ctx.session.elicit_form(
                message.message, message.requested_schema, related_request_id=ctx.request_id
            )
        )
        waited = asyncio.create_task(self.backend.wait(request.id, self.hold))
        try:
            done, _ = await asyncio.wait({asked, waited}, return_when=asyncio.FIRST_COMPLETED)
            if waited in done:
                return _approval(waited.result())
            try:
                answer = asked.result()
            except Exception as exc:  # the client could not ask: the inbox still can
                print(f"signoff mcp-proxy: elicitation failed: {exc}", file=sys.stderr)
            else:
                request = await self._apply(request, answer, _client_name(ctx))
                if request.status != "pending":
                    return request
            return _approval(await waited)
        finally:
            await _cancelled(asked, waited)

    async def _race_link(
        self, ctx: ServerRequestContext[Any], request: ApprovalRequest
    ) -> ApprovalRequest | None:
        """2025 protocol: send the client the request's page while waiting for a decision.

        None when the client's person declined the link. Once the request is decided, the
        client is told the elicitation is complete.
        """
        link = self._elicit_request(request, "url", modern=False).params
        assert isinstance(link, types.ElicitRequestURLParams) and link.elicitation_id
        elicitation_id = link.elicitation_id
        asked = asyncio.create_task(
            ctx.session.elicit_url(
                link.message, link.url, elicitation_id, related_request_id=ctx.request_id
            )
        )
        waited = asyncio.create_task(self.backend.wait(request.id, self.hold))
        try:
            done, _ = await asyncio.wait({asked, waited}, return_when=asyncio.FIRST_COMPLETED)
            if asked in done:
                try:
                    answer = asked.result()
                except Exception as exc:  # the client could not show it: the inbox still can
                    print(f"signoff mcp-proxy: elicitation failed: {exc}", file=sys.stderr)
                else:
                    if answer.action == "decline":
                        return None
            request = _approval(await waited)
        finally:
            await _cancelled(asked, waited)
        if request.status != "pending":
            try:
                await ctx.session.send_elicit_complete(
                    elicitation_id, related_request_id=ctx.request_id
                )
            except Exception as exc:  # the decision stands; the client retries on its own
                print(f"signoff mcp-proxy: elicitation complete: {exc}", file=sys.stderr)
        return request

    async def _declined(self, request: ApprovalRequest) -> types.CallToolResult:
        """The client's person declined the link: withdraw the request, reject the call."""
        try:
            await self.backend.cancel(request.id, DECLINED)
        except InvalidTransition:  # decided meanwhile: that decision stands
            return await self._outcome(_approval(await self.backend.get(request.id)))
        return text_result(
            f"The call to {request.tool_name} was rejected: {DECLINED}. It was not run.",
            error=True,
        )

    async def _apply(
        self, request: ApprovalRequest, answer: types.ElicitResult, client: str | None
    ) -> ApprovalRequest:
        """Decide as the approver from the client's answer, recorded as made in ``client``.

        The earlier decision stands.
        """
        assert self.approver is not None
        content = answer.content or {}
        if answer.action == "cancel":
            return request
        reason = str(content.get("reason") or "").strip()
        if answer.action == "accept" and content.get("approve") is True:
            decision: Approve | Reject = Approve(comment="approved in the MCP client")
        else:
            decision = Reject(reason=reason or "declined in the MCP client")
        try:
            decided = await self.approver.decide(
                request.id, decision, via="mcp-elicitation", client=client
            )
            return _approval(decided)
        except (InvalidTransition, NotAllowed) as exc:
            print(f"signoff mcp-proxy: {request.id}: {exc.message}", file=sys.stderr)
            return _approval(await self.backend.get(request.id))

    async def _outcome(self, request: ApprovalRequest) -> types.CallToolResult:
        """What the client gets for a request in its current state."""
        if request.status == "pending":
            return waiting_result(request, f"The call to {request.tool_name}", error=True)
        if request.status == "approved":
            return await self._run_approved(request)
        if request.status == "executing":
            return text_result(
                f"The call to {request.tool_name} was approved and is already running "
                "elsewhere; it is not run again.",
                error=True,
            )
        if request.status in ("completed", "failed") and request.result is not None:
            return _recorded(request)
        return text_result(denial(request), error=True)

    async def _run_approved(self, request: ApprovalRequest) -> types.CallToolResult:
        args = dict(request.approved_args or request.tool_args)
        try:
            await self.backend.claim(request.id, args)
        except InvalidTransition:  # another caller claimed it first: theirs to run
            return await self._outcome(_approval(await self.backend.get(request.id)))
        try:
            async with holding(self.backend, [request.id]):
                result = await self.upstream.call(lambda c: c.call_tool(request.tool_name, args))
        except (UpstreamDown, MCPError) as exc:
            error = str(exc)
            await self.backend.fail(request.id, f"{error} (not run again)")
            return text_result(
                f"The approved call failed: {error}. It is not run again.", error=True
            )
        except BaseException:
            with contextlib.suppress(Exception):
                await self.backend.fail(request.id, "the proxy stopped during the call")
            raise
        dumped: JsonValue = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        if result.is_error:
            await self.backend.fail(request.id, _text_of(result) or "the tool reported an error")
        else:
            await self.backend.complete(request.id, dumped)
        if args != request.tool_args:
            note = types.TextContent(type="text", text=edit_note(args, request.tool_args))
            result = result.model_copy(update={"content": [*result.content, note]})
        return result

    def _seal(self, request_id: str) -> str:
        mac = hmac.new(self._seal_key, request_id.encode(), hashlib.sha256).hexdigest()
        return f"{request_id}.{mac}"

    def _unseal(self, state: str) -> str:
        request_id, _, mac = state.rpartition(".")
        expected = hmac.new(self._seal_key, request_id.encode(), hashlib.sha256).hexdigest()
        if not request_id or not hmac.compare_digest(mac, expected):
            raise MCPError(
                types.INVALID_PARAMS,
                "requestState is not one this proxy issued (was it restarted?); call the tool "
                f"again, or {AWAIT_TOOL} with the request id",
            )
        return request_id


def _client_name(ctx: ServerRequestContext[Any]) -> str | None:
    """The MCP client's name from its handshake (or the request envelope), if it gave one."""
    params = ctx.session.client_params
    name = params.client_info.name.strip() if params is not None else ""
    return name[:MAX_CLIENT_NAME] or None


def _approval(request: Request) -> ApprovalRequest:
    if not isinstance(request, ApprovalRequest):
        raise RequestNotFound(f"{request.id} is not a tool call this proxy sent for approval")
    return request


async def _cancelled(*tasks: asyncio.Task[Any]) -> None:
    """Cancel whichever of ``tasks`` is still running, and let it finish."""
    for task in tasks:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _form_request(request: ApprovalRequest) -> types.ElicitRequest:
    shown = json.dumps(request.tool_args, ensure_ascii=False, sort_keys=True)
    if len(shown) > 2000:
        shown = shown[:2000] + " ... (truncated)"
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=(
                f"Approve the call {request.tool_name}({shown})? It is signoff request "
                f"{request.id}; it can also be decided in the signoff inbox."
            ),
            requested_schema=_ELICIT_SCHEMA,
        )
    )


def _text_of(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def _recorded(request: ApprovalRequest) -> types.CallToolResult:
    """A call that already ran: what it returned then (it is not run again)."""
    assert request.result is not None
    if request.result.ok and isinstance(request.result.result, dict):
        with contextlib.suppress(ValueError):
            return types.CallToolResult.model_validate(request.result.result)
    if request.result.ok:
        return text_result(json.dumps(request.result.result, ensure_ascii=False))
    return text_result(f"The approved call failed: {request.result.error}", error=True)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
