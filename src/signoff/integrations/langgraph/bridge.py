"""LangGraph bridge: answer paused graphs through signoff, and a durable index of them.

:class:`LangGraphBridge` files one signoff request per interrupt of a paused thread (one
per tool call for LangChain's ``HumanInTheLoopMiddleware``, in either interrupt mode) and,
once people decided them, resumes the thread with ``Command(resume={interrupt_id: value})``.
Every id is checked against the checkpoint's live interrupts first: LangGraph takes a map
with a stale id as the resume *value* when one interrupt is pending. A batched interrupt
always gets exactly one decision per action request, in order; an edit can never switch
tools. The index is one :class:`~signoff.domain.tasks.Task` per waiting thread
(``agent="langgraph"``), so a restarted process finds them with
:meth:`LangGraphBridge.waiting`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pydantic import JsonValue

try:
    from langchain_core.messages import ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.pregel import Pregel
    from langgraph.types import Command, Interrupt, StateSnapshot
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "signoff.integrations.langgraph needs LangGraph: pip install 'signoff[langgraph]'"
    ) from exc

from signoff.backends import Backend, as_backend
from signoff.domain.clock import Clock, system_clock
from signoff.domain.decisions import Answer, Approve, Choose, Reject, Respond
from signoff.domain.principals import Principal
from signoff.domain.requests import (
    ApprovalRequest,
    ChoiceRequest,
    QuestionsRequest,
    Request,
)
from signoff.domain.schemas import sendable_schema
from signoff.domain.submission import NewRequest
from signoff.domain.tasks import HistoryItem, PendingCall, Task
from signoff.errors import (
    InvalidDecision,
    InvalidRequest,
    InvalidTransition,
    SignoffError,
    TaskNotFound,
)
from signoff.integrations.outcomes import denial, edit_note
from signoff.leases import holding
from signoff.service import Service, service_for
from signoff.store.base import Store

if TYPE_CHECKING:
    from signoff.client import Client

from signoff.integrations.langgraph.base import FrozenModel, last_ai_message

__all__ = [
    "AGENT_NAME",
    "GraphAsk",
    "LangGraphBridge",
    "Resumed",
    "batch_response",
    "check_middleware_decision",
    "graph_tool_schemas",
    "middleware_decision",
]

AGENT_NAME = "langgraph"
"""The ``agent`` of the bridge's Task records."""

MiddlewareDecisionType: TypeAlias = Literal["approve", "edit", "reject", "respond"]
"""A decision LangChain's ``HumanInTheLoopMiddleware`` takes."""
AskKind: TypeAlias = Literal["tool_call", "questions", "choice"]
"""What an interrupt asks for: a tool call's review, answers to questions, or a choice."""

MIDDLEWARE_DECISIONS: tuple[MiddlewareDecisionType, ...] = ("approve", "edit", "reject", "respond")
"""Every decision the middleware takes, allowed where an interrupt names none."""
KEY_LIMIT = 200
"""NewRequest's longest session id, tool_call_id and idempotency key."""


def check_middleware_decision(
    tool_name: str,
    decision: Mapping[str, Any],
    allowed: Sequence[str] = MIDDLEWARE_DECISIONS,
) -> dict[str, JsonValue]:
    """``decision`` as HumanInTheLoopMiddleware takes it, checked for the call ``tool_name``.

    Refuses (``InvalidDecision``) a type the tool does not allow, a malformed decision, and
    an edit that names another tool: batched mode would run that other tool.
    """
    kind = decision.get("type")
    if kind not in allowed:
        raise InvalidDecision(f"{kind!r} is not allowed for {tool_name}; allowed: {list(allowed)}")
    if kind == "approve":
        return {"type": "approve"}
    if kind == "edit":
        action = decision.get("edited_action")
        if not isinstance(action, Mapping) or not isinstance(action.get("args"), Mapping):
            raise InvalidDecision("an edit needs edited_action with name and args")
        if action.get("name") != tool_name:
            raise InvalidDecision(
                f"an edit may change the arguments of {tool_name}, not switch to "
                f"{action.get('name')!r}"
            )
        return {"type": "edit", "edited_action": {"name": tool_name, "args": dict(action["args"])}}
    message = decision.get("message")
    if kind == "respond":
        if not isinstance(message, str) or not message:
            raise InvalidDecision("respond needs a message")
        return {"type": "respond", "message": message}
    if message is not None and not isinstance(message, str):
        raise InvalidDecision("a reject message is text")
    return {"type": "reject", "message": message} if message else {"type": "reject"}


