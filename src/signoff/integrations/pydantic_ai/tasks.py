"""Hosted agent runs (tasks): pause when a call needs a person, persist, resume by request.

A :class:`TaskRunner` runs registered pydantic-ai agents inside the server. A run that
ends with deferred calls files one request per call and stores the task ``Paused`` with
its message history; nothing is held in memory. When every one of those requests is
decided (by ``POST /resume/{request_id}``, the web inbox, the CLI: whichever) the task
runs again: approved calls run (each claimed first, so never twice), rejected ones reach
the model as denials and a respond's text as the call's result; if people rejected, and
neither approved nor responded to anything, the task is ``Canceled`` (calls denied by
policy or left to expire just reach the model as denials).

Only one resumer wins a pause: the Paused → Running change is a conditional write. A task
found ``Running`` at startup died with its server; it is marked ``Failed`` and a call it
had claimed is failed too, never re-run silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import JsonValue

from signoff.backends import LocalBackend
from signoff.domain.decisions import DecisionRecord
from signoff.domain.policies import Policy
from signoff.domain.principals import Principal
from signoff.domain.requests import ApprovalRequest, Request
from signoff.domain.tasks import HistoryItem, PendingCall, Task
from signoff.domain.transitions import check_may_decide
from signoff.errors import InvalidRequest, InvalidTransition, NotAllowed, TaskNotFound
from signoff.hosting import register_host
from signoff.integrations.pydantic_ai.gate import (
    SignoffGate,
    decided_results,
    file_deferred,
)
from signoff.service import Service

try:
    from pydantic_ai import Agent, DeferredToolRequests
    from pydantic_ai.agent import AgentRunResult
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_core import to_jsonable_python
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "hosted agent runs need pydantic-ai: pip install 'signoff[pydantic-ai]'"
    ) from exc

__all__ = ["TaskRunner"]

logger = logging.getLogger("signoff.tasks")

Action = Literal["approve", "reject", "edit"]


def _messages_json(messages: Sequence[ModelMessage]) -> str:
    return ModelMessagesTypeAdapter.dump_json(list(messages)).decode()


def _items(messages: Sequence[ModelMessage], at: datetime) -> list[HistoryItem]:
    """What people read of an agent's messages: prompts, replies, tool calls and results."""
    items: list[HistoryItem] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                items.append(HistoryItem(kind="user", at=at, text=part.content))
            elif isinstance(part, TextPart):
                items.append(HistoryItem(kind="assistant", at=at, text=part.content))
            elif isinstance(part, ToolCallPart):
                items.append(
                    HistoryItem(
                        kind="tool_call",
                        at=at,
                        tool_name=part.tool_name,
                        tool_call_id=part.tool_call_id,
                        args=to_jsonable_python(part.args_as_dict(), fallback=str),
                    )
                )
            elif isinstance(part, ToolReturnPart):
                items.append(
                    HistoryItem(
                        kind="tool_result",
                        at=at,
                        tool_name=part.tool_name,
                        tool_call_id=part.tool_call_id,
                        text=part.model_response_str(),
                    )
                )
    return items


def _decision_item(call: PendingCall, request: Request) -> HistoryItem:
    record: DecisionRecord | None = request.decision
    at = record.decided_at if record is not None else request.updated_at
    by = record.decided_by if record is not None else None
    base: dict[str, Any] = {
        "at": at,
        "by": by,
        "tool_name": call.tool_name,
        "tool_call_id": call.tool_call_id,
        "request_id": request.id,
    }
    if request.status == "approved" and isinstance(request, ApprovalRequest):
        approved = request.approved_args or call.args
        if approved != call.args:
            return HistoryItem(kind="edit", args=approved, text="approved with edits", **base)
        return HistoryItem(kind="approval", text="approved", **base)
    if record is None:
        return HistoryItem(kind="rejection", text=f"no decision ({request.status})", **base)
    decision = record.decision
    text = getattr(decision, "reason", "") or getattr(decision, "feedback", "") or ""
    return HistoryItem(kind="rejection", text=text or request.status, **base)


