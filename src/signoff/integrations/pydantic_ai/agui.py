"""A hosted task's AG-UI events: made from its agent's run, kept live, followed by readers.

Each run segment of a task (from the save that sets it Running to the save that ends it)
writes its events into a :class:`Segment`, the task's live buffer in this process: every
event gets its id (``K-N``, K the task version that began the segment) and wakes the
task's followers at once. The save that ends the segment stores its events on the task,
so a stored task and its stored events agree; the segment's last event (the run's end) goes
to followers only after that save, so a reader that sees a run end finds the task stored as
it ended (a client may answer an interrupt at once). :meth:`TaskStream.follow` reads the
stored events, then the live ones, with no gap and nothing twice.

The model's part of a run is mapped by pydantic-ai's own AG-UI adapter
(``AGUIEventStream``); its lifecycle events are left out, since signoff ends a run itself:
an interrupt names signoff's request ids once the requests are filed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue, TypeAdapter

from signoff.domain.decisions import Answer, Approve, Choose, Reject, Respond
from signoff.domain.requests import ApprovalRequest, ChoiceRequest, QuestionsRequest, Request
from signoff.domain.tasks import (
    TASK_TERMINAL,
    PendingCall,
    Task,
    TaskEvent,
    event_id,
    parse_event_id,
)
from signoff.hosting import FollowUntil
from signoff.service import Service

try:
    from ag_ui.core import (
        BaseEvent,
        CustomEvent,
        EventType,
        Interrupt,
        RunErrorEvent,
        RunFinishedCancelledOutcome,
        RunFinishedEvent,
        RunFinishedInterruptOutcome,
        RunFinishedSuccessOutcome,
        RunStartedEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
    )
    from pydantic_ai.ui import NativeEvent
    from pydantic_ai.ui.ag_ui import AGUIEventStream
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "a hosted task's AG-UI stream needs pydantic-ai and ag-ui-protocol: "
        "pip install 'signoff[pydantic-ai]'"
    ) from exc

__all__ = [
    "DECISION_EVENT",
    "Segment",
    "TaskStream",
    "decision_event",
    "interrupt",
    "model_events",
    "open_run",
    "run_error",
    "run_finished",
    "run_interrupted",
    "user_message",
]

DECISION_EVENT = "signoff.decision"
"""The CUSTOM event a resumed run starts with, one per call its pause waited on."""

_LIFECYCLE = {EventType.RUN_STARTED, EventType.RUN_FINISHED, EventType.RUN_ERROR}
_ENDS = {EventType.RUN_FINISHED.value, EventType.RUN_ERROR.value}
_POLL = 1.0  # seconds between looks at a task another process runs


def _now_ms() -> int:
    return int(time.time() * 1000)


def _data(event: BaseEvent) -> dict[str, JsonValue]:
    if event.timestamp is None:
        event.timestamp = _now_ms()
    data: dict[str, JsonValue] = event.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data


# -- making events -----------------------------------------------------------------------


def open_run(events: Sequence[TaskEvent]) -> str | None:
    """The run id of the run ``events`` leave open (started, not yet finished), if any."""
    for event in reversed(events):
        kind = event.data.get("type")
        if kind in _ENDS:
            return None
        if kind == EventType.RUN_STARTED.value:
            run_id = event.data.get("runId")
            return run_id if isinstance(run_id, str) else None
    return None


def run_started(task_id: str, run_id: str) -> BaseEvent:
    """A run of the task's thread begins."""
    return RunStartedEvent(thread_id=task_id, run_id=run_id)


def user_message(prompt: str, message_id: str | None = None) -> list[BaseEvent]:
    """The person's prompt, as one whole user message (under the client's own id if given)."""
    message_id = message_id or f"msg_{uuid.uuid4().hex}"
    return [
        TextMessageStartEvent(message_id=message_id, role="user"),
        TextMessageContentEvent(message_id=message_id, delta=prompt),
        TextMessageEndEvent(message_id=message_id),
    ]


def _kind(request: Request) -> str:
    return "approval" if isinstance(request, ApprovalRequest) else request.kind