def middleware_decision(
    request: ApprovalRequest, allowed: Sequence[str] = MIDDLEWARE_DECISIONS
) -> dict[str, JsonValue]:
    """The middleware decision a settled approval request stands for.

    approved -> approve, or edit when a person changed the arguments; reject -> reject with
    the reason; respond -> respond; expired or canceled -> reject saying so.
    """
    record = request.decision
    if request.status in ("approved", "executing", "completed", "failed"):
        args = request.approved_args if request.approved_args is not None else request.tool_args
        edited = args != request.tool_args or "approve" not in allowed
        if edited:
            action = {"name": request.tool_name, "args": args}
            return check_middleware_decision(
                request.tool_name, {"type": "edit", "edited_action": action}, allowed
            )
        return check_middleware_decision(request.tool_name, {"type": "approve"}, allowed)
    if request.status == "pending":
        raise InvalidTransition(f"request {request.id} is still pending", status="pending")
    decision = record.decision if record is not None else None
    if isinstance(decision, Respond):
        body: dict[str, Any] = {"type": "respond", "message": decision.feedback}
    elif isinstance(decision, Reject) and decision.reason.strip():
        body = {"type": "reject", "message": decision.reason}
    elif request.status in ("expired", "canceled"):
        body = {"type": "reject", "message": f"No decision: the request {request.status}."}
    else:
        body = {"type": "reject"}
    return check_middleware_decision(request.tool_name, body, allowed)


def batch_response(
    action_requests: Sequence[Mapping[str, Any]],
    decisions: Sequence[Mapping[str, Any]],
    review_configs: Sequence[Mapping[str, Any]] = (),
) -> dict[str, JsonValue]:
    """``{"decisions": [...]}`` for a batched interrupt: exactly one per action, in order.

    A wrong count, a disallowed type or a tool switch would be saved by LangGraph and
    poison the thread, so each is refused here (``InvalidDecision``) and nothing is sent.
    """
    if len(decisions) != len(action_requests):
        raise InvalidDecision(
            f"a batched interrupt needs {len(action_requests)} decisions, got {len(decisions)}"
        )
    allowed_by_name = {
        str(c.get("action_name")): tuple(c.get("allowed_decisions") or ()) for c in review_configs
    }
    out: list[JsonValue] = []
    for action, decision in zip(action_requests, decisions, strict=True):
        name = str(action.get("name"))
        allowed = allowed_by_name.get(name) or MIDDLEWARE_DECISIONS
        out.append(check_middleware_decision(name, decision, allowed))
    return {"decisions": out}


# -- outside the graph: the bridge --------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class GraphAsk:
    """One thing a paused thread asks a person: an interrupt, or one call of a batched one."""

    interrupt_id: str
    """The LangGraph interrupt it belongs to."""
    kind: AskKind
    """``tool_call`` (HumanInTheLoopMiddleware), ``questions`` or ``choice`` (ask_human)."""
    position: int
    """Its index in a batched interrupt's action requests (0 otherwise)."""
    tool_call_id: str
    """The model's call id; for a call it cannot be paired with, or an ask, a derived id."""
    tool_name: str
    """The tool, or ``ask_human``."""
    args: dict[str, JsonValue]
    """The call's arguments, or the ask's interrupt value."""
    allowed: tuple[str, ...]
    """The decisions the graph accepts, in LangGraph's words."""
    new_request: NewRequest
    """What is filed with signoff for it."""


@dataclass(frozen=True, kw_only=True)
class Resumed:
    """What a resume did: the thread's output and where its Task record now stands."""

    task: Task
    """The index record: Paused again (on new interrupts), Completed or Failed."""
    output: Any
    """What the graph returned."""
    interrupts: tuple[Interrupt, ...]
    """Interrupts the thread stopped on again, if any (already filed)."""


class _Filed(FrozenModel):
    """The bridge's own index of one Task: which requests answer which interrupt."""

    interrupt_id: str
    kind: Literal["tool_approval", "batched", "questions", "choice"]
    request_ids: tuple[str, ...]
    allowed: tuple[tuple[str, ...], ...]


