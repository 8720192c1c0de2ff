"""OpenAI Agents SDK runs ask signoff about every tool call that needs approval.

A run of an agent whose tools say ``needs_approval`` pauses with ``result.interruptions``.
:func:`run_with_signoff` is the approval loop: while a run pauses, it files one signoff
request per interruption (tool name, the parsed JSON arguments, the call id as
``tool_call_id``), waits until every one is decided (in the web inbox, the CLI, the API:
any transport), applies the decisions to the run state and runs again::

    from signoff.integrations.openai_agents import run_with_signoff

    result = await run_with_signoff(
        agent, "tidy up /tmp", signoff=client, session_id="tidy-1", store=store
    )

Decisions map onto the SDK as follows: ``approve`` is ``state.approve(item)``; ``reject``
is ``state.reject(item, rejection_message=...)`` whose text, with the person's reason,
is what the model reads instead of the tool's result; ``respond`` sends its feedback the
same way. A call left undecided past ``timeout`` is withdrawn and rejected.

Durable pauses: with ``store=`` the run is kept as a signoff task (``agent`` is
``openai-agents:<agent name>``) holding the ``RunState`` JSON and one pending call per
interruption with its request id. Another process resumes it with
:func:`resume_with_signoff` (``RunState.from_json`` needs an agent of the same name);
``store.find_task(request_id)`` finds the task of a request. Only one resumer of a pause
wins: the Paused -> Running change is a conditional write.

Edited arguments: the SDK has no edit API, and an approval is bound to the arguments the
model proposed. So an edit reaches a tool only through an override the tool reads by its
call id, and only for tools named in ``editable=`` (an edit of any other tool is refused
and the call is not run)::

    @function_tool(needs_approval=True)
    async def send_email(ctx: RunContextWrapper[Any], to: str, body: str) -> str:
        args = signoff_args(ctx, {"to": to, "body": body})  # the person's edit, if any
        return mail(args["to"], args["body"])

    await run_with_signoff(agent, ..., editable={"send_email"})

:func:`signoff_args` returns the default arguments for calls nobody edited, and outside a
run. Edits are checked against the tool's JSON schema (names, required ones, basic types)
before anything runs. The model reads an edited call's output followed by the same edit
note every integration gives (``outcomes.edit_note``), added through the run config's
``call_model_input_filter`` (a caller's own filter runs after it).

Every approved call is claimed with the arguments that will run before the run resumes,
then reported completed with its output, or failed (an edited call whose tool did not
read its override is reported failed: it ran with the proposed arguments).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeAlias

from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from signoff.backends import Backend, as_backend
from signoff.domain.principals import Principal
from signoff.domain.requests import ApprovalRequest, Request
from signoff.domain.schemas import sendable_schema
from signoff.domain.tasks import HistoryItem, PendingCall, Task
from signoff.errors import InvalidRequest, InvalidTransition, SignoffError
from signoff.integrations.outcomes import denial, edit_note, wait_decided
from signoff.leases import holding
from signoff.service import Service, service_for
from signoff.store.base import Store

if TYPE_CHECKING:
    from signoff.client import Client

try:
    from agents import (
        Agent,
        FunctionTool,
        RunConfig,
        RunContextWrapper,
        Runner,
        RunResult,
        RunState,
        ToolApprovalItem,
        ToolCallOutputItem,
        TResponseInputItem,
    )
    from agents.run_config import CallModelData, ModelInputData
    from agents.run_state import ContextDeserializer, ContextSerializer
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "signoff's OpenAI Agents SDK integration needs its extra: "
        "pip install 'signoff[openai-agents]'"
    ) from exc

__all__ = [
    "AGENT_PREFIX",
    "Applied",
    "apply_decisions",
    "edit_problem",
    "file_interruptions",
    "resume_with_signoff",
    "run_with_signoff",
    "signoff_args",
    "signoff_edits",
    "task_agent",
]

AGENT_PREFIX = "openai-agents:"
"""What a stored task's ``agent`` starts with; the agent's name follows."""

Target: TypeAlias = "Service | Backend | Client"
"""An in-process service (with the principal the agent acts as) or a client of a server."""
OnPause: TypeAlias = Callable[[str | None, list[str]], Awaitable[None]]
"""Called at each pause with the task id (None without a store) and the request ids."""


def _backend(signoff: Target, principal: Principal | None) -> Backend:
    return as_backend(signoff, principal or Principal(name="openai-agents", role="agent"))


def _now() -> datetime:
    return datetime.now(UTC)


def task_agent(agent: Agent[Any]) -> str:
    """The ``agent`` field of the tasks this agent's runs are stored as."""
    return AGENT_PREFIX + agent.name