def decision_event(call: PendingCall, request: Request) -> BaseEvent:
    """What became of one call a pause waited on: who decided what (``signoff.decision``)."""
    record = request.decision
    value: dict[str, Any] = {
        "requestId": request.id,
        "toolCallId": call.tool_call_id,
        "toolName": call.tool_name,
        "kind": _kind(request),
        "status": request.status,
        "by": record.decided_by if record is not None else None,
        "via": record.via if record is not None else None,
        "edited": False,
    }
    decision = record.decision if record is not None else None
    if isinstance(decision, Reject) and decision.reason:
        value["reason"] = decision.reason
    if isinstance(decision, Respond | Answer) and decision.feedback:
        value["feedback"] = decision.feedback
    if isinstance(decision, Choose):
        resolved = (record.extra or {}).get("choices") if record is not None else None
        choices = resolved if isinstance(resolved, list) else list(decision.choices or ())
        if decision.choice is not None:
            value["choice"] = decision.choice
        if choices:
            value["choices"] = choices
    if isinstance(decision, Answer):
        value["answers"] = dict(decision.answers)
    if isinstance(request, ApprovalRequest) and request.status == "approved":
        args = dict(request.approved_args or call.args)
        value["args"] = args
        value["edited"] = args != call.args
    return CustomEvent(name=DECISION_EVENT, value=value)


_APPROVAL_PAYLOAD = {
    "oneOf": [
        TypeAdapter(Approve | Reject | Respond).json_schema(),
        {
            "type": "object",
            "description": "pydantic-ai's approval shape",
            "properties": {
                "approved": {"type": "boolean"},
                "editedArgs": {"type": "object"},
                "reason": {"type": "string"},
            },
            "required": ["approved"],
        },
    ]
}
_SCHEMAS: dict[str, dict[str, Any]] = {
    "approval": _APPROVAL_PAYLOAD,
    "choice": TypeAdapter(Choose | Reject).json_schema(),
    "questions": TypeAdapter(Answer | Approve | Reject).json_schema(),
}
_ACTIONS = {
    "approval": ["approve", "approve_session", "edit", "reject", "respond"],
    "choice": ["choose"],
    "questions": ["answer", "reject"],
}


def _message(call: PendingCall, request: Request) -> str:
    if isinstance(request, ChoiceRequest):
        return request.prompt
    if isinstance(request, QuestionsRequest):
        return request.prompt or (request.questions[0].text if request.questions else "")
    args = json.dumps(call.args, ensure_ascii=False, sort_keys=True)
    line = f"Approve {call.tool_name}({args})?"
    return line if len(line) <= 300 else line[:296] + "...?"


def interrupt(call: PendingCall, request: Request, base_url: str = "") -> Interrupt:
    """What a paused run asks of people about one call: its request, as an AG-UI interrupt."""
    kind = _kind(request)
    ours: dict[str, Any] = {
        "requestId": request.id,
        "kind": kind,
        "toolName": call.tool_name,
        "args": call.args,
        "url": f"{base_url.rstrip('/')}/requests/{request.id}",
        "actions": _ACTIONS[kind],
    }
    if isinstance(request, ChoiceRequest):
        ours.update(
            options=list(request.options),
            multi=request.multi_select,
            allowFreeText=request.allow_other,
        )
    if isinstance(request, QuestionsRequest):
        ours["questions"] = [q.model_dump(mode="json") for q in request.questions]
    return Interrupt(
        id=request.id,
        reason="tool_call" if kind == "approval" else kind,
        tool_call_id=call.tool_call_id,
        message=_message(call, request),
        expires_at=request.expires_at.isoformat() if request.expires_at else None,
        response_schema=_SCHEMAS[kind],
        metadata={"signoff": ours},
    )


def run_interrupted(task_id: str, run_id: str, interrupts: list[Interrupt]) -> BaseEvent:
    """The run ends paused on people."""
    outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
    return RunFinishedEvent(thread_id=task_id, run_id=run_id, outcome=outcome)


def run_finished(
    task_id: str, run_id: str, result: JsonValue, *, cancelled: bool = False
) -> BaseEvent:
    """The run ends with the agent's output (or cancelled)."""
    if cancelled:
        return RunFinishedEvent(
            thread_id=task_id, run_id=run_id, outcome=RunFinishedCancelledOutcome()
        )
    return RunFinishedEvent(
        thread_id=task_id, run_id=run_id, result=result, outcome=RunFinishedSuccessOutcome()
    )


def run_error(message: str) -> BaseEvent:
    """The run failed."""
    return RunErrorEvent(message=message)