class TaskRunner:
    """Runs registered agents as durable tasks over one service."""

    def __init__(
        self,
        service: Service,
        agents: Mapping[str, Agent[Any, Any]],
        *,
        policy: Policy | None = None,
        settle_timeout: float = 300.0,
    ) -> None:
        self.service = service
        self.agents = dict(agents)
        # the service's own policy when it has one, so gating and auto-decisions agree
        self.policy = policy or service.policy or Policy.load()
        self.settle_timeout = settle_timeout
        self._watcher: asyncio.Task[None] | None = None
        self._running: dict[str, asyncio.Task[Task | None]] = {}

    def principal(self, agent_name: str) -> Principal:
        """Who a hosted agent's requests are filed as."""
        return Principal(name=f"agent:{agent_name}", role="agent")

    def _agent(self, name: str) -> Agent[Any, Any]:
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self.agents)) or "none"
            raise TaskNotFound(f"agent {name!r} (registered: {known})")
        return agent

    def _gate(self, task: Task) -> SignoffGate:
        return SignoffGate(
            self._backend(task), session_id=task.session_id, mode="defer", policy=self.policy
        )

    def _backend(self, task: Task) -> LocalBackend:
        """The hosted agent, filing requests that record who started its run."""
        return LocalBackend(self.service, self.principal(task.agent), started_by=task.user)

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Recover from a previous server's death, then follow decisions."""
        await self.recover()
        self._watcher = asyncio.create_task(self._watch(), name="signoff-tasks")

    async def stop(self) -> None:
        """Stop following decisions; runs in flight finish or are cancelled."""
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None
        for running in list(self._running.values()):
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await running

    async def recover(self) -> None:
        """Fail tasks that died Running; continue paused ones whose decisions all came in."""
        for task in await self.service.list_tasks(status="Running", limit=10_000):
            if task.agent not in self.agents:
                continue  # another program's record (e.g. a chat session) on this database
            reason = "the server stopped while this task was running; nothing is re-run"
            for call in task.pending:
                request = await self.service.get(call.request_id)
                if request.status == "executing":
                    with contextlib.suppress(InvalidTransition):
                        await self.service.fail(
                            request.id,
                            self.principal(task.agent),
                            "the server stopped during this call; whether it finished is "
                            "unknown, so it is not run again",
                        )
            with contextlib.suppress(InvalidTransition):  # another server got there first
                await self._fail(task, reason)
        for task in await self.service.list_tasks(status="Paused", limit=10_000):
            if task.agent in self.agents:
                await self._spawn_continue(task.id)

    async def _watch(self) -> None:
        subscription = self.service.bus.subscribe()
        try:
            while True:
                event = await subscription.get(timeout=30)
                if event is None:
                    continue
                if event.request.status == "pending" or event.type == "created":
                    continue
                task = await self.service.find_task(event.request.id)
                if task is not None and task.status == "Paused" and task.agent in self.agents:
                    await self._spawn_continue(task.id)
        finally:
            subscription.close()

    async def _spawn_continue(self, task_id: str) -> None:
        if task_id in self._running and not self._running[task_id].done():
            return
        running = asyncio.create_task(self._continue(task_id), name=f"signoff-task-{task_id}")
        self._running[task_id] = running
        running.add_done_callback(lambda _: self._running.pop(task_id, None))

    # -- the operations ------------------------------------------------------------------

    async def run(
        self, agent_name: str, prompt: str, principal: Principal, session_id: str | None = None
    ) -> Task:
        """Start a task and run it until it completes, fails or pauses."""
        agent = self._agent(agent_name)
        if not prompt.strip() or len(prompt) > 100_000:
            raise InvalidRequest("prompt: must be 1 to 100,000 characters")
        task = await self.service.create_task(
            agent=agent_name, user=principal.name, prompt=prompt, session_id=session_id
        )
        return await self._advance(task, agent, prompt=prompt, messages=None, results=None)

    async def get(self, task_id: str, principal: Principal) -> Task:
        """A task the principal may see (its user, approvers and admins)."""
        return await self.service.get_task(task_id, principal)

    async def resume(
        self,
        request_id: str,
        action: Action,
        principal: Principal,
        *,
        reason: str = "",
        args: Mapping[str, JsonValue] | None = None,
    ) -> Task:
        """Decide one of a paused task's requests and return the task's next state.

        Only that request is decided (through :meth:`Service.decide`, as in the inbox); a
        task with other calls still pending stays ``Paused`` until they are decided too.
        An agent is refused first (NotAllowed), even on its own run, whatever the id.
        """
        check_may_decide(principal)
        task = await self.service.find_task(request_id, principal)
        if task is None or task.agent not in self.agents:
            raise TaskNotFound(request_id)
        request = await self.service.get(request_id)
        allowed = principal.name == task.user or principal.role == "admin"
        if not allowed and principal.name not in request.approvers:
            raise NotAllowed(f"{principal.name} may not resume a task started by {task.user}")
        if task.status != "Paused" or request_id not in task.request_ids:
            raise InvalidTransition(f"task {task.id} is {task.status}, not paused on this request")
        # this call only, as the inbox decides it: the task goes on once all its calls are
        # decided, by the same _continue an inbox decision's event reaches
        if action == "reject":
            await self.service.decide(request_id, {"type": "reject", "reason": reason}, principal)
        elif action == "edit":
            if args is None:
                raise InvalidRequest("args: an edit needs the arguments to run")
            await self.service.decide(
                request_id, {"type": "approve", "args": dict(args)}, principal
            )
        else:
            await self.service.decide(request_id, {"type": "approve"}, principal)
        await self._spawn_continue(task.id)
        return await self.settle(task.id)

    async def settle(self, task_id: str) -> Task:
        """The task once it is no longer running (or after ``settle_timeout``)."""
        running = self._running.get(task_id)
        if running is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(running), self.settle_timeout)
        deadline = asyncio.get_running_loop().time() + self.settle_timeout
        while True:
            task = await self.service.get_task(task_id)
            if task.status != "Running" or asyncio.get_running_loop().time() > deadline:
                return task
            await asyncio.sleep(0.1)

    # -- running -------------------------------------------------------------------------

    async def _continue(self, task_id: str) -> Task | None:
        """Resume a paused task if all its requests are decided; one resumer wins."""
        try:
            task = await self.service.get_task(task_id)
        except TaskNotFound:
            return None
        if task.status != "Paused":
            return task
        requests = [await self.service.get(p.request_id) for p in task.pending]
        if any(r.status == "pending" for r in requests):
            return task
        decisions = [_decision_item(p, r) for p, r in zip(task.pending, requests, strict=True)]
        history = (*task.history, *decisions)
        by_people = [r.decision.decision for r in requests if r.decision and r.decision.by_person]
        rejected_by_people = any(d.type == "reject" for d in by_people)
        # a respond is a person's answer to the model: the run goes on to give it to the model
        responded = any(d.type == "respond" for d in by_people)
        approved = any(r.status == "approved" for r in requests)
        if rejected_by_people and not responded and not approved:
            reasons = "; ".join(d.text for d in decisions if d.text)
            canceled = task.model_copy(
                update={"status": "Canceled", "error": reasons or "rejected", "history": history}
            )
            try:
                return await self.service.save_task(canceled)
            except InvalidTransition:  # another resumer won
                return task
        running = task.model_copy(update={"status": "Running", "history": history})
        try:
            running = await self.service.save_task(running)
        except InvalidTransition:
            return task  # another resumer won
        agent = self._agent(task.agent)
        calls = [
            ToolCallPart(p.tool_name, dict(p.args), tool_call_id=p.tool_call_id)
            for p in task.pending
        ]
        deferred = DeferredToolRequests(approvals=calls)
        backend = self._backend(task)
        try:
            results = await decided_results(
                deferred, list(zip(calls, requests, strict=True)), backend, agent=agent
            )
        except Exception as exc:
            return await self._fail(running, exc)
        messages = ModelMessagesTypeAdapter.validate_json(task.messages)
        return await self._advance(running, agent, prompt=None, messages=messages, results=results)

    async def _fail(self, task: Task, why: BaseException | str) -> Task:
        """Store ``task`` Failed, with why (an error or a reason) in its error and history."""
        text = why if isinstance(why, str) else f"{type(why).__name__}: {why}"
        failed = task.model_copy(
            update={
                "status": "Failed",
                "error": text,
                "history": (
                    *task.history,
                    HistoryItem(kind="error", at=self.service.clock(), text=text),
                ),
            }
        )
        return await self.service.save_task(failed)

    async def _advance(
        self,
        task: Task,
        agent: Agent[Any, Any],
        *,
        prompt: str | None,
        messages: list[ModelMessage] | None,
        results: Any,
    ) -> Task:
        """Run the agent once from where the task is; store it Completed, Paused or Failed."""
        output_type = [agent.output_type, DeferredToolRequests]
        before = len(messages or [])
        try:
            result: AgentRunResult[Any] = await agent.run(
                prompt,
                message_history=messages,
                deferred_tool_results=results,
                output_type=output_type,
                capabilities=[self._gate(task)],
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("task %s failed: %s", task.id, exc)
            return await self._fail(task, exc)
        now = self.service.clock()
        all_messages = result.all_messages()
        history = (*task.history, *_items(all_messages[before:], now))
        if isinstance(result.output, DeferredToolRequests):
            backend = self._backend(task)
            try:
                _, asked = await file_deferred(
                    result.output,
                    backend,
                    session_id=task.session_id,
                    messages=all_messages,
                    file_denied=True,  # on the record; the service's policy rejects them
                    agent=agent,
                )
            except Exception as exc:
                return await self._fail(task, exc)
            pending = tuple(
                PendingCall(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    args=to_jsonable_python(call.args_as_dict(), fallback=str),
                    request_id=rid,
                )
                for call, rid in asked
            )
            paused = task.model_copy(
                update={
                    "status": "Paused",
                    "messages": _messages_json(all_messages),
                    "pending": pending,
                    "history": history,
                }
            )
            paused = await self.service.save_task(paused)
            # decided before the task was stored (policy, a standing grant, a quick person):
            # no event will find it now, so go on here
            return await self._continue(paused.id) or paused
        completed = task.model_copy(
            update={
                "status": "Completed",
                "messages": _messages_json(all_messages),
                "pending": (),
                "history": history,
                "output": to_jsonable_python(result.output, fallback=str),
            }
        )
        return await self.service.save_task(completed)


register_host(TaskRunner)
