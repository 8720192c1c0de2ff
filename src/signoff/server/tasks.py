"""Tasks over HTTP: list the hosted agents, read and list tasks, resume one by request id.

Starting a run, following a task's event stream and following up are in
:mod:`signoff.server.agui` (they answer with AG-UI events too).

Reading goes through the service's task operations (who may see which task is decided
there); running and resuming need the server's registered agents.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from signoff.domain.tasks import Task, TaskStatus
from signoff.domain.text import refuse_unstorable
from signoff.errors import InvalidRequest, TaskNotFound
from signoff.hosting import HostedAgents
from signoff.server.deps import API, Caller, ServiceDep
from signoff.store.base import MAX_PAGE
from signoff.wire import AgentList, TaskList, TaskView

__all__ = ["ResumeBody", "runner_of", "task_view", "tasks_router", "view_of"]


class ResumeBody(BaseModel):
    """A decision on a paused task's request."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["approve", "reject", "edit"] | None = None
    """What to do (or the ``?action=`` of the task's approval or rejection URL)."""
    reason: str = Field(default="", max_length=20_000)
    """Why, with ``reject`` (required: told to the agent)."""
    args: dict[str, JsonValue] | None = None

    @model_validator(mode="before")
    @classmethod
    def _encodable(cls, data: object) -> object:
        return refuse_unstorable(data)


def runner_of(request: Request) -> HostedAgents:
    """The server's hosted agents; TaskNotFound when it hosts none."""
    runner: HostedAgents | None = getattr(request.app.state, "tasks", None)
    if runner is None:
        raise TaskNotFound("this server (no agents are registered: signoff serve --agent)")
    return runner


def task_view(task: Task, base_url: str = "") -> dict[str, Any]:
    """The task as the API shows it, as JSON data (:class:`signoff.wire.TaskView`)."""
    return TaskView.of(task, base_url).model_dump(mode="json", exclude_unset=True)


def view_of(task: Task, request: Request) -> TaskView:
    """The task as the API shows it, its links on the server's public URL."""
    public: str | None = getattr(request.app.state, "public_url", None)
    return TaskView.of(task, (public or str(request.base_url)).rstrip("/"))


def tasks_router() -> APIRouter:
    """``/agents``, ``/tasks``, ``/tasks/{id}`` and ``/resume/{request_id}`` (runs, streams
    and follow-ups are :mod:`signoff.server.agui`'s)."""
    router = APIRouter(prefix=API)

    @router.get("/agents", response_model=AgentList)
    async def agents(request: Request, caller: Caller) -> AgentList:
        """The agents this server hosts."""
        runner: HostedAgents | None = getattr(request.app.state, "tasks", None)
        return AgentList(items=sorted(runner.agents) if runner is not None else [])

    @router.get("/tasks", response_model=TaskList, response_model_exclude_unset=True)
    async def list_tasks(
        request: Request,
        service: ServiceDep,
        caller: Caller,
        status: TaskStatus | None = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    ) -> TaskList:
        """Tasks the caller may see (its own; approvers and admins: all), newest first."""
        runner_of(request)
        tasks = await service.list_tasks(caller, status=status, limit=limit)
        return TaskList(items=[view_of(t, request) for t in tasks])

    @router.get("/tasks/{task_id}", response_model=TaskView, response_model_exclude_unset=True)
    async def get_task(
        task_id: str, request: Request, service: ServiceDep, caller: Caller
    ) -> TaskView:
        """A task with its history: messages, tool calls, results, every decision and who."""
        runner_of(request)
        return view_of(await service.get_task(task_id, caller), request)

    @router.post("/resume/{request_id}", response_model=TaskView, response_model_exclude_unset=True)
    async def resume(
        request_id: str,
        request: Request,
        caller: Caller,
        body: ResumeBody | None = None,
        action: Literal["approve", "reject", "edit"] | None = None,
    ) -> TaskView:
        """Approve, edit or reject a paused task's request; 403 for an agent, even its own run.

        A ``reject`` needs a ``reason`` that is not blank (``{"reason": ...}`` posted to the
        task's ``rejection_url``): 422 ``a reason is required to reject`` otherwise.
        """
        body = body or ResumeBody()
        chosen = body.action or action
        if chosen is None:
            raise InvalidRequest('action: give {"action": "approve"} or "reject"')
        task = await runner_of(request).resume(
            request_id, chosen, caller, reason=body.reason, args=body.args
        )
        return view_of(task, request)

    return router