def graph_tool_schemas(graph: Any) -> dict[str, dict[str, JsonValue]]:
    """The argument JSON Schema of each tool in ``graph``'s tool nodes, by tool name.

    Tools are found in nodes that hold a ``tools_by_name`` map (LangGraph's ``ToolNode``,
    as ``create_agent`` builds it); the schema is what the model is given
    (``tool_call_schema``, without injected arguments). A tool whose schema cannot be read,
    or that signoff would refuse, gets none: a person's edit then goes unchecked.
    """
    found: dict[str, dict[str, JsonValue]] = {}
    nodes = getattr(graph, "nodes", None)
    for node in (nodes or {}).values() if isinstance(nodes, Mapping) else ():
        tools = getattr(getattr(node, "bound", None), "tools_by_name", None)
        if not isinstance(tools, Mapping):
            continue
        for name, tool in tools.items():
            try:
                parameters = convert_to_openai_tool(tool)["function"].get("parameters")
            except Exception:  # a tool langchain cannot describe is not checked
                parameters = None
            schema = sendable_schema(parameters)
            if schema is not None:
                found.setdefault(str(name), schema)
    return found


class LangGraphBridge:
    """Routes a compiled graph's interrupts through signoff, durably, one thread at a time.

    ``graph`` needs a checkpointer that survives restarts (e.g. ``AsyncSqliteSaver``);
    ``backend`` is a :class:`~signoff.client.AsyncClient`, a blocking ``Client``, another
    backend, or a :class:`~signoff.service.Service` acting as ``principal``; ``store`` holds
    the Task index (the service, or a signoff store the index is written to through one).
    Interrupts that are neither middleware reviews nor :func:`ask_human` are left alone.
    """

    def __init__(
        self,
        graph: Pregel[Any, Any, Any, Any],
        backend: Backend | Service | Client,
        store: Store | Service,
        *,
        principal: Principal | None = None,
        user: str | None = None,
        expires_in: float | None = None,
        clock: Clock = system_clock,
    ) -> None:
        self.graph = graph
        self.backend = as_backend(backend, principal)
        self.store = store
        self.tasks = service_for(store, clock=clock)
        """The service that writes the Task index."""
        self.user = user or (principal.name if principal else "agent:langgraph")
        self.expires_in = expires_in
        self.clock = clock
        self.tool_schemas = graph_tool_schemas(graph)
        """Each tool's argument schema, from the graph's tool nodes: sent with its requests."""

    # -- reading ---------------------------------------------------------------------------

    async def waiting(self) -> list[Task]:
        """Every thread paused on signoff requests, from the store (survives restarts)."""
        tasks = await self.tasks.list_tasks(status="Paused", limit=10_000)
        return [t for t in tasks if t.agent == AGENT_NAME]

    async def task(self, thread_id: str) -> Task | None:
        """The newest index record of this thread, whatever its status."""
        found = [
            t
            for t in await self.tasks.list_tasks(limit=10_000)
            if t.agent == AGENT_NAME and t.session_id == thread_id
        ]
        return found[0] if found else None

    async def pending(self, thread_id: str) -> list[GraphAsk]:
        """What the thread's live interrupts ask, one entry per request to file."""
        state = await self._state(thread_id)
        asks: list[GraphAsk] = []
        for item in state.interrupts:
            asks += self._asks(thread_id, item, state)
        return asks

    # -- filing and resuming ---------------------------------------------------------------

    async def run(self, graph_input: Any, thread_id: str) -> Resumed:
        """Start (or continue) the thread with ``graph_input``; file what it stops on."""
        old = await self.task(thread_id)
        if old is not None and old.status in ("Paused", "Running"):
            raise InvalidTransition(
                f"thread {thread_id!r} waits on signoff requests; resume it", status=old.status
            )
        output = await self._invoke(graph_input, thread_id)
        return await self._settled(thread_id, None, output)

    async def file(self, thread_id: str) -> Task | None:
        """File one request per live interrupt (per call for batched reviews); index them.

        Idempotent: filing again returns the same requests and record. None when the thread
        waits on nothing the bridge understands.
        """
        old = await self.task(thread_id)
        if old is not None and old.status == "Running":
            raise InvalidTransition(f"thread {thread_id!r} is being resumed", status="Running")
        return await self._file(thread_id, old)

    async def _file(self, thread_id: str, old: Task | None) -> Task | None:
        state = await self._state(thread_id)
        filed: list[_Filed] = []
        pending: list[PendingCall] = []
        for item in state.interrupts:
            asks = self._asks(thread_id, item, state)
            if not asks:
                continue
            ids: list[str] = []
            for ask in asks:
                submitted = await self.backend.submit(ask.new_request)
                ids.append(submitted.request.id)
                pending.append(
                    PendingCall(
                        tool_call_id=ask.tool_call_id,
                        tool_name=ask.tool_name,
                        args=ask.args,
                        request_id=submitted.request.id,
                    )
                )
            kind: Literal["tool_approval", "batched", "questions", "choice"]
            if _is_batched(item.value):
                kind = "batched"
            elif asks[0].kind == "tool_call":
                kind = "tool_approval"
            else:
                kind = asks[0].kind
            filed.append(
                _Filed(
                    interrupt_id=item.id,
                    kind=kind,
                    request_ids=tuple(ids),
                    allowed=tuple(a.allowed for a in asks),
                )
            )
        if not filed:
            return None
        index = json.dumps([f.model_dump(mode="json") for f in filed])
        if old is not None and old.status == "Paused" and old.messages == index:
            return old
        if old is None or old.status not in ("Paused", "Running"):
            return await self.tasks.create_task(
                agent=AGENT_NAME,
                user=self.user,
                prompt=f"LangGraph thread {thread_id}",
                session_id=thread_id,
                status="Paused",
                messages=index,
                pending=tuple(pending),
            )
        # after our own resume, or the thread moved on outside the bridge
        return await self.tasks.save_task(
            old.model_copy(
                update={"status": "Paused", "messages": index, "pending": tuple(pending)}
            )
        )

    async def resume(self, thread_id: str, *, wait: float = 0.0) -> Resumed | None:
        """Resume the thread once every filed request is decided; None while some wait.

        ``wait`` is how many seconds to wait for the decisions. The ids are checked against
        the checkpoint's live interrupts first (a stale one is ``InvalidRequest``), the
        decisions are turned into the graph's resume values (``InvalidDecision`` for one it
        cannot take), and only one resumer of a pause wins (``InvalidTransition``).
        """
        task = await self.task(thread_id)
        if task is None or task.status != "Paused":
            task = await self.file(thread_id)
        if task is None:
            raise TaskNotFound(f"thread {thread_id!r} (it waits on no signoff request)")
        filed = [_Filed.model_validate(f) for f in json.loads(task.messages)]
        decided = await self._decided(task, wait)
        if decided is None:
            return None
        state = await self._state(thread_id)
        live = {i.id: i for i in state.interrupts}
        stale = [f.interrupt_id for f in filed if f.interrupt_id not in live]
        if stale:
            raise InvalidRequest(
                f"interrupt {stale[0]} of thread {thread_id!r} is no longer pending; "
                "file the thread again"
            )
        resume = {f.interrupt_id: self._value(f, live[f.interrupt_id], decided) for f in filed}
        history = (*task.history, *(_history(r, self.clock()) for r in decided.values()))
        # only one resumer of a pause wins: the others get the service's InvalidTransition
        running = await self.tasks.save_task(
            task.model_copy(update={"status": "Running", "history": history})
        )
        claimed: list[str] = []
        try:
            await self._claim(decided, claimed)
            async with holding(self.backend, claimed):
                output = await self._run_on(Command(resume=resume), thread_id, decided)
        except Exception as exc:
            await self._unrun(claimed, exc)
            await self._failed(running, exc)
            raise
        await self._report(thread_id, decided)
        return await self._settled(thread_id, running, output)

    # -- helpers ---------------------------------------------------------------------------

    def _config(self, thread_id: str) -> RunnableConfig:
        return {"configurable": {"thread_id": thread_id}}

    async def _state(self, thread_id: str) -> StateSnapshot:
        try:
            return await self.graph.aget_state(self._config(thread_id))
        except NotImplementedError:  # a sync-only checkpointer such as SqliteSaver
            return await asyncio.to_thread(self.graph.get_state, self._config(thread_id))

    async def _invoke(
        self, graph_input: Any, thread_id: str, interrupt_before: Sequence[str] | None = None
    ) -> Any:
        config = self._config(thread_id)
        try:
            return await self.graph.ainvoke(graph_input, config, interrupt_before=interrupt_before)
        except NotImplementedError:  # a sync-only checkpointer such as SqliteSaver
            return await asyncio.to_thread(
                self.graph.invoke, graph_input, config, interrupt_before=interrupt_before
            )

    async def _run_on(
        self, resume: Command[Any], thread_id: str, decided: Mapping[str, Request]
    ) -> Any:
        """Resume the thread, the model reading signoff's words about each decided call.

        HumanInTheLoopMiddleware words a rejection, an expiry and an edit its own way, and
        has no setting for the text; every other integration tells the model
        :func:`~signoff.integrations.outcomes.denial` or the tool's result with
        :func:`~signoff.integrations.outcomes.edit_note`. So the resume stops before the
        agent's ``model`` node, the decided calls' ToolMessages are given signoff's text
        (same ids, so they replace the middleware's), and the run goes on from there.
        """
        if "model" not in self.graph.nodes or not any(_retold(r) for r in decided.values()):
            return await self._invoke(resume, thread_id)
        output = await self._invoke(resume, thread_id, interrupt_before=["model"])
        state = await self._state(thread_id)
        if state.interrupts or tuple(state.next) != ("model",):
            return output  # ended, or paused again, before the model read anything
        values = state.values if isinstance(state.values, Mapping) else {}
        by_call = {r.tool_call_id: r for r in decided.values() if isinstance(r, ApprovalRequest)}
        retold = []
        for message in values.get("messages", ()):
            request = (
                by_call.get(message.tool_call_id) if isinstance(message, ToolMessage) else None
            )
            if request is not None and _retold(request):
                retold.append(message.model_copy(update={"content": _told(request, message)}))
        if retold:
            try:
                await self.graph.aupdate_state(self._config(thread_id), {"messages": retold})
            except NotImplementedError:  # a sync-only checkpointer such as SqliteSaver
                await asyncio.to_thread(
                    self.graph.update_state, self._config(thread_id), {"messages": retold}
                )
        return await self._invoke(None, thread_id)

    def _asks(self, thread_id: str, item: Interrupt, state: StateSnapshot) -> list[GraphAsk]:
        value = item.value
        if not isinstance(value, Mapping):
            return []
        base: dict[str, Any] = {"session_id": thread_id, "expires_in": self.expires_in}
        if value.get("type") == "tool_approval":
            allowed = _allowed_from_schema(item.response_schema)
            call = str(value.get("tool_call_id"))
            return [self._tool_ask(item.id, 0, call, value, allowed, base)]
        if _is_batched(value):
            configs = {
                str(c.get("action_name")): tuple(c.get("allowed_decisions") or MIDDLEWARE_DECISIONS)
                for c in value.get("review_configs") or ()
            }
            actions = list(value["action_requests"])
            call_ids = _pair_calls(actions, state)
            return [
                self._tool_ask(
                    item.id,
                    n,
                    call_ids[n] or _derived_id(item.id, n),
                    action,
                    configs.get(str(action.get("name")), MIDDLEWARE_DECISIONS),
                    base,
                )
                for n, action in enumerate(actions)
            ]
        key = {"idempotency_key": _key(f"langgraph:{thread_id}:{item.id}")}
        if value.get("type") == "questions":
            allowed = tuple(str(a) for a in value.get("allowed_decisions") or ())
            signoff_allowed = _keep_reject([{"edit": "answer"}.get(a, a) for a in allowed])
            new = NewRequest.model_validate(
                {
                    **base,
                    **key,
                    "kind": "questions",
                    "prompt": value.get("prompt"),
                    "questions": value.get("questions"),
                    "context": value.get("context"),
                    "allowed_decisions": signoff_allowed or None,
                }
            )
            return [self._ask_ask(item, "questions", allowed, new)]
        if value.get("type") == "choice":
            new = NewRequest.model_validate(
                {
                    **base,
                    **key,
                    "kind": "choice",
                    "prompt": value.get("prompt"),
                    "options": value.get("options"),
                    "multi_select": value.get("multi_select"),
                    "allow_other": value.get("allow_other"),
                    "context": value.get("context"),
                }
            )
            return [self._ask_ask(item, "choice", ("choose", "reject"), new)]
        return []

    def _tool_ask(
        self,
        interrupt_id: str,
        position: int,
        tool_call_id: str,
        action: Mapping[str, Any],
        allowed: Sequence[str],
        base: Mapping[str, Any],
    ) -> GraphAsk:
        name = str(action.get("name"))
        args = dict(action.get("args") or {})
        signoff_allowed = _keep_reject(
            list(
                dict.fromkeys(
                    {"edit": "approve"}.get(a, a) for a in allowed if a in MIDDLEWARE_DECISIONS
                )
            )
        )
        new = NewRequest.model_validate(
            {
                **base,
                "kind": "approval",
                "tool_name": name,
                "tool_args": args,
                "tool_call_id": _key(tool_call_id),
                "allowed_decisions": signoff_allowed or None,
                "args_schema": self.tool_schemas.get(name),
                # a review without edit: LangGraph would refuse the edit and wedge the thread
                "editable": "edit" in allowed,
                "context": action.get("description"),
            }
        )
        return GraphAsk(
            interrupt_id=interrupt_id,
            kind="tool_call",
            position=position,
            tool_call_id=tool_call_id,
            tool_name=name,
            args=args,
            allowed=tuple(allowed),
            new_request=new,
        )

    def _ask_ask(
        self, item: Interrupt, kind: AskKind, allowed: tuple[str, ...], new: NewRequest
    ) -> GraphAsk:
        return GraphAsk(
            interrupt_id=item.id,
            kind=kind,
            position=0,
            tool_call_id=item.id,
            tool_name="ask_human",
            args=dict(item.value),
            allowed=allowed,
            new_request=new,
        )

    async def _decided(self, task: Task, wait: float) -> dict[str, Request] | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        decided: dict[str, Request] = {}
        for rid in task.request_ids:
            left = deadline - loop.time()
            if left > 0:
                request = await self.backend.wait(rid, left)
            else:
                request = await self.backend.get(rid)
            if request.status == "pending":
                return None
            decided[rid] = request
        return decided

    def _value(self, filed: _Filed, live: Interrupt, decided: Mapping[str, Request]) -> Any:
        requests = [decided[rid] for rid in filed.request_ids]
        if filed.kind == "batched":
            actions = list(live.value.get("action_requests") or ())
            if len(actions) != len(requests):
                raise InvalidRequest(
                    f"interrupt {filed.interrupt_id} asks about {len(actions)} calls but "
                    f"{len(requests)} were filed; file the thread again"
                )
            decisions = [
                middleware_decision(_approval(r), allowed)
                for r, allowed in zip(requests, filed.allowed, strict=True)
            ]
            return batch_response(actions, decisions, live.value.get("review_configs") or ())
        (request,) = requests
        if filed.kind == "tool_approval":
            return middleware_decision(_approval(request), filed.allowed[0])
        if filed.kind == "questions":
            return _questions_value(request)
        return _choice_value(request)

    async def _claim(self, decided: Mapping[str, Request], claimed: list[str]) -> None:
        """Claim approved calls before they run, so no other resumer runs them too.

        Each id claimed is added to ``claimed`` at once, so a failure later in the same
        resume can report it rather than leave it executing.
        """
        for rid, request in decided.items():
            if isinstance(request, ApprovalRequest) and request.status == "approved":
                args = (
                    request.approved_args
                    if request.approved_args is not None
                    else request.tool_args
                )
                await self.backend.claim(rid, args)
                claimed.append(rid)
            elif isinstance(request, ApprovalRequest) and request.status == "executing":
                raise InvalidTransition(
                    f"the call of request {rid} was claimed already; whether it ran is unknown, "
                    "so it is not run again",
                    status="executing",
                )

    async def _unrun(self, claimed: Sequence[str], exc: BaseException) -> None:
        """Report the claimed calls of a resume LangGraph refused (or that raised) failed.

        The reason is LangGraph's own; whatever cannot be reported now is failed by the
        server when its claim's lease ends, and is never run again.
        """
        reason = f"LangGraph did not complete the call: {type(exc).__name__}: {exc}"[:20_000]
        for rid in claimed:
            with contextlib.suppress(SignoffError):
                await self.backend.fail(rid, reason)

    async def _report(self, thread_id: str, decided: Mapping[str, Request]) -> None:
        """Record each claimed call's result, read from its ToolMessage in the thread."""
        claimed = [r for r in decided.values() if isinstance(r, ApprovalRequest)]
        claimed = [r for r in claimed if r.status == "approved"]
        if not claimed:
            return
        state = await self._state(thread_id)
        values = state.values if isinstance(state.values, Mapping) else {}
        results = {
            m.tool_call_id: m for m in values.get("messages", ()) if isinstance(m, ToolMessage)
        }
        for request in claimed:
            message = results.get(request.tool_call_id or "")
            if message is None:
                await self.backend.fail(request.id, "the graph reported no result for this call")
            elif message.status == "error":
                await self.backend.fail(request.id, _output(message.content, request)[:20_000])
            else:
                await self.backend.complete(request.id, _output(message.content, request)[:20_000])

    async def _settled(self, thread_id: str, task: Task | None, output: Any) -> Resumed:
        """After a run: Paused on what it stopped on, or Completed."""
        state = await self._state(thread_id)
        if state.interrupts:
            paused = await self._file(thread_id, task)
            if paused is not None:
                return Resumed(task=paused, output=output, interrupts=state.interrupts)
        if task is None:
            task = await self.tasks.create_task(
                agent=AGENT_NAME,
                user=self.user,
                prompt=f"LangGraph thread {thread_id}",
                session_id=thread_id,
                status="Completed",
            )
        else:
            task = await self.tasks.save_task(
                task.model_copy(update={"status": "Completed", "pending": ()})
            )
        return Resumed(task=task, output=output, interrupts=state.interrupts)

    async def _failed(self, running: Task, exc: BaseException) -> None:
        text = f"{type(exc).__name__}: {exc}"
        item = HistoryItem(kind="error", at=self.clock(), text=text)
        failed = running.model_copy(
            update={"status": "Failed", "error": text, "history": (*running.history, item)}
        )
        await self.tasks.save_task(failed)


