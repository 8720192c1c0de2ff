"""Hosted agent runs (tasks): pause when a call needs a person, persist, resume by request.

A :class:`TaskRunner` runs registered pydantic-ai agents inside the server. A run that
ends with deferred calls files one request per call and stores the task ``Paused`` with
its message history; nothing is held in memory. When every one of those requests is
decided (by ``POST /resume/{request_id}``, the web inbox, the CLI: whichever) the task
runs again: approved calls run (each claimed first, so never twice), rejected ones reach
the model as denials with the person's reason, and a respond's text as the call's result;
the run goes on either way. The deferred tools of ``human.deferred_human_toolset`` pause
the same way on a ``choice`` or ``questions`` request, and resume with what the person
chose or answered. A person's follow-up message runs a ``Completed`` task again, with its
history.

Every run streams AG-UI events (:mod:`signoff.integrations.pydantic_ai.agui`): followers
get them live, and the save that ends a run segment stores them on the task.

Only one resumer wins a pause: the Paused → Running change is a conditional write. A task
found ``Running`` at startup died with its server; it is marked ``Failed`` (its stream
ends with RUN_ERROR) and a call it had claimed is failed too, never re-run silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from typing import Any, Literal

from pydantic import JsonValue

from signoff.backends import LocalBackend
from signoff.domain.policies import Policy
from signoff.domain.principals import Principal
from signoff.domain.requests import ApprovalRequest
from signoff.domain.tasks import HistoryItem, PendingCall, Task, TaskEvent
from signoff.domain.transitions import check_may_decide
from signoff.errors import InvalidRequest, InvalidTransition, NotAllowed, TaskNotFound
from signoff.hosting import FollowUntil, register_host
from signoff.integrations.pydantic_ai.agui import (
    Segment,
    TaskStream,
    decision_event,
    interrupt,
    model_events,
    open_run,
    run_error,
    run_finished,
    run_interrupted,
    run_started,
    user_message,
)
from signoff.integrations.pydantic_ai.gate import (
    SignoffGate,
    decided_results,
    file_deferred,
)
from signoff.integrations.pydantic_ai.history import decision_item, history_items, messages_json
from signoff.integrations.pydantic_ai.human import DEFERRED_HUMAN_TOOLS, human_request_fields
from signoff.integrations.pydantic_ai.streaming import streaming_stand_in
from signoff.service import Service

try:
    from ag_ui.core import BaseEvent
    from pydantic_ai import Agent, AgentRunResultEvent, DeferredToolRequests
    from pydantic_ai.agent import AgentRunResult
    from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ToolCallPart
    from pydantic_core import to_jsonable_python
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "hosted agent runs need pydantic-ai: pip install 'signoff[pydantic-ai]'"
    ) from exc

__all__ = ["TaskRunner"]

logger = logging.getLogger("signoff.tasks")

Action = Literal["approve", "reject", "edit"]

_PROMPT_LIMIT = 100_000


def _check_prompt(prompt: str) -> None:
    if not prompt.strip() or len(prompt) > _PROMPT_LIMIT:
        raise InvalidRequest("prompt: must be 1 to 100,000 characters")


def _new_run_id() -> str:
    return f"run_{uuid.uuid4().hex}"


class TaskRunner:
    """Runs registered agents as durable tasks over one service."""

    def __init__(
        self,
        service: Service,
        agents: Mapping[str, Agent[Any, Any]],
        *,
        policy: Policy | None = None,
        settle_timeout: float = 300.0,
        base_url: str = "",
    ) -> None:
        self.service = service
        self.agents = dict(agents)
        # the service's own policy when it has one, so gating and auto-decisions agree
        self.policy = policy or service.policy or Policy.load()
        self.settle_timeout = settle_timeout
        self.base_url = base_url
        """Where an interrupt's link to its request points (the server's public URL)."""
        self.stream = TaskStream(service)
        self._run_ids: dict[str, str] = {}
        self._watcher: asyncio.Task[None] | None = None
        self._running: dict[str, asyncio.Task[Task | None]] = {}
        self._again: set[str] = set()
        self._stopping = False

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
        self._stopping = False
        await self.recover()
        self._watcher = asyncio.create_task(self._watch(), name="signoff-tasks")

    async def stop(self) -> None:
        """Stop following decisions; runs in flight finish or are cancelled."""
        self._stopping = True
        self._again.clear()
        self._run_ids.clear()
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
            if task.agent not in self.agents or task.id in self._running:
                continue  # another program's record (e.g. a chat session), or ours, running
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
            # its live events died with it: the Failed save is a segment of its own, with
            # ids above any it sent, and a run that was open ends in RUN_ERROR
            segment = Segment(task.id, task.version + 1)
            if open_run(task.events) is None:
                segment.emit(run_started(task.id, _new_run_id()))
            with contextlib.suppress(InvalidTransition):  # another server got there first
                await self._fail(task, segment, reason)
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

    def _spawn(self, task_id: str, work: Coroutine[Any, Any, Task | None]) -> None:
        running = asyncio.create_task(work, name=f"signoff-task-{task_id}")
        self._running[task_id] = running

        def done(_: object) -> None:
            if self._running.get(task_id) is running:
                del self._running[task_id]
            # a decision came in while this ran: look at the task again
            if task_id in self._again and not self._stopping:
                self._again.discard(task_id)
                self._spawn(task_id, self._continue(task_id))

        running.add_done_callback(done)

    async def _spawn_continue(self, task_id: str) -> None:
        running = self._running.get(task_id)
        if running is not None and not running.done():
            self._again.add(task_id)
            return
        self._spawn(task_id, self._continue(task_id))

    # -- the operations ------------------------------------------------------------------

    async def run(
        self, agent_name: str, prompt: str, principal: Principal, session_id: str | None = None
    ) -> Task:
        """Start a task and run it until it completes, fails or pauses."""
        task = await self.begin(agent_name, prompt, principal, session_id=session_id)
        return await self.settle(task.id)

    async def begin(
        self,
        agent_name: str,
        prompt: str,
        principal: Principal,
        *,
        session_id: str | None = None,
        task_id: str | None = None,
        run_id: str | None = None,
        message_id: str | None = None,
    ) -> Task:
        """Create the task (id ``task_id`` when the client names its thread, else a new one)
        and start its first run in the background; returns it as created (Running).

        ``run_id`` and ``message_id`` name the run and the prompt's message in its events
        (server-made when None). A ``task_id`` already taken is InvalidTransition (409), and
        nothing starts.
        """
        agent = self._agent(agent_name)
        _check_prompt(prompt)
        task = await self.service.create_task(
            agent=agent_name,
            user=principal.name,
            prompt=prompt,
            session_id=session_id,
            task_id=task_id,
        )
        segment = self._open(task, run_id, prompt, message_id)
        work = self._advance(task, agent, segment, prompt=prompt, messages=None, results=None)
        self._spawn(task.id, work)
        return task

    async def follow_up(
        self,
        task_id: str,
        prompt: str,
        principal: Principal,
        *,
        run_id: str | None = None,
        message_id: str | None = None,
    ) -> Task:
        """Continue a Completed task with a new message, keeping its history, in the
        background (Completed -> Running; InvalidTransition for any other status).

        Only the task's user may: TaskNotFound for whoever may not see it, NotAllowed for
        the others who may.
        """
        _check_prompt(prompt)
        task = await self.service.get_task(task_id, principal)
        if task.agent not in self.agents:
            raise TaskNotFound(task_id)
        if principal.name != task.user:
            raise NotAllowed(f"only {task.user}, who started task {task.id}, may follow it up")
        if task.status != "Completed":
            raise InvalidTransition(
                f"task {task.id} is {task.status}; only a Completed task takes a new message",
                status=task.status,
            )
        agent = self._agent(task.agent)
        running = await self.service.save_task(
            task.model_copy(update={"status": "Running", "output": None})
        )
        segment = self._open(running, run_id, prompt, message_id)
        messages = ModelMessagesTypeAdapter.validate_json(task.messages)
        work = self._advance(
            running, agent, segment, prompt=prompt, messages=messages, results=None
        )
        self._spawn(task.id, work)
        return running

    def _open(self, task: Task, run_id: str | None, prompt: str, message_id: str | None) -> Segment:
        """The live segment of a run a person's message starts: RUN_STARTED, the message."""
        segment = self.stream.begin(task)
        segment.emit(run_started(task.id, run_id or _new_run_id()))
        for event in user_message(prompt, message_id):
            segment.emit(event)
        return segment

    def name_next_run(self, task_id: str, run_id: str | None) -> None:
        """The next run this runner starts for the task (the one a resume starts) is
        ``run_id``, used once by the next segment that begins here (None: forget it)."""
        if run_id is None:
            self._run_ids.pop(task_id, None)
        else:
            self._run_ids[task_id] = run_id

    def last_event_id(self, task: Task) -> str | None:
        """The id of the task's newest event (stored or live), None when it has none."""
        return self.stream.last_event_id(task)

    def follow(
        self, task: Task, after: str | None, *, until: FollowUntil
    ) -> AsyncIterator[TaskEvent]:
        """Every event of ``task`` after id ``after``, stored then live, none twice
        (see :meth:`signoff.hosting.HostedAgents.follow`)."""
        return self.stream.follow(task, after, until=until)

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
        deadline = asyncio.get_running_loop().time() + self.settle_timeout
        while True:
            running = self._running.get(task_id)
            if running is not None:
                left = max(0.0, deadline - asyncio.get_running_loop().time())
                with contextlib.suppress(Exception):  # (asyncio.timeout: see bus/postgres.py)
                    async with asyncio.timeout(left):
                        await asyncio.shield(running)
            task = await self.service.get_task(task_id)
            if task.status != "Running" or asyncio.get_running_loop().time() > deadline:
                return task
            await asyncio.sleep(0.05)

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
        decisions = [decision_item(p, r) for p, r in zip(task.pending, requests, strict=True)]
        history = (*task.history, *decisions)
        running = task.model_copy(update={"status": "Running", "history": history})
        try:
            running = await self.service.save_task(running)
        except InvalidTransition:
            return task  # another resumer won
        segment = self.stream.begin(running)
        run_id = self._run_ids.pop(task.id, None) or _new_run_id()
        # a pause decided as it was filed (policy, a standing grant) goes on in the same run
        if open_run(task.events) is None:
            segment.emit(run_started(task.id, run_id))
        for call, request in zip(task.pending, requests, strict=True):
            segment.emit(decision_event(call, request))
        agent = self._agent(task.agent)
        parts = [
            ToolCallPart(p.tool_name, dict(p.args), tool_call_id=p.tool_call_id)
            for p in task.pending
        ]
        # a choice or questions request answers a deferred human tool's call, not an approval
        decided = list(zip(parts, requests, strict=True))
        deferred = DeferredToolRequests(
            approvals=[c for c, r in decided if isinstance(r, ApprovalRequest)],
            calls=[c for c, r in decided if not isinstance(r, ApprovalRequest)],
        )
        try:
            results = await decided_results(deferred, decided, self._backend(task), agent=agent)
        except Exception as exc:
            return await self._fail(running, segment, exc)
        messages = ModelMessagesTypeAdapter.validate_json(task.messages)
        return await self._advance(
            running, agent, segment, prompt=None, messages=messages, results=results
        )

    async def _end(
        self, task: Task, segment: Segment, update: dict[str, Any], last: BaseEvent | None
    ) -> Task:
        """Store the segment's end: ``task`` changed by ``update``, with the segment's events
        and ``last`` (the run's end, if it ends), which followers get once it is stored."""
        final = segment.stamp(last) if last is not None else None
        events = (*task.events, *segment.events, *([final] if final is not None else []))
        try:
            saved = await self.service.save_task(
                task.model_copy(update={**update, "events": events})
            )
            if final is not None:
                segment.publish(final)
            return saved
        finally:
            self.stream.end(segment)

    async def _fail(self, task: Task, segment: Segment, why: BaseException | str) -> Task:
        """Store ``task`` Failed, with why (an error or a reason) in its error and history."""
        text = why if isinstance(why, str) else f"{type(why).__name__}: {why}"
        update = {
            "status": "Failed",
            "error": text,
            "history": (
                *task.history,
                HistoryItem(kind="error", at=self.service.clock(), text=text),
            ),
        }
        return await self._end(task, segment, update, run_error(text))

    async def _model_run(
        self,
        task: Task,
        agent: Agent[Any, Any],
        segment: Segment,
        run_id: str,
        *,
        prompt: str | None,
        messages: list[ModelMessage] | None,
        results: Any,
    ) -> AgentRunResult[Any]:
        """Run the agent once as run ``run_id``, streaming its events into ``segment``; its
        result."""
        found: list[AgentRunResult[Any]] = []
        events: contextlib.AbstractAsyncContextManager[AsyncIterator[Any]]
        events = agent.run_stream_events(
            prompt,
            message_history=messages,
            deferred_tool_results=results,
            output_type=[agent.output_type, DeferredToolRequests],
            capabilities=[self._gate(task)],
            model=streaming_stand_in(agent),
        )
        async with events as native:

            async def watched() -> AsyncIterator[Any]:
                async for event in native:
                    if isinstance(event, AgentRunResultEvent):
                        found.append(event.result)
                    yield event

            async for event in model_events(task.id, run_id, watched()):
                segment.emit(event)
        if not found:
            raise RuntimeError("the agent's run ended without a result")
        return found[0]

    async def _advance(
        self,
        task: Task,
        agent: Agent[Any, Any],
        segment: Segment,
        *,
        prompt: str | None,
        messages: list[ModelMessage] | None,
        results: Any,
    ) -> Task:
        """Run the agent once from where the task is; store it Completed, Paused or Failed."""
        before = len(messages or [])
        # the run the segment opened, or the one a pause decided as filed left open
        run_id = open_run([*task.events, *segment.events]) or _new_run_id()
        try:
            result = await self._model_run(
                task, agent, segment, run_id, prompt=prompt, messages=messages, results=results
            )
        except asyncio.CancelledError:
            self.stream.end(segment)  # the task stays Running: recover() fails it
            raise
        except Exception as exc:
            logger.warning("task %s failed: %s", task.id, exc)
            return await self._fail(task, segment, exc)
        now = self.service.clock()
        all_messages = result.all_messages()
        history = (*task.history, *history_items(all_messages[before:], now))
        if not isinstance(result.output, DeferredToolRequests):
            output = to_jsonable_python(result.output, fallback=str)
            update = {
                "status": "Completed",
                "messages": messages_json(all_messages),
                "pending": (),
                "history": history,
                "output": output,
                "error": None,
            }
            return await self._end(task, segment, update, run_finished(task.id, run_id, output))
        try:
            pending = await self._file(task, agent, result.output, all_messages)
            requests = [await self.service.get(p.request_id) for p in pending]
        except Exception as exc:
            return await self._fail(task, segment, exc)
        waiting = [
            interrupt(p, r, self.base_url)
            for p, r in zip(pending, requests, strict=True)
            if r.status == "pending"
        ]
        update = {
            "status": "Paused",
            "messages": messages_json(all_messages),
            "pending": pending,
            "history": history,
        }
        # decided as filed (no one waited on): the same AG-UI run goes on
        end = run_interrupted(task.id, run_id, waiting) if waiting else None
        paused = await self._end(task, segment, update, end)
        # decided before the task was stored (policy, a standing grant, a quick person):
        # no event will find it now, so go on here
        return await self._continue(paused.id) or paused

    async def _file(
        self,
        task: Task,
        agent: Agent[Any, Any],
        deferred: DeferredToolRequests,
        messages: Sequence[ModelMessage],
    ) -> tuple[PendingCall, ...]:
        """File a request for each deferred call: approvals, and people's choices/questions."""
        others = sorted(
            c.tool_name for c in deferred.calls if c.tool_name not in DEFERRED_HUMAN_TOOLS
        )
        if others:
            names = ", ".join(others)
            raise InvalidRequest(f"external deferred calls need results from elsewhere: {names}")
        backend = self._backend(task)
        approvals = DeferredToolRequests(approvals=deferred.approvals, metadata=deferred.metadata)
        _, asked = await file_deferred(
            approvals,
            backend,
            session_id=task.session_id,
            messages=messages,
            file_denied=True,  # on the record; the service's policy rejects them
            agent=agent,
        )
        for call in deferred.calls:
            fields = human_request_fields(
                call.tool_name,
                call.args_as_dict(),
                session_id=task.session_id,
                tool_call_id=call.tool_call_id,
            )
            submitted = await backend.submit(fields)
            asked.append((call, submitted.request.id))
        return tuple(
            PendingCall(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                args=to_jsonable_python(call.args_as_dict(), fallback=str),
                request_id=rid,
            )
            for call, rid in asked
        )


register_host(TaskRunner)