# -- the tool-side override for edits ------------------------------------------------------


@dataclass
class _Edits:
    args: dict[str, dict[str, JsonValue]]
    """Edited arguments by call id."""
    read: set[str] = field(default_factory=set)
    """Call ids whose tool read its override."""


_EDITS: ContextVar[_Edits | None] = ContextVar("signoff_openai_agents_edits", default=None)


@contextlib.contextmanager
def signoff_edits(edits: Mapping[str, Mapping[str, JsonValue]]) -> Iterator[set[str]]:
    """Make ``edits`` (arguments by call id) what :func:`signoff_args` returns in this block.

    For callers that drive ``Runner.run`` themselves with :func:`apply_decisions`; yields
    the call ids whose tools read their override.
    """
    holder = _Edits({k: dict(v) for k, v in edits.items()})
    token = _EDITS.set(holder)
    try:
        yield holder.read
    finally:
        _EDITS.reset(token)


def signoff_args(ctx: RunContextWrapper[Any], default_args: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments a tool call should run with: a person's edit for its call id, or
    ``default_args`` (what the model proposed) when nobody edited it.

    ``ctx`` is the tool's context (a ``ToolContext``, which carries ``tool_call_id``).
    """
    call_id = getattr(ctx, "tool_call_id", None)
    edits = _EDITS.get()
    if edits is None or not isinstance(call_id, str) or call_id not in edits.args:
        return dict(default_args)
    edits.read.add(call_id)
    return dict(edits.args[call_id])


# -- filing and waiting --------------------------------------------------------------------


def _call_id(item: ToolApprovalItem) -> str:
    call_id = item.call_id
    if not isinstance(call_id, str) or not call_id:
        raise InvalidRequest(f"interruption of {item.name!r} has no call id; refusing to go on")
    return call_id


def _args(item: ToolApprovalItem) -> dict[str, JsonValue]:
    raw = item.arguments or "{}"
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {"arguments": raw}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


async def file_interruptions(
    interruptions: Sequence[ToolApprovalItem], backend: Backend, *, session_id: str
) -> list[tuple[ToolApprovalItem, str]]:
    """File a signoff request for each interruption: each item with its request id.

    The call id is the request's ``tool_call_id``, so filing again (after a restart) finds
    the same request and its decision; a function tool's ``params_json_schema`` goes with
    it as ``args_schema``, so a person's edit must fit it.
    """
    asked: list[tuple[ToolApprovalItem, str]] = []
    for item in interruptions:
        body: dict[str, Any] = {
            "session_id": session_id,
            "kind": "approval",
            "tool_name": item.name or "",
            "tool_args": _args(item),
            "tool_call_id": _call_id(item),
            "context": {"framework": "openai-agents", "agent": item.agent.name},
        }
        schema = sendable_schema(_tool_schema(item.agent, item.name or ""))
        if schema is not None:
            body["args_schema"] = schema
        submitted = await backend.submit(body)
        asked.append((item, submitted.request.id))
    return asked


# -- applying decisions --------------------------------------------------------------------


def _tool_schema(agent: Agent[Any], tool_name: str) -> Mapping[str, Any] | None:
    for tool in agent.tools:
        if isinstance(tool, FunctionTool) and tool.name == tool_name:
            return tool.params_json_schema
    return None


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _type_fits(value: object, schema: Mapping[str, Any]) -> bool:
    declared = schema.get("type")
    if declared is None:
        options = schema.get("anyOf") or schema.get("oneOf")
        return not options or any(_type_fits(value, o) for o in options if isinstance(o, dict))
    names = declared if isinstance(declared, list) else [declared]
    for name in names:
        kinds = _JSON_TYPES.get(str(name))
        if kinds is None:
            return True
        if isinstance(value, bool) and name in ("integer", "number"):
            continue
        if isinstance(value, kinds):
            return "enum" not in schema or value in schema["enum"]
    return False


def edit_problem(agent: Agent[Any], tool_name: str, args: Mapping[str, Any]) -> str | None:
    """Why edited ``args`` do not fit the tool's JSON schema, or None when they do.

    The check covers argument names, required ones, top-level types and enums: a tool
    reading edits still validates them as it would any input.
    """
    schema = _tool_schema(agent, tool_name)
    if schema is None:
        return f"the schema of {tool_name!r} is unknown, so edited arguments cannot be checked"
    properties: Mapping[str, Any] = schema.get("properties") or {}
    unknown = sorted(set(args) - set(properties))
    if unknown:
        return f"{unknown[0]}: not an argument of {tool_name}"
    missing = sorted(set(schema.get("required") or ()) - set(args))
    if missing:
        return f"{missing[0]}: required"
    for name, value in args.items():
        if not _type_fits(value, properties[name]):
            return f"{name}: not a valid {properties[name].get('type', 'value')}"
    return None


@dataclass(frozen=True)
class Applied:
    """What applying decisions to a run state did, for the caller to report to signoff."""

    approved: dict[str, tuple[str, dict[str, JsonValue]]]
    """Approved calls: call id to (request id, the arguments that will run)."""
    edits: dict[str, dict[str, JsonValue]]
    """Edited arguments by call id: what :func:`signoff_args` must return for them."""
    refused: dict[str, tuple[dict[str, JsonValue], str]]
    """Approved with edits that cannot run: request id to (edited args, why)."""
    notes: dict[str, str] = field(default_factory=dict)
    """The edit note the model reads after an edited call's output, by call id."""


def apply_decisions(
    state: RunState[Any, Any],
    decided: Sequence[tuple[str, Request]],
    *,
    editable: Collection[str] = (),
) -> Applied:
    """Approve or reject every interruption of ``state`` by its decided request.

    ``decided`` pairs call ids with their requests. Refused with InvalidRequest, before
    anything is applied: a call id that is not an interruption of this state (the SDK
    would approve a foreign item silently), a request about another call, a request still
    pending, and an interruption without a decision (never resume one by accident).
    """
    current = {_call_id(item): item for item in state.get_interruptions()}
    seen: set[str] = set()
    for call_id, request in decided:
        item = current.get(call_id)
        if item is None:
            raise InvalidRequest(f"{call_id!r} is not an interruption of this run state")
        if call_id in seen:
            raise InvalidRequest(f"two decisions for interruption {call_id!r}")
        seen.add(call_id)
        if not isinstance(request, ApprovalRequest):
            raise InvalidRequest(f"{request.id} is not an approval request")
        if request.tool_call_id != call_id or request.tool_name != item.name:
            raise InvalidRequest(f"{request.id} is not the request for call {call_id!r}")
        if request.status == "pending":
            raise InvalidRequest(f"{request.id} is still pending; refusing to resume")
    if missing := sorted(set(current) - seen):
        raise InvalidRequest(f"no decision for interruption {missing[0]!r}; refusing to resume")
    applied = Applied(approved={}, edits={}, refused={})
    for call_id, request in decided:
        assert isinstance(request, ApprovalRequest)
        item = current[call_id]
        if request.status != "approved":
            if request.status in ("executing", "completed", "failed"):
                # claimed before (a crash after the claim, or another process): never twice
                message = f"This call was already {request.status}; it is not run again."
            else:
                message = denial(request)
            state.reject(item, rejection_message=message)
            continue
        proposed = _args(item)
        approved = dict(request.approved_args or proposed)
        if approved != proposed:
            problem = (
                f"{request.tool_name} does not take edited arguments"
                if request.tool_name not in editable
                else edit_problem(item.agent, request.tool_name, approved)
            )
            if problem is not None:
                applied.refused[request.id] = (approved, problem)
                state.reject(
                    item,
                    rejection_message=(
                        "A person approved this call with edited arguments the tool does not "
                        f"accept ({problem}); it was not run."
                    ),
                )
                continue
            applied.edits[call_id] = approved
            applied.notes[call_id] = edit_note(approved, proposed)
        applied.approved[call_id] = (request.id, approved)
        state.approve(item)
    return applied


# -- the edit note the model reads --------------------------------------------------------


def _with_note(output: Any, note: str) -> Any:
    """A function call's output (text, or a list of content parts) with ``note`` after it."""
    if isinstance(output, str):
        return output if output.endswith(note) else f"{output}\n\n{note}"
    if isinstance(output, list):
        if any(isinstance(p, dict) and p.get("text") == note for p in output):
            return output
        return [*output, {"type": "input_text", "text": note}]
    return output


def _noted(item: Any, notes: Mapping[str, str]) -> Any:
    if not isinstance(item, dict) or item.get("type") != "function_call_output":
        return item
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or call_id not in notes:
        return item
    output = _with_note(item.get("output"), notes[call_id])
    return item if output is item.get("output") else {**item, "output": output}


def _note_outputs(result: RunResult, notes: Mapping[str, str]) -> None:
    """Put the edit notes into the run's own output items, so a stored state keeps them."""
    for item in result.new_items:
        if isinstance(item, ToolCallOutputItem) and isinstance(item.raw_item, dict):
            raw: dict[str, Any] = item.raw_item  # type: ignore[assignment]
            noted = _noted(raw, notes)
            if noted is not raw:
                raw["output"] = noted["output"]


def _noting(run_config: RunConfig | None, notes: Callable[[], Mapping[str, str]]) -> RunConfig:
    """``run_config`` whose model input carries the edit note after each edited call's output.

    The SDK has no edit API, so an edited call's output is the tool's own; every other
    integration tells the model the call ran with a person's edit, and so does this one.
    ``notes()`` gives the notes by call id at each model call: only calls whose tool read
    its edit (the others ran with the proposed arguments). A ``call_model_input_filter``
    of the caller's runs after, on the noted input.
    """
    config = run_config or RunConfig()
    theirs = config.call_model_input_filter

    async def note(data: CallModelData[Any]) -> ModelInputData:
        model_data = data.model_data
        now = notes()
        model_data.input = [_noted(i, now) for i in model_data.input]
        if theirs is None:
            return model_data
        updated = theirs(dataclasses.replace(data, model_data=model_data))
        return await updated if inspect.isawaitable(updated) else updated

    return dataclasses.replace(config, call_model_input_filter=note)


# -- the stored task -----------------------------------------------------------------------


class _Keeper:
    """The run's task record, written by the service; every change is conditional on its version."""

    def __init__(
        self, store: Store | Service, task: Task, serializer: ContextSerializer | None = None
    ) -> None:
        self.tasks = service_for(store)
        self.task = task
        self.serializer = serializer

    @classmethod
    async def start(
        cls,
        store: Store | Service,
        agent: Agent[Any],
        prompt: str,
        *,
        session_id: str,
        user: str,
        serializer: ContextSerializer | None,
    ) -> _Keeper:
        task = await service_for(store).create_task(
            agent=task_agent(agent), user=user, prompt=prompt, session_id=session_id
        )
        return cls(store, task, serializer)

    async def save(self, **update: Any) -> None:
        """Store the changed record (InvalidTransition when another process changed it)."""
        self.task = await self.tasks.save_task(self.task.model_copy(update=update))

    async def pause(
        self, state: RunState[Any, Any], asked: Sequence[tuple[ToolApprovalItem, str]]
    ) -> None:
        now = _now()
        pending = tuple(
            PendingCall(
                tool_call_id=_call_id(item),
                tool_name=item.name or "",
                args=_args(item),
                request_id=rid,
            )
            for item, rid in asked
        )
        calls = tuple(
            HistoryItem(
                kind="tool_call",
                at=now,
                tool_name=p.tool_name,
                tool_call_id=p.tool_call_id,
                args=p.args,
                request_id=p.request_id,
            )
            for p in pending
        )
        await self.save(
            status="Paused",
            messages=json.dumps(state.to_json(context_serializer=self.serializer)),
            pending=pending,
            history=(*self.task.history, *calls),
        )

    async def running(self, decided: Sequence[tuple[str, Request]]) -> None:
        if self.task.status != "Paused":
            raise InvalidTransition(f"task {self.task.id} is {self.task.status}, not paused")
        await self.save(
            status="Running",
            history=(*self.task.history, *(_decision_item(cid, r) for cid, r in decided)),
        )

    async def complete(self, result: RunResult) -> None:
        await self.save(
            status="Completed",
            messages=json.dumps(result.to_state().to_json(context_serializer=self.serializer)),
            pending=(),
            output=to_jsonable_python(result.final_output, fallback=str),
        )

    async def fail(self, exc: BaseException) -> None:
        text = f"{type(exc).__name__}: {exc}"
        with contextlib.suppress(InvalidTransition):
            await self.save(
                status="Failed",
                error=text,
                history=(*self.task.history, HistoryItem(kind="error", at=_now(), text=text)),
            )


def _decision_item(call_id: str, request: Request) -> HistoryItem:
    record = request.decision
    base: dict[str, Any] = {
        "at": record.decided_at if record is not None else request.updated_at,
        "by": record.decided_by if record is not None else None,
        "tool_name": getattr(request, "tool_name", None),
        "tool_call_id": call_id,
        "request_id": request.id,
    }
    if isinstance(request, ApprovalRequest) and request.status == "approved":
        if request.approved_args is not None and request.approved_args != request.tool_args:
            return HistoryItem(
                kind="edit", args=request.approved_args, text="approved with edits", **base
            )
        return HistoryItem(kind="approval", text="approved", **base)
    return HistoryItem(kind="rejection", text=denial(request), **base)


# -- the loop ------------------------------------------------------------------------------


@dataclass
class _Loop:
    agent: Agent[Any]
    backend: Backend
    session_id: str
    keeper: _Keeper | None
    editable: Collection[str]
    timeout: float
    max_rounds: int
    run_config: RunConfig | None
    on_pause: OnPause | None
    notes: dict[str, str] = field(default_factory=dict)
    """Edit notes of calls that ran with a person's edit, by call id, for every later model
    call of this loop."""

    async def drive(self, result: RunResult) -> RunResult:
        """Ask, wait, apply and run again while the run pauses."""
        rounds = 0
        while result.interruptions:
            rounds += 1
            if rounds > self.max_rounds:
                raise InvalidRequest(f"still pausing after {self.max_rounds} rounds; stopping")
            state = result.to_state()
            asked = await file_interruptions(
                result.interruptions, self.backend, session_id=self.session_id
            )
            if self.keeper is not None:
                await self.keeper.pause(state, asked)
            result = await self.resume(state, [(_call_id(i), rid) for i, rid in asked])
        if self.keeper is not None:
            await self.keeper.complete(result)
        return result

    async def resume(
        self, state: RunState[Any, Any], asked: Sequence[tuple[str, str]]
    ) -> RunResult:
        """Wait for every decision of one pause, apply them, and run once more."""
        if self.on_pause is not None:
            task_id = self.keeper.task.id if self.keeper is not None else None
            await self.on_pause(task_id, [rid for _, rid in asked])
        deadline = time.monotonic() + self.timeout
        requests = await asyncio.gather(
            *(wait_decided(self.backend, rid, deadline) for _, rid in asked)
        )
        decided = [(cid, r) for (cid, _), r in zip(asked, requests, strict=True)]
        if self.keeper is not None:
            await self.keeper.running(decided)  # one resumer of a pause wins
        applied = apply_decisions(state, decided, editable=self.editable)
        for request_id, (args, problem) in applied.refused.items():
            await self.backend.claim(request_id, args)
            await self.backend.fail(
                request_id, f"edited arguments refused before running: {problem}"
            )
        claimed: list[str] = []
        try:
            for request_id, args in applied.approved.values():
                # the claim checks the arguments about to run against the approval, once
                await self.backend.claim(request_id, args)
                claimed.append(request_id)
        except SignoffError as exc:
            # the run does not go on: calls claimed so far are not run, and are told so
            for request_id in claimed:
                with contextlib.suppress(SignoffError):
                    await self.backend.fail(request_id, f"not run: {exc.message}")
            raise
        with signoff_edits(applied.edits) as read:

            def notes() -> dict[str, str]:
                return {**self.notes, **{c: n for c, n in applied.notes.items() if c in read}}

            config = _noting(self.run_config, notes)
            try:
                async with holding(self.backend, [rid for rid, _ in applied.approved.values()]):
                    result = await Runner.run(self.agent, state, run_config=config)
            except Exception as exc:
                for request_id, _ in applied.approved.values():
                    with contextlib.suppress(InvalidTransition):
                        await self.backend.fail(request_id, f"the run failed: {exc}")
                raise
        self.notes = notes()
        _note_outputs(result, self.notes)
        await self._report(result, applied, read)
        return result

    async def _report(self, result: RunResult, applied: Applied, read: set[str]) -> None:
        outputs = {
            call_id: item.output
            for item in result.new_items
            if isinstance(item, ToolCallOutputItem)
            and isinstance(call_id := _raw_call_id(item.raw_item), str)
        }
        for call_id, (request_id, _) in applied.approved.items():
            if call_id not in outputs:
                await self.backend.fail(request_id, "the run recorded no output for this call")
            elif call_id in applied.edits and call_id not in read:
                await self.backend.fail(
                    request_id,
                    "the tool did not read its edited arguments (signoff_args), so it ran "
                    "with the proposed ones",
                )
            else:
                output = to_jsonable_python(outputs[call_id], fallback=str)
                await self.backend.complete(request_id, output)


def _raw_call_id(raw: Any) -> Any:
    return raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)


