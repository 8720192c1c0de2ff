"""pydantic-ai agents ask signoff before gated tools run: inner loop, blocking gate, queue.

One capability, :class:`SignoffGate`, decides per call from policy (tools.toml; tools
declared ``requires_approval=True`` are always gated) and then, by ``mode``:

- ``defer`` (the inner loop, S1): the call is deferred; :func:`resolve_deferred` turns each
  deferred approval into a signoff request, waits until all are decided and builds the
  ``DeferredToolResults`` (through ``build_results``); :func:`run_with_signoff` is the
  whole ``while`` loop. On the approved re-run the gate claims each call with the very
  arguments about to run, then reports the result.
- ``block`` (S5 "before"): the tool submits, waits, and runs only once approved.
- ``queue`` (S5): the tool submits and returns ``[PENDING:<id>] ...`` at once; an
  executor (``signoff.executor``) runs approved calls later.

Fail closed throughout: a call the gate did not see approved does not run, edited
arguments that do not fit the tool's schema never reach pydantic-ai, results are never
resumed with a call missing, and an id that is not pending is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pydantic import JsonValue

from signoff.backends import Backend, as_backend
from signoff.domain.policies import Policy, PolicyDecision
from signoff.domain.principals import Principal
from signoff.domain.requests import ApprovalRequest, ChoiceRequest, QuestionsRequest, Request
from signoff.domain.schemas import sendable_schema
from signoff.errors import InvalidRequest, NotAllowed, SignoffError
from signoff.executor import ToolRegistry
from signoff.integrations.outcomes import (
    choice_result,
    denial,
    edit_note,
    questions_result,
    wait_decided,
)
from signoff.integrations.pydantic_ai.human import asks_a_person
from signoff.leases import holding
from signoff.service import Service

if TYPE_CHECKING:
    from signoff.client import Client

try:
    from pydantic_ai import (
        Agent,
        ApprovalRequired,
        DeferredToolRequests,
        DeferredToolResults,
        FunctionToolset,
        RunContext,
        ToolApproved,
        ToolDenied,
    )
    from pydantic_ai.agent import AgentRunResult
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart
    from pydantic_ai.messages import ToolReturnPart as _ToolReturnPart
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset
    from pydantic_core import SchemaValidator, ValidationError, to_jsonable_python
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "signoff's pydantic-ai integration needs its extra: pip install 'signoff[pydantic-ai]'"
    ) from exc

__all__ = [
    "META_KEY",
    "GateMode",
    "SignoffGate",
    "checked_results",
    "decided_results",
    "edit_problem",
    "file_deferred",
    "queue_status_toolset",
    "registry_from_agent",
    "resolve_deferred",
    "run_with_signoff",
    "tool_schemas",
]

META_KEY = "signoff"
"""Key under which signoff keeps its data in a deferred call's metadata."""

_CUT_OFF = "the run was cancelled during the call; whether it finished is unknown"

GateMode: TypeAlias = Literal["defer", "block", "queue"]
Target: TypeAlias = "Service | Backend | Client"
"""An in-process service (with the principal the agent acts as) or a client of a server."""


def _backend(signoff: Target, principal: Principal | None) -> Backend:
    return as_backend(signoff, principal or Principal(name="pydantic-ai-agent", role="agent"))


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _with_note(result: object, note: str) -> str:
    """A tool's result as text, with ``note`` appended for the model."""
    text = result if isinstance(result, str) else _json(to_jsonable_python(result))
    return f"{text}\n\n{note}"


def _validators(agent: Any) -> dict[str, SchemaValidator]:
    """Each function tool's argument validator, by tool name."""
    found: dict[str, SchemaValidator] = {}

    def visit(toolset: AbstractToolset[Any]) -> None:
        if isinstance(toolset, FunctionToolset):
            for name, tool in toolset.tools.items():
                found.setdefault(name, tool.function_schema.validator)

    for toolset in getattr(agent, "toolsets", ()):
        toolset.apply(visit)
    return found


def tool_schemas(agent: Any) -> dict[str, dict[str, JsonValue]]:
    """Each function tool's argument JSON Schema that signoff takes, by tool name."""
    found: dict[str, dict[str, JsonValue]] = {}

    def visit(toolset: AbstractToolset[Any]) -> None:
        if isinstance(toolset, FunctionToolset):
            for name, tool in toolset.tools.items():
                schema = sendable_schema(tool.function_schema.json_schema)
                if schema is not None:
                    found.setdefault(name, schema)

    for toolset in getattr(agent, "toolsets", ()):
        toolset.apply(visit)
    return found


