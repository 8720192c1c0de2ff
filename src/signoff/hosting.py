"""Hosted agents: the interface a server runs agents through, and the integrations behind it.

``signoff serve --agent`` and ``create_app(service, agents=...)`` host agents as durable
tasks (paused on a request, resumed by a decision). The server knows them only as
:class:`HostedAgents`; an integration implements it and registers a factory with
:func:`register_host`, as a third party's would. The built-in one, pydantic-ai's
``TaskRunner`` (:data:`BUILT_IN`), is loaded by name the first time it is needed, so the
server imports no agent framework until agents are hosted.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Literal, Protocol

from pydantic import JsonValue

from signoff.domain.principals import Principal
from signoff.domain.tasks import Task, TaskEvent
from signoff.service import Service

__all__ = [
    "BUILT_IN",
    "Action",
    "FollowUntil",
    "HostFactory",
    "HostedAgents",
    "host_agents",
    "register_host",
]

Action = Literal["approve", "reject", "edit"]
"""What ``POST /tasks/{id}/resume/{request_id}`` does with the request it names."""

FollowUntil = Literal["run", "rest"]
"""How long :meth:`HostedAgents.follow` follows: to the end of one run, or of the task."""

BUILT_IN = "signoff.integrations.pydantic_ai.tasks"
"""The module that registers the built-in host (pydantic-ai agents) when imported."""


class HostedAgents(Protocol):
    """Agents a server runs as durable tasks: what the task routes and the app call."""

    @property
    def agents(self) -> Mapping[str, object]:
        """The hosted agents by name."""
        ...

    async def start(self) -> None:
        """Pick up unfinished tasks and follow decisions; called when the server starts."""
        ...

    async def stop(self) -> None:
        """Stop following; called when the server stops."""
        ...

    async def run(
        self, agent_name: str, prompt: str, principal: Principal, session_id: str | None = None
    ) -> Task:
        """Start a task and run it until it completes, fails or pauses."""
        ...

    async def get(self, task_id: str, principal: Principal) -> Task:
        """A task the principal may see."""
        ...

    async def resume(
        self,
        request_id: str,
        action: Action,
        principal: Principal,
        *,
        reason: str = "",
        args: Mapping[str, JsonValue] | None = None,
    ) -> Task:
        """Decide one of a paused task's requests and return the task's next state
        (NotAllowed for an agent, first: who may decide is checked here, not by the route)."""
        ...

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

        ``run_id`` and ``message_id`` (the client's) name the run and the prompt's message
        in its events; None: the host makes them. A ``task_id`` already taken is
        InvalidTransition (409), nothing started."""
        ...

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
        background (Completed -> Running; InvalidTransition 409 for any other status; only
        its user, TaskNotFound for whoever may not see it, NotAllowed for other readers).
        ``run_id`` and ``message_id`` as for :meth:`begin`."""
        ...

    def name_next_run(self, task_id: str, run_id: str | None) -> None:
        """Give the next run the host starts for the task the client's ``run_id`` (its
        RUN_STARTED and its end carry it): a resume's, told before its decisions are made
        (None: forget a name the decisions did not use). Used once; a run another server
        starts makes its own id."""
        ...

    def last_event_id(self, task: Task) -> str | None:
        """The id of the task's newest event (stored or live), None when it has none."""
        ...

    def follow(
        self, task: Task, after: str | None, *, until: FollowUntil
    ) -> AsyncIterator[TaskEvent]:
        """Every event of ``task`` after id ``after`` (None: from the first), stored ones then
        live ones, in order, none twice.

        ``until="run"``: stop after the first RUN_FINISHED/RUN_ERROR sent. ``until="rest"``:
        stop once the task is Completed/Failed/Canceled and all its events were sent; a
        Paused task is followed until it goes on. On a server that is not running the task
        it sees stored events only, checking the task about once a second. A malformed
        ``after`` is InvalidRequest, raised by this call itself (not by the first step)."""
        ...


HostFactory = Callable[[Service, Mapping[str, Any]], HostedAgents]
"""Builds the host of ``agents`` (name to the framework's agent) over a service."""

_factories: list[HostFactory] = []


def register_host(factory: HostFactory) -> None:
    """Make ``factory`` the one :func:`host_agents` uses (the last registered wins)."""
    _factories.append(factory)


def host_agents(service: Service, agents: Mapping[str, Any]) -> HostedAgents:
    """The registered host of ``agents``, loading the built-in one if none is registered."""
    if not _factories:
        importlib.import_module(BUILT_IN)  # registers itself; ImportError names the extra
    return _factories[-1](service, agents)