def _user(backend: Backend, principal: Principal | None) -> str:
    if principal is not None:
        return principal.name
    own = getattr(backend, "principal", None)
    return own.name if isinstance(own, Principal) else "openai-agents"


async def run_with_signoff(
    agent: Agent[Any],
    input: str | list[TResponseInputItem],
    *,
    signoff: Target,
    session_id: str,
    store: Store | Service | None = None,
    principal: Principal | None = None,
    context: Any = None,
    context_serializer: ContextSerializer | None = None,
    run_config: RunConfig | None = None,
    editable: Collection[str] = (),
    timeout: float = 300.0,
    max_rounds: int = 100,
    on_pause: OnPause | None = None,
) -> RunResult:
    """Run ``agent`` until it no longer pauses, asking signoff about every interruption.

    ``signoff`` is a service (acting as ``principal``), an ``AsyncClient`` or a blocking
    ``Client``. With ``store`` the run is kept as a task so another process can resume a
    pause (:func:`resume_with_signoff`); ``on_pause`` gets the task id and the request ids
    of each pause once they are filed. ``editable`` names the tools that read edits with
    :func:`signoff_args`. A ``context`` that is not a mapping is stored through
    ``context_serializer`` (the SDK's own hook); resume it with a ``context_deserializer``.
    """
    backend = _backend(signoff, principal)
    keeper = None
    if store is not None:
        prompt = input if isinstance(input, str) else json.dumps(to_jsonable_python(input))
        keeper = await _Keeper.start(
            store,
            agent,
            prompt,
            session_id=session_id,
            user=_user(backend, principal),
            serializer=context_serializer,
        )
    loop = _Loop(
        agent, backend, session_id, keeper, editable, timeout, max_rounds, run_config, on_pause
    )
    try:
        result = await Runner.run(agent, input, context=context, run_config=run_config)
        return await loop.drive(result)
    except Exception as exc:
        if keeper is not None:
            await keeper.fail(exc)
        raise