def edit_problem(agent: Any, tool_name: str, args: Mapping[str, Any]) -> str | None:
    """Why edited ``args`` do not fit the tool's schema, or None when they do.

    pydantic-ai does not reject bad ``override_args``: it hands them to the model as a
    retry. So edits are checked here, and a tool whose schema is unknown takes no edits.
    """
    validator = _validators(agent).get(tool_name)
    if validator is None:
        return f"the schema of {tool_name!r} is unknown, so edited arguments cannot be checked"
    try:
        validator.validate_python(dict(args))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"{where}: {first.get('msg', 'invalid')}" if where else str(first.get("msg"))
    return None


def checked_results(deferred: DeferredToolRequests, results: DeferredToolResults) -> None:
    """Refuse results that would skip or smuggle a call: raise InvalidRequest.

    Every pending approval must be answered under ``approvals``, every pending external
    call under ``calls``, and no id may be anything but pending (an approval's id under
    ``calls`` would skip the approval in pydantic-ai).
    """
    approval_ids = {c.tool_call_id for c in deferred.approvals}
    call_ids = {c.tool_call_id for c in deferred.calls}
    smuggled = sorted(set(results.calls) & approval_ids)
    if smuggled:
        raise InvalidRequest(f"a result under calls for approval {smuggled[0]!r} is refused")
    unknown = sorted((set(results.calls) | set(results.approvals)) - approval_ids - call_ids)
    if unknown:
        raise InvalidRequest(f"{unknown[0]!r} is not a pending tool call")
    if wrong := sorted(set(results.approvals) & call_ids):
        raise InvalidRequest(f"{wrong[0]!r} is an external call, not an approval")
    missing = sorted((approval_ids - set(results.approvals)) | (call_ids - set(results.calls)))
    if missing:
        raise InvalidRequest(f"no result for pending call {missing[0]!r}; refusing to resume")


def _already_ran(messages: Sequence[ModelMessage]) -> list[str]:
    """Calls of the model's last turn that already ran (ungated siblings run before a pause)."""
    last = next((m for m in reversed(messages) if isinstance(m, ModelResponse)), None)
    if last is None:
        return []
    names = {p.tool_call_id: p.tool_name for p in last.parts if isinstance(p, ToolCallPart)}
    after = messages[messages.index(last) + 1 :]
    returned = [
        p.tool_call_id
        for m in after
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, _ToolReturnPart) and p.tool_call_id in names
    ]
    return [f"{names[i]} ({i})" for i in returned]


async def _outcome(
    call: ToolCallPart, request: Request, backend: Backend, agent: Any
) -> tuple[bool | ToolApproved | ToolDenied, dict[str, Any] | None]:
    """The pydantic-ai approval result for one decided request, and metadata for the re-run."""
    if not isinstance(request, ApprovalRequest):
        raise InvalidRequest(f"{request.id} is not an approval request")
    if request.status != "approved":
        if request.status in ("executing", "completed", "failed"):
            # claimed before (a crash after the claim, or another process): never twice
            return ToolDenied(f"This call was already {request.status}; it is not run again."), None
        return ToolDenied(denial(request)), None
    original = call.args_as_dict()
    approved = dict(request.approved_args or original)
    meta: dict[str, Any] = {"request_id": request.id, "args": approved}
    if approved == original:
        return ToolApproved(), {META_KEY: meta}
    problem = edit_problem(agent, call.tool_name, approved)
    if problem is not None:
        await backend.claim(request.id, approved)
        await backend.fail(request.id, f"edited arguments refused before running: {problem}")
        return ToolDenied(
            f"A person approved this call with edited arguments the tool does not accept "
            f"({problem}); it was not run."
        ), None
    meta["note"] = edit_note(approved, original)
    return ToolApproved(override_args=approved), {META_KEY: meta}