_EXECUTED = " Executed instead: "
"""In HumanInTheLoopMiddleware's notice before an edited call's result."""
_TOOL_RESPONSE = "\n\nTool response:"
"""Where that notice ends and the tool's own result begins."""


def _ran_args(request: ApprovalRequest) -> dict[str, JsonValue]:
    return dict(request.approved_args if request.approved_args is not None else request.tool_args)


def _retold(request: Request) -> bool:
    """Whether the model is told about this call in signoff's words, not the middleware's."""
    if not isinstance(request, ApprovalRequest):
        return False
    if request.status in ("rejected", "expired", "canceled"):
        return True
    return request.status == "approved" and _ran_args(request) != request.tool_args


def _own_content(content: Any) -> Any:
    """A ToolMessage's content without the middleware's edit notice in front of it."""
    if isinstance(content, str):
        head, found, rest = content.partition(_TOOL_RESPONSE)
        if found and _EXECUTED in head:
            return rest.removeprefix("\n")
        return "" if _EXECUTED in content and content.endswith("}.") else content
    if isinstance(content, list) and content and _EXECUTED in str(content[0]):
        return content[1:]
    return content


def _told(request: ApprovalRequest, message: ToolMessage) -> Any:
    """What the model reads about a decided call: signoff's denial, or result and edit note."""
    if request.status != "approved":
        return denial(request)
    note = edit_note(_ran_args(request), request.tool_args)
    content = _own_content(message.content)
    if isinstance(content, list):
        return [*content, {"type": "text", "text": note}]
    return f"{content}\n\n{note}" if content else note


