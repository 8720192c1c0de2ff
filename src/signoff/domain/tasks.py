"""Tasks: agent runs hosted by the server that pause for people and resume, durably.

A task is created ``Running``. A run that needs people ends ``Paused`` with its pending
tool calls (each with its own request) and its message history stored; once every one of
those requests is decided the task runs again. It ends ``Completed`` (with the output),
``Failed`` (with the reason) or ``Canceled``; a person's follow-up message runs a
``Completed`` task again, with its history::

    Running ──> Paused ──> Running ──> ... ──> Completed ──> Running ...
       └──────────┴──> Canceled | Failed

Each run segment (from Running to where it stops) leaves AG-UI events on the task
(:class:`TaskEvent`), stored in the same save that ends the segment.

Like requests, tasks are immutable records with a version; a change is stored only if the
stored version is still the old one, so two resumers of one pause get one winner.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, JsonValue

from signoff.domain.principals import DECIDER_ROLES, Principal
from signoff.errors import InvalidRequest

__all__ = [
    "TASK_TERMINAL",
    "TASK_TRANSITIONS",
    "HistoryItem",
    "PendingCall",
    "Task",
    "TaskEvent",
    "TaskStatus",
    "event_id",
    "may_see_conversation",
    "may_see_task",
    "new_task_id",
    "parse_event_id",
]

TaskStatus: TypeAlias = Literal["Running", "Paused", "Completed", "Failed", "Canceled"]

TASK_TRANSITIONS: dict[TaskStatus, frozenset[TaskStatus]] = {
    "Running": frozenset({"Paused", "Completed", "Failed", "Canceled"}),
    "Paused": frozenset({"Running", "Canceled", "Failed"}),
    "Completed": frozenset({"Running"}),
    "Failed": frozenset(),
    "Canceled": frozenset(),
}
"""Every legal change of a task's status (Completed -> Running only by a follow-up)."""

TASK_TERMINAL: frozenset[TaskStatus] = frozenset({"Completed", "Failed", "Canceled"})
"""Where a task's runs end: nothing runs it again unless a person follows up a Completed one."""

_EVENT_ID = re.compile(r"(0|[1-9][0-9]{0,17})-(0|[1-9][0-9]{0,17})")


def new_task_id() -> str:
    """A task id nobody can guess."""
    return "task_" + secrets.token_urlsafe(16)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def event_id(segment: int, index: int) -> str:
    """The id of the ``index``-th event of the run segment begun at task version ``segment``."""
    return f"{segment}-{index}"


def parse_event_id(text: str) -> tuple[int, int]:
    """An event id ``K-N`` as the pair it is ordered by; InvalidRequest on anything else."""
    found = _EVENT_ID.fullmatch(text)
    if found is None:
        raise InvalidRequest(f"an event id is two decimal numbers, K-N; got {text[:40]!r}")
    return int(found[1]), int(found[2])


class TaskEvent(_Model):
    """One AG-UI event of a task, with the id a reader resumes after."""

    id: str
    """``K-N``: K the task version that began its run segment, N its index there; ordered
    by (K, N) numerically and never reused, even after a crash."""
    data: dict[str, JsonValue]
    """The AG-UI event as JSON (camelCase, optional fields left out)."""


class PendingCall(_Model):
    """A tool call a paused task waits on, and the request that asks about it."""

    tool_call_id: str
    """The model's id for the call."""
    tool_name: str
    """The tool."""
    args: dict[str, JsonValue]
    """The arguments the model proposed."""
    request_id: str
    """The signoff request for it."""


HistoryKind: TypeAlias = Literal[
    "user", "assistant", "tool_call", "tool_result", "approval", "rejection", "edit", "error"
]


class HistoryItem(_Model):
    """One thing that happened in a task, for people to read."""

    kind: HistoryKind
    """What it is."""
    at: datetime
    """When it was recorded."""
    text: str = ""
    """The message, result, reason or error, as text."""
    tool_name: str | None = None
    """The tool, for tool calls, results and decisions."""
    tool_call_id: str | None = None
    """The call it concerns."""
    args: dict[str, JsonValue] | None = None
    """A call's arguments (or the edited ones)."""
    request_id: str | None = None
    """The signoff request of a decision."""
    by: str | None = None
    """Who decided or asked."""


class Task(_Model):
    """One hosted agent run, as stored."""

    id: str
    """Unguessable id, ``task_`` and 22 url-safe characters."""
    agent: str
    """The registered agent's name."""
    session_id: str
    """The session its requests are filed under."""
    user: str
    """The principal that started it; who may resume it (with the approvers policy names)."""
    status: TaskStatus = "Running"
    """Where it is."""
    version: int = 1
    """Optimistic-concurrency counter."""
    created_at: datetime
    """When it started."""
    updated_at: datetime
    """When it last changed."""
    prompt: str
    """What the agent was asked."""
    messages: str = "[]"
    """The agent's serialized state, opaque to signoff: pydantic-ai's message JSON, or the
    OpenAI Agents SDK's RunState JSON."""
    pending: tuple[PendingCall, ...] = ()
    """The calls a paused task waits on."""
    history: tuple[HistoryItem, ...] = ()
    """Everything that happened, oldest first."""
    output: JsonValue = None
    """The agent's output once Completed."""
    error: str | None = None
    """Why it Failed or was Canceled."""
    events: tuple[TaskEvent, ...] = ()
    """Its AG-UI events, oldest first, up to the end of its last finished run segment."""

    @property
    def request_ids(self) -> tuple[str, ...]:
        """The ids of the requests it waits on."""
        return tuple(p.request_id for p in self.pending)


def may_see_task(task: Task, principal: Principal) -> bool:
    """Whether ``principal`` may read ``task``: the user who started it, approvers and admins."""
    return principal.name == task.user or principal.role in DECIDER_ROLES


def may_see_conversation(task: Task, principal: Principal) -> bool:
    """Whether ``principal`` may read ``task`` as a conversation (its stream, its follow-ups,
    resuming it from a chat client): the user who started it and admins, not other people."""
    return principal.name == task.user or principal.role == "admin"
