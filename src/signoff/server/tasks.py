"""Hosted agent runs over HTTP: start a run, read a task, resume a paused one by request id."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from signoff.domain.principals import Principal
from signoff.domain.text import NoNul, refuse_unstorable
from signoff.domain.transitions import check_may_decide
from signoff.errors import InvalidRequest, TaskNotFound
from signoff.hosting import HostedAgents
from signoff.server.deps import API, current_principal

__all__ = ["tasks_router"]

Caller = Annotated[Principal, Depends(current_principal)]


class RunBody(BaseModel):
    """What to ask a registered agent."""

    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(min_length=1, max_length=100_000)
    session_id: NoNul | None = Field(default=None, min_length=1, max_length=200)

    @model_validator(mode="before")
    @classmethod
    def _encodable(cls, data: object) -> object:
        return refuse_unstorable(data)


class ResumeBody(BaseModel):
    """A decision on a paused task's request."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["approve", "reject", "edit"]
    reason: str = Field(default="", max_length=20_000)
    args: dict[str, JsonValue] | None = None

    @model_validator(mode="before")
    @classmethod
    def _encodable(cls, data: object) -> object:
        return refuse_unstorable(data)


def _runner(request: Request) -> HostedAgents:
    runner: HostedAgents | None = getattr(request.app.state, "tasks", None)
    if runner is None:
        raise TaskNotFound("this server (no agents are registered: signoff serve --agent)")
    return runner


def _view(task: Any, request: Request) -> dict[str, Any]:
    from signoff.integrations.pydantic_ai_tasks import task_view

    public: str | None = getattr(request.app.state, "public_url", None)
    return task_view(task, (public or str(request.base_url)).rstrip("/"))


def tasks_router() -> APIRouter:
    """``/agents``, ``/agents/{name}/runs``, ``/tasks/{id}`` and ``/resume/{request_id}``."""
    router = APIRouter(prefix=API)

    @router.get("/agents")
    async def agents(request: Request, caller: Caller) -> dict[str, Any]:
        """The agents this server hosts."""
        runner: HostedAgents | None = getattr(request.app.state, "tasks", None)
        return {"items": sorted(runner.agents) if runner is not None else []}

    @router.post("/agents/{name}/runs", status_code=201)
    async def run(
        name: str,
        body: RunBody,
        request: Request,
        caller: Caller,
    ) -> dict[str, Any]:
        """Run an agent: Completed with its output, or Paused with what it waits on."""
        task = await _runner(request).run(name, body.prompt, caller, body.session_id)
        return _view(task, request)

    @router.get("/tasks/{task_id}")
    async def get_task(task_id: str, request: Request, caller: Caller) -> dict[str, Any]:
        """A task with its history: messages, tool calls, results, every decision and who."""
        return _view(await _runner(request).get(task_id, caller), request)

    @router.post("/resume/{request_id}")
    async def resume(
        request_id: str,
        request: Request,
        caller: Caller,
        body: ResumeBody | None = None,
        action: Literal["approve", "reject", "edit"] | None = None,
    ) -> dict[str, Any]:
        """Approve, edit or reject a paused task's request; 403 for an agent, even its own run."""
        check_may_decide(caller)
        if body is None:
            if action is None:
                raise InvalidRequest('action: give {"action": "approve"} or "reject"')
            body = ResumeBody(action=action)
        task = await _runner(request).resume(
            request_id, body.action, caller, reason=body.reason, args=body.args
        )
        return _view(task, request)

    return router