def _output(content: Any, request: ApprovalRequest) -> str:
    """A call's result as reported to signoff: the tool's own, without any note."""
    own = _own_content(content)
    if isinstance(own, list):
        own = [b for b in own if not (isinstance(b, Mapping) and b.get("text") == _note(request))]
        return str(own)
    return str(own).removesuffix(_note(request)).rstrip("\n") if _note(request) else str(own)


def _note(request: ApprovalRequest) -> str:
    ran = _ran_args(request)
    return edit_note(ran, request.tool_args) if ran != request.tool_args else ""


def _keep_reject(allowed: list[str]) -> list[str]:
    """A graph's narrowing, with reject kept: only policy takes reject away from a person."""
    return [*allowed, "reject"] if allowed and "reject" not in allowed else allowed


def _is_batched(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("action_requests"), list)


def _allowed_from_schema(schema: Any) -> tuple[str, ...]:
    """The decision types a per-call interrupt's response_schema accepts."""
    if not isinstance(schema, Mapping):
        return MIDDLEWARE_DECISIONS
    mapping = (schema.get("discriminator") or {}).get("mapping")
    if isinstance(mapping, Mapping):
        return tuple(str(k) for k in mapping)
    const = ((schema.get("properties") or {}).get("type") or {}).get("const")
    return (str(const),) if const else MIDDLEWARE_DECISIONS