async def file_deferred(
    deferred: DeferredToolRequests,
    backend: Backend,
    *,
    session_id: str,
    messages: Sequence[ModelMessage] = (),
    file_denied: bool = False,
    agent: Any = None,
) -> tuple[dict[str, ToolDenied], list[tuple[ToolCallPart, str]]]:
    """File a request for every deferred approval: denials decided already, and (call, id).

    Each request carries the tool name, the arguments, the model's tool_call_id (so filing
    again after a restart finds the same request), the call's metadata, which sibling
    calls already ran and, given the ``agent``, the tool's argument schema (a person's
    edit must fit it). Calls the gate's policy denied are denied without a request, unless
    ``file_denied`` (then the service's own policy rejects them, on the record).
    External calls are not signoff's to answer: they are refused, not resumed empty.
    """
    if deferred.calls:
        names = ", ".join(sorted(c.tool_name for c in deferred.calls))
        raise InvalidRequest(f"external deferred calls need results from elsewhere: {names}")
    ran = _already_ran(messages)
    schemas = tool_schemas(agent) if agent is not None else {}
    denied: dict[str, ToolDenied] = {}
    asked: list[tuple[ToolCallPart, str]] = []
    for call in deferred.approvals:
        call_meta = deferred.metadata.get(call.tool_call_id) or {}
        ours = call_meta.get(META_KEY) if isinstance(call_meta, dict) else None
        if not file_denied and isinstance(ours, dict) and ours.get("verdict") == "deny":
            denied[call.tool_call_id] = ToolDenied(
                f"The call was denied by policy and not run ({ours.get('policy', '')})."
            )
            continue
        context: dict[str, JsonValue] = {"already_ran": list(ran)}
        if call_meta:
            context["metadata"] = to_jsonable_python(call_meta, fallback=str)
        body: dict[str, Any] = {
            "session_id": session_id,
            "kind": "approval",
            "tool_name": call.tool_name,
            "tool_args": call.args_as_dict(),
            "tool_call_id": call.tool_call_id,
            "context": context,
        }
        if call.tool_name in schemas:
            body["args_schema"] = schemas[call.tool_name]
        submitted = await backend.submit(body)
        asked.append((call, submitted.request.id))
    return denied, asked


async def decided_results(
    deferred: DeferredToolRequests,
    decided: Sequence[tuple[ToolCallPart, Request]],
    backend: Backend,
    *,
    agent: Any = None,
    denied: Mapping[str, ToolDenied] | None = None,
) -> DeferredToolResults:
    """The checked results for a pause once every one of its requests is decided.

    An approval's call gets the approval (or the denial); a deferred human call's (a choice
    or questions request, see ``human.deferred_human_toolset``) gets what the person chose
    or answered, as ``human_toolset`` would have returned it.
    """
    approvals: dict[str, bool | ToolApproved | ToolDenied] = dict(denied or {})
    calls: dict[str, Any] = {}
    metadata: dict[str, dict[str, Any]] = {}
    for call, request in decided:
        if request.status == "pending":
            raise InvalidRequest(f"{request.id} is still pending; refusing to resume")
        if isinstance(request, ChoiceRequest):
            calls[call.tool_call_id] = choice_result(request)
            continue
        if isinstance(request, QuestionsRequest):
            calls[call.tool_call_id] = questions_result(request)
            continue
        result, meta = await _outcome(call, request, backend, agent)
        approvals[call.tool_call_id] = result
        if meta is not None:
            metadata[call.tool_call_id] = meta
    results = deferred.build_results(approvals=approvals, calls=calls, metadata=metadata)
    checked_results(deferred, results)
    return results


async def resolve_deferred(
    deferred: DeferredToolRequests,
    signoff: Target,
    *,
    session_id: str,
    principal: Principal | None = None,
    agent: Any = None,
    timeout: float = 300.0,
    messages: Sequence[ModelMessage] = (),
    on_submitted: Callable[[list[str]], Awaitable[None]] | None = None,
) -> DeferredToolResults:
    """Ask signoff about every deferred approval, wait for all, and build the results.

    Requests are filed by :func:`file_deferred`; ``on_submitted`` gets their ids before
    the wait. A call still undecided at ``timeout`` is withdrawn and denied.
    """
    backend = _backend(signoff, principal)
    denied, asked = await file_deferred(
        deferred, backend, session_id=session_id, messages=messages, agent=agent
    )
    if on_submitted is not None:
        await on_submitted([rid for _, rid in asked])
    deadline = time.monotonic() + timeout
    decided = await asyncio.gather(*(wait_decided(backend, rid, deadline) for _, rid in asked))
    pairs = [(call, request) for (call, _), request in zip(asked, decided, strict=True)]
    return await decided_results(deferred, pairs, backend, agent=agent, denied=denied)