async def resume_with_signoff(
    agent: Agent[Any],
    task_id: str,
    *,
    signoff: Target,
    store: Store | Service,
    principal: Principal | None = None,
    context_serializer: ContextSerializer | None = None,
    context_deserializer: ContextDeserializer | None = None,
    run_config: RunConfig | None = None,
    editable: Collection[str] = (),
    timeout: float = 300.0,
    max_rounds: int = 100,
    on_pause: OnPause | None = None,
) -> RunResult:
    """Resume a paused run stored as task ``task_id``, in this or any other process.

    ``agent`` must have the name of the one that paused (``RunState.from_json`` needs it);
    the requests filed at the pause are found again by call id and their decisions (made
    meanwhile or still to come) applied. Refused: an unknown task (TaskNotFound), another
    agent's task (InvalidRequest), one that is not paused or that another process resumes
    first (InvalidTransition).
    """
    task = await service_for(store).get_task(task_id)
    if task.agent != task_agent(agent):
        raise InvalidRequest(f"task {task_id} belongs to {task.agent!r}, not {task_agent(agent)!r}")
    if task.status != "Paused":
        raise InvalidTransition(f"task {task_id} is {task.status}, not paused")
    backend = _backend(signoff, principal)
    state: RunState[Any, Any] = await RunState.from_json(
        agent, json.loads(task.messages), context_deserializer=context_deserializer
    )
    by_call = {p.tool_call_id: p.request_id for p in task.pending}
    interruptions = state.get_interruptions()
    if stale := sorted(set(by_call) - {_call_id(i) for i in interruptions}):
        raise InvalidRequest(f"stored call {stale[0]!r} is not an interruption of the run state")
    unfiled = [i for i in interruptions if _call_id(i) not in by_call]
    if unfiled:  # never resume a call nobody was asked about
        for item, rid in await file_interruptions(unfiled, backend, session_id=task.session_id):
            by_call[_call_id(item)] = rid
    keeper = _Keeper(store, task, context_serializer)
    loop = _Loop(
        agent,
        backend,
        task.session_id,
        keeper,
        editable,
        timeout,
        max_rounds,
        run_config,
        on_pause,
    )
    asked = [(_call_id(i), by_call[_call_id(i)]) for i in interruptions]
    try:
        result = await loop.resume(state, asked)
        return await loop.drive(result)
    except Exception as exc:
        await keeper.fail(exc)  # a no-op when another process changed the task meanwhile
        raise