async def model_events(
    task_id: str, run_id: str, native: AsyncIterator[NativeEvent]
) -> AsyncIterator[BaseEvent]:
    """The model's part of a run as pydantic-ai's AG-UI adapter maps it, lifecycle left out.

    An error in ``native`` is raised here after the adapter closed what it left open.
    """
    failure: list[BaseException] = []

    async def watched() -> AsyncIterator[NativeEvent]:
        try:
            async for event in native:
                yield event
        except Exception as exc:
            failure.append(exc)
            raise

    adapter: AGUIEventStream[Any, Any] = AGUIEventStream(thread_id=task_id, run_id=run_id)
    # a text message starts with its first non-empty delta: a model's empty text part
    # (before its tool calls, say) would be an empty assistant message in every chat
    held: dict[str, BaseEvent] = {}
    async for event in adapter.transform_stream(watched()):
        if event.type in _LIFECYCLE:
            continue
        if isinstance(event, TextMessageStartEvent):
            held[event.message_id] = event
            continue
        if isinstance(event, TextMessageContentEvent) and event.message_id in held:
            if not event.delta:
                continue
            yield held.pop(event.message_id)
        elif isinstance(event, TextMessageEndEvent) and event.message_id in held:
            del held[event.message_id]
            continue
        yield event
    if failure:
        raise failure[0]


# -- the live buffer and its followers ------------------------------------------------------


@dataclass
class Segment:
    """The events of one run segment of a task while it runs, in this process."""

    task_id: str
    number: int
    """K in the ids: the task version that began the segment."""
    events: list[TaskEvent] = field(default_factory=list[TaskEvent])
    done: bool = False
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def emit(self, event: BaseEvent) -> TaskEvent:
        """Add ``event`` with its id and wake the followers."""
        stored = self.stamp(event)
        self.publish(stored)
        return stored

    def stamp(self, event: BaseEvent) -> TaskEvent:
        """``event`` with the next id, not yet sent: a segment's last event goes out with
        :meth:`publish` only once the save that ends the segment stored it."""
        return TaskEvent(id=event_id(self.number, len(self.events)), data=_data(event))

    def publish(self, stored: TaskEvent) -> None:
        """Add an event :meth:`stamp` made and wake the followers."""
        self.events.append(stored)
        self._wake()

    def finish(self) -> None:
        """No more events: the segment's save is done (or failed)."""
        self.done = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self, timeout: float) -> None:
        """Wait until an event is added or the segment finishes (or ``timeout``)."""
        waiter = self._changed
        if self.done:
            return
        with contextlib.suppress(TimeoutError):  # (asyncio.timeout: see bus/postgres.py)
            async with asyncio.timeout(timeout):
                await waiter.wait()


def _key(event: TaskEvent) -> tuple[int, int]:
    return parse_event_id(event.id)


class TaskStream:
    """The live segments of the tasks this process runs, and readers that follow tasks."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self._live: dict[str, Segment] = {}
        self._segments = asyncio.Event()

    def begin(self, task: Task) -> Segment:
        """The live buffer of the segment ``task`` (just saved Running) begins."""
        segment = Segment(task.id, task.version)
        self._live[task.id] = segment
        self._announce()
        return segment

    def end(self, segment: Segment) -> None:
        """The segment's events are stored (or lost with a failed save): stop holding them."""
        if self._live.get(segment.task_id) is segment:
            del self._live[segment.task_id]
        segment.finish()
        self._announce()

    def _announce(self) -> None:
        self._segments.set()
        self._segments = asyncio.Event()

    def last_event_id(self, task: Task) -> str | None:
        """The id of the task's newest event, stored or live."""
        live = self._live.get(task.id)
        # a task read just after the save that ends a segment holds its last event, which
        # the live buffer gets a moment later
        newest = [e[-1] for e in (task.events, live.events if live else []) if e]
        return max(newest, key=_key).id if newest else None

    def follow(
        self, task: Task, after: str | None, *, until: FollowUntil
    ) -> AsyncIterator[TaskEvent]:
        """Every event of ``task`` after ``after``, stored then live (see HostedAgents.follow)."""
        last = parse_event_id(after) if after is not None else (-1, -1)
        return self._follow(task.id, last, until)

    async def _follow(
        self, task_id: str, last: tuple[int, int], until: FollowUntil
    ) -> AsyncIterator[TaskEvent]:
        while True:
            # read the live segment's announcement first: a segment that starts after the
            # read below wakes the wait at the end of this round
            announced = self._segments
            task = await self.service.get_task(task_id)
            live = self._live.get(task_id)
            if live is not None and task.version < live.number:
                continue  # the read predates the segment: events before it may be missing
            for event in task.events:
                if _key(event) > last:
                    yield event
                    last = _key(event)
                    if until == "run" and event.data.get("type") in _ENDS:
                        return
            if live is not None:
                while True:
                    fresh = [e for e in live.events if _key(e) > last]
                    if not fresh:
                        if live.done:
                            break
                        await live.changed(_POLL)
                        continue
                    for event in fresh:
                        yield event
                        last = _key(event)
                        if until == "run" and event.data.get("type") in _ENDS:
                            return
                continue
            if until == "rest" and task.status in TASK_TERMINAL:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_POLL):
                    await announced.wait()