@dataclass(init=False)
class SignoffGate(AbstractCapability[Any]):
    """A pydantic-ai capability that puts gated tool calls before a person.

    Which calls are gated comes from ``policy`` (default: tools.toml, project over global;
    no file at all gates everything); tools declared ``requires_approval=True`` are gated
    whatever the policy says. The tools of ``human.human_toolset`` and
    ``human.deferred_human_toolset`` are never gated: they ask a person themselves.
    """

    mode: GateMode
    session_id: str
    timeout: float

    def __init__(
        self,
        signoff: Target,
        *,
        session_id: str,
        mode: GateMode = "defer",
        principal: Principal | None = None,
        policy: Policy | None = None,
        timeout: float = 300.0,
    ) -> None:
        self.backend = _backend(signoff, principal)
        self.session_id = session_id
        self.mode = mode
        self.policy = policy if policy is not None else Policy.load()
        self.timeout = timeout

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        handler: Callable[[Any], Awaitable[Any]],
    ) -> Any:
        """Run, defer, block or queue the call as policy and mode say (a tool that asks a
        person itself runs: asking is a request already)."""
        if asks_a_person(tool_def):
            return await handler(args)
        meta = ctx.tool_call_metadata if ctx.tool_call_approved else None
        ours = meta.get(META_KEY) if isinstance(meta, dict) else None
        if isinstance(ours, dict) and "request_id" in ours:
            return await self._run_claimed(ours, call, args, handler)
        if ctx.tool_call_approved:
            raise NotAllowed(f"{call.tool_name} was approved outside signoff; it does not run")
        verdict = self.policy.evaluate(call.tool_name, call.args_as_dict())
        if verdict.verdict == "allow":
            return await handler(args)
        if self.mode == "defer":
            raise ApprovalRequired(
                metadata={META_KEY: {"verdict": verdict.verdict, "policy": verdict.explain()}}
            )
        if verdict.verdict == "deny":
            return f"Not run: denied by policy ({verdict.explain()})."
        schema = sendable_schema(tool_def.parameters_json_schema)
        if self.mode == "queue":
            return await self._queue(call, verdict, schema)
        return await self._block(ctx, call, handler, verdict, schema)

    async def _submit(
        self, call: ToolCallPart, verdict: PolicyDecision, schema: dict[str, JsonValue] | None
    ) -> Request:
        body: dict[str, Any] = {
            "session_id": self.session_id,
            "kind": "approval",
            "tool_name": call.tool_name,
            "tool_args": call.args_as_dict(),
            "tool_call_id": call.tool_call_id,
            "context": {"gate": self.mode, "policy": verdict.explain()},
        }
        if schema is not None:
            body["args_schema"] = schema
        submitted = await self.backend.submit(body)
        return submitted.request

    async def _run_claimed(
        self,
        ours: Mapping[str, Any],
        call: ToolCallPart,
        args: Any,
        handler: Callable[[Any], Awaitable[Any]],
    ) -> Any:
        request_id = str(ours["request_id"])
        # the claim checks the arguments pydantic-ai is about to run against the approval
        await self.backend.claim(request_id, call.args_as_dict())
        result = await self._execute(request_id, args, handler)
        note = ours.get("note")
        return _with_note(result, note) if note else result

    async def _execute(
        self, request_id: str, args: Any, handler: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        try:
            async with holding(self.backend, [request_id]):
                result = await handler(args)
        except ApprovalRequired:
            raise
        except asyncio.CancelledError:
            # the run was cut off mid-call: say so now rather than when the lease ends
            with contextlib.suppress(SignoffError):
                await self.backend.fail(request_id, _CUT_OFF)
            raise
        except Exception as exc:
            await self.backend.fail(request_id, f"{type(exc).__name__}: {exc}")
            raise
        await self.backend.complete(request_id, to_jsonable_python(result, fallback=str))
        return result

    async def _block(
        self,
        ctx: RunContext[Any],
        call: ToolCallPart,
        handler: Callable[[Any], Awaitable[Any]],
        verdict: PolicyDecision,
        schema: dict[str, JsonValue] | None,
    ) -> Any:
        request = await self._submit(call, verdict, schema)
        request = await wait_decided(self.backend, request.id, time.monotonic() + self.timeout)
        if request.status != "approved" or not isinstance(request, ApprovalRequest):
            return f"Not run. {denial(request)}"
        approved = dict(request.approved_args or call.args_as_dict())
        validator = _validators(ctx.agent).get(call.tool_name)
        if validator is None:
            await self.backend.claim(request.id, approved)
            await self.backend.fail(request.id, "the tool's schema is unknown")
            return "Not run: the tool's argument schema is unknown to signoff."
        try:
            validated = validator.validate_python(approved)
        except ValidationError as exc:
            await self.backend.claim(request.id, approved)
            await self.backend.fail(request.id, f"edited arguments refused: {exc.errors()[0]}")
            return "Not run: a person's edited arguments do not fit the tool."
        await self.backend.claim(request.id, approved)
        result = await self._execute(request.id, validated, handler)
        if approved != call.args_as_dict():
            note = f"Note: a person edited the arguments; it ran with {_json(approved)}."
            return _with_note(result, note)
        return result

    async def _queue(
        self, call: ToolCallPart, verdict: PolicyDecision, schema: dict[str, JsonValue] | None
    ) -> str:
        request = await self._submit(call, verdict, schema)
        summary = f"{call.tool_name} {_json(call.args_as_dict())}"
        if len(summary) > 200:
            summary = summary[:197] + "..."
        return (
            f"[PENDING:{request.id}] {summary} waits for a person's approval and runs once "
            "approved; ask signoff_status for its outcome."
        )


def _status_line(request: Request) -> str:
    if isinstance(request, ApprovalRequest) and request.result is not None:
        if request.result.ok:
            return f"completed: {_json(request.result.result)}"
        return f"failed: {request.result.error}"
    if request.status in ("rejected", "expired", "canceled"):
        return f"{request.status}: {denial(request)}"
    return request.status


def queue_status_toolset(signoff: Target, *, principal: Principal | None = None) -> Any:
    """A toolset with ``signoff_status(ids)``: the outcome of operations queued earlier."""
    backend = _backend(signoff, principal)
    toolset: FunctionToolset[Any] = FunctionToolset()

    @toolset.tool_plain
    async def signoff_status(ids: list[str]) -> dict[str, str]:
        """The current state of queued operations, by the ids from their [PENDING:<id>] replies.

        Each is pending, approved (waiting to run), executing, completed (with its result),
        failed (with the error), or rejected / expired / canceled (with the reason).
        """
        out: dict[str, str] = {}
        for request_id in ids[:100]:
            try:
                out[request_id] = _status_line(await backend.get(request_id))
            except SignoffError as exc:
                out[request_id] = f"unknown: {exc.message}"
        return out

    return toolset


def registry_from_agent(agent: Any) -> ToolRegistry:
    """The agent's function tools as an executor registry, for queue mode's worker.

    Tools that take a ``RunContext`` need a run to call them, so they are left out.
    """
    registry = ToolRegistry()

    def visit(toolset: AbstractToolset[Any]) -> None:
        if isinstance(toolset, FunctionToolset):
            for name, tool in toolset.tools.items():
                if not tool.takes_ctx and name not in registry:
                    schema = sendable_schema(tool.function_schema.json_schema)
                    registry.add(name, tool.function, schema=schema)

    for toolset in getattr(agent, "toolsets", ()):
        toolset.apply(visit)
    return registry


def _with_deferred(output_type: Any) -> Any:
    if isinstance(output_type, Sequence) and not isinstance(output_type, str):
        items = list(output_type)
    else:
        items = [output_type]
    if DeferredToolRequests not in items:
        items.append(DeferredToolRequests)
    return items


async def run_with_signoff(
    agent: Agent[Any, Any],
    prompt: str | None = None,
    *,
    signoff: Target,
    session_id: str,
    principal: Principal | None = None,
    policy: Policy | None = None,
    message_history: Sequence[ModelMessage] | None = None,
    deps: Any = None,
    timeout: float = 300.0,
    max_rounds: int = 100,
    on_pause: Callable[[AgentRunResult[Any], list[str]], Awaitable[None]] | None = None,
) -> AgentRunResult[Any]:
    """Run ``agent`` until its output is not deferred, asking signoff at every pause.

    Approval is a loop, not a UI state: run, and while the run ends with deferred calls,
    ask, wait for every decision, resume with results for all of them. ``on_pause`` gets
    each paused result and its request ids once they are filed: store
    ``result.all_messages()`` to resume anywhere, since a restored history with unanswered
    calls asks again and finds the same requests (and their decisions).
    """
    gate = SignoffGate(
        signoff,
        session_id=session_id,
        mode="defer",
        principal=principal,
        policy=policy,
        timeout=timeout,
    )
    output_type = _with_deferred(agent.output_type)
    result = await agent.run(
        prompt,
        message_history=message_history,
        output_type=output_type,
        capabilities=[gate],
        deps=deps,
    )
    rounds = 0
    while isinstance(result.output, DeferredToolRequests):
        rounds += 1
        if rounds > max_rounds:
            raise InvalidRequest(f"still deferring after {max_rounds} rounds; stopping")
        paused = result

        async def submitted(ids: list[str], paused: AgentRunResult[Any] = paused) -> None:
            if on_pause is not None:
                await on_pause(paused, ids)

        results = await resolve_deferred(
            result.output,
            gate.backend,
            session_id=session_id,
            agent=agent,
            timeout=timeout,
            messages=result.all_messages(),
            on_submitted=submitted,
        )
        result = await agent.run(
            message_history=result.all_messages(),
            deferred_tool_results=results,
            output_type=output_type,
            capabilities=[gate],
            deps=deps,
        )
    return result