def _pair_calls(actions: Sequence[Mapping[str, Any]], state: StateSnapshot) -> list[str | None]:
    """Each batched action's tool_call_id: the last AIMessage's calls, in order, by name."""
    values = state.values if isinstance(state.values, Mapping) else {}
    last = last_ai_message(values.get("messages", ()))
    calls = list(last.tool_calls) if last is not None else []
    out: list[str | None] = []
    at = 0
    for action in actions:
        while at < len(calls) and calls[at]["name"] != action.get("name"):
            at += 1
        out.append(calls[at]["id"] if at < len(calls) else None)
        at += 1
    return out


def _derived_id(interrupt_id: str, position: int) -> str:
    return f"{interrupt_id}:{position}"


def _key(text: str) -> str:
    if len(text) <= KEY_LIMIT:
        return text
    return "langgraph:" + hashlib.sha256(text.encode()).hexdigest()


def _approval(request: Request) -> ApprovalRequest:
    if not isinstance(request, ApprovalRequest):
        raise InvalidRequest(f"request {request.id} is a {request.kind} request, not an approval")
    return request


def _questions_value(request: Request) -> dict[str, JsonValue]:
    """The ask_human questions resume value a settled questions request stands for."""
    if not isinstance(request, QuestionsRequest):
        raise InvalidRequest(f"request {request.id} is not a questions request")
    decision = request.decision.decision if request.decision is not None else None
    if request.status == "approved" and isinstance(decision, Answer):
        return {"type": "edit", "feedback": decision.feedback, "answers": dict(decision.answers)}
    if request.status == "approved" and isinstance(decision, Approve):
        return {"type": "approve"}
    reason = decision.reason if isinstance(decision, Reject) else ""
    return {"type": "reject", "reason": reason or f"No decision: the request {request.status}."}


def _choice_value(request: Request) -> dict[str, JsonValue]:
    """The ask_human choice resume value a settled choice request stands for."""
    if not isinstance(request, ChoiceRequest):
        raise InvalidRequest(f"request {request.id} is not a choice request")
    record = request.decision
    if request.status == "approved" and record is not None:
        extra = (record.extra or {}).get("choices")
        if isinstance(extra, list):
            return {"type": "choose", "choices": [str(c) for c in extra]}
        chose = record.decision
        if isinstance(chose, Choose):
            chosen = chose.choices or ((chose.choice,) if chose.choice else ())
            return {"type": "choose", "choices": list(chosen)}
    decision = record.decision if record is not None else None
    reason = decision.reason if isinstance(decision, Reject) else ""
    return {"type": "reject", "reason": reason or f"No decision: the request {request.status}."}


def _history(request: Request, at: datetime) -> HistoryItem:
    """The decision on one request, for people reading the Task."""
    record = request.decision
    by = record.decided_by if record is not None else None
    tool = request.tool_name if isinstance(request, ApprovalRequest) else None
    call = request.tool_call_id if isinstance(request, ApprovalRequest) else None
    base: dict[str, Any] = {
        "at": record.decided_at if record is not None else at,
        "by": by,
        "tool_name": tool,
        "tool_call_id": call,
        "request_id": request.id,
    }
    if request.status == "approved":
        if isinstance(request, ApprovalRequest) and request.approved_args not in (
            None,
            request.tool_args,
        ):
            return HistoryItem(
                kind="edit", args=request.approved_args, text="approved with edits", **base
            )
        return HistoryItem(kind="approval", text="approved", **base)
    decision = record.decision if record is not None else None
    text = getattr(decision, "reason", "") or getattr(decision, "feedback", "") or request.status
    return HistoryItem(kind="rejection", text=text, **base)
