"""A task's conversation over AG-UI: start or resume runs, follow the stream, follow up.

``POST /agents/{name}/runs`` takes signoff's ``{"prompt"}`` (answered with the task as JSON,
or its first run's event stream when the client accepts ``text/event-stream``) or an AG-UI
``RunAgentInput`` (always answered with the run's event stream). A ``RunAgentInput``
names its thread: an unknown one becomes a new task with that id; a known one the caller
may see is resumed by its ``resume`` entries or followed up by its new last user message.

Each resume entry becomes a signoff decision by the caller, through the service like any
other (governance, audit, the inbox may have decided first): the client's payload is never
handed to the agent as the approval itself. Every entry is checked before any is decided,
so a bad one leaves every request as it was; all of that happens before the stream starts,
so a refusal is a plain JSON 4xx.

Each event goes out as ``id: K-N`` and ``data: <AG-UI event JSON>``; a reader reconnecting
to ``GET /tasks/{id}/stream`` with ``Last-Event-ID`` gets every event after that one. The
prompt a ``RunAgentInput`` sends is stored under the client's own message id and not echoed
back on that request's stream (the client holds it already; a reader of the task's stream
gets it). A resumed run carries the input's ``runId``. An interrupt's link to its request is
made absolute on the way out, on the server's public URL, so stored events do not depend on
who reads them.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any

from ag_ui.core import RunAgentInput, TextPart, UserMessage
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Body, Header, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from signoff.domain.decisions import Decision, DecisionAdapter
from signoff.domain.principals import Principal
from signoff.domain.tasks import Task, TaskEvent, parse_event_id
from signoff.domain.text import NoNul, refuse_unstorable
from signoff.errors import InvalidHeader, InvalidRequest, InvalidTransition, TaskNotFound
from signoff.hosting import FollowUntil, HostedAgents
from signoff.server.bodies import StrictBody
from signoff.server.credentials import REVALIDATE, CredentialWatch, credential_of
from signoff.server.deps import API, Caller, ServiceDep
from signoff.server.shutdown import Shutdown, either
from signoff.server.tasks import runner_of, view_of
from signoff.service import Service, validation_message
from signoff.wire import TaskView

__all__ = ["THREAD_ID", "MessageBody", "RunBody", "agui_router", "frame"]

THREAD_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
"""What a client may name a new conversation's thread (the task's id), and the message ids
a prompt is stored under (another id gets a server-made one)."""

EVENT_STREAM = EventEncoder().get_content_type()
"""``text/event-stream``."""

CANCELLED_BY_CLIENT = "cancelled by the client"
"""The reason of a rejection an AG-UI ``cancelled`` resume entry makes."""

_MAX_PROMPT = 100_000
_STREAM_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
_TEXT = {"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "TEXT_MESSAGE_CHUNK"}


class RunBody(StrictBody):
    """What to ask a registered agent (signoff's own body; an AG-UI client sends a
    ``RunAgentInput``)."""

    prompt: str = Field(min_length=1, max_length=_MAX_PROMPT)
    session_id: NoNul | None = Field(default=None, min_length=1, max_length=200)


class MessageBody(StrictBody):
    """A follow-up message in a conversation."""

    content: str = Field(min_length=1, max_length=_MAX_PROMPT)
    """What the person says next."""


class _ApprovalPayload(BaseModel):
    """pydantic-ai's resume payload for a tool approval (``pydantic_ai.ui.ag_ui``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    approved: bool
    edited_args: dict[str, JsonValue] | None = Field(default=None, alias="editedArgs")
    reason: str | None = Field(default=None, max_length=20_000)


def frame(event: TaskEvent) -> str:
    """One SSE message: the event's ``id:`` line, then its AG-UI JSON as the encoder writes it
    (compact, optional fields already left out when the event was made)."""
    data = json.dumps(event.data, ensure_ascii=False, separators=(",", ":"))
    return f"id: {event.id}\ndata: {data}\n\n"


def _wants_stream(request: Request) -> bool:
    return EVENT_STREAM in request.headers.get("accept", "")


def _after(last_event_id: str | None) -> str | None:
    """The id a reader resumes after (None: from the first); 400 when it is not ``K-N``."""
    if last_event_id is None:
        return None
    try:
        parse_event_id(last_event_id.strip())
    except InvalidRequest as exc:
        raise InvalidHeader(f"Last-Event-ID: {exc.message}") from None
    return last_event_id.strip()


def _parse(model: type[BaseModel], data: object, where: str = "") -> Any:
    try:
        return model.model_validate(refuse_unstorable(data))
    except ValueError as exc:  # ValidationError, or refuse_unstorable's own
        text = validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
        raise InvalidRequest(f"{where}{text}") from None


def _prompt(run: RunAgentInput) -> str | None:
    """The text of the input's last message when it is the person's (None otherwise)."""
    last = run.messages[-1] if run.messages else None
    if not isinstance(last, UserMessage):
        return None
    if isinstance(last.content, str):
        text = last.content
    else:
        text = "".join(part.text for part in last.content if isinstance(part, TextPart))
    if not text.strip():
        raise InvalidRequest("messages: the last user message has no text")
    if len(text) > _MAX_PROMPT:
        raise InvalidRequest(f"messages: a message is at most {_MAX_PROMPT:,} characters")
    return text


def _decision(entry: Any) -> Decision:
    """What a resume entry says, as a signoff decision (the same parser the decide route
    uses): signoff's decision body, or pydantic-ai's ``{"approved", "editedArgs", "reason"}``."""
    where = f"resume[{entry.interrupt_id}]."
    if entry.status == "cancelled":
        return DecisionAdapter.validate_python({"type": "reject", "reason": CANCELLED_BY_CLIENT})
    payload = entry.payload
    if not isinstance(payload, dict):
        raise InvalidRequest(f"{where}payload: a decision object is required")
    if "type" in payload:
        try:
            return DecisionAdapter.validate_python(refuse_unstorable(payload))
        except ValueError as exc:
            text = validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
            raise InvalidRequest(f"{where}payload.{text}") from None
    approval: _ApprovalPayload = _parse(_ApprovalPayload, payload, f"{where}payload.")
    if approval.approved:
        return DecisionAdapter.validate_python({"type": "approve", "args": approval.edited_args})
    return DecisionAdapter.validate_python({"type": "reject", "reason": approval.reason or ""})


def _message_id(run: RunAgentInput, task: Task | None) -> str | None:
    """The client's id of its prompt's message, to store the prompt under; None (the
    server makes one) when it is not a usable id or the conversation has it already."""
    message_id = run.messages[-1].id
    used = {e.data.get("messageId") for e in task.events} if task is not None else set()
    if THREAD_ID.fullmatch(message_id) is None or message_id in used:
        return None
    return message_id


def _decisions(task: Task, entries: Sequence[Any]) -> list[tuple[str, Decision]]:
    """Each resume entry as the decision of the request it names, all checked."""
    waiting = set(task.request_ids)
    decisions: list[tuple[str, Decision]] = []
    for entry in entries:
        if entry.interrupt_id not in waiting:
            raise InvalidRequest(
                f"resume: {entry.interrupt_id!r} is not a request task {task.id} waits on"
            )
        decisions.append((entry.interrupt_id, _decision(entry)))
    return decisions


async def _resume(
    service: Service, runner: HostedAgents, task: Task, run: RunAgentInput, caller: Principal
) -> None:
    """Decide each resume entry's request by ``caller``, all checked before any is decided;
    the run they let go on is the input's ``runId``."""
    decisions = _decisions(task, run.resume or [])
    runner.name_next_run(task.id, run.run_id)
    try:
        await service.decide_all(decisions, caller)
    except BaseException:
        runner.name_next_run(task.id, None)
        raise


def _linked(data: dict[str, JsonValue], base: str) -> dict[str, JsonValue]:
    """An event whose interrupts link to their requests by path, with absolute links."""
    outcome = data.get("outcome")
    if data.get("type") != "RUN_FINISHED" or not isinstance(outcome, dict):
        return data
    found = outcome.get("interrupts")
    if not isinstance(found, list):
        return data
    found = copy.deepcopy(found)
    for item in found:
        metadata = item.get("metadata") if isinstance(item, dict) else None
        ours = metadata.get("signoff") if isinstance(metadata, dict) else None
        url = ours.get("url") if isinstance(ours, dict) else None
        if isinstance(ours, dict) and isinstance(url, str) and url.startswith("/"):
            ours["url"] = base + url
    return {**data, "outcome": {**outcome, "interrupts": found}}


async def _events(
    request: Request,
    follow: AsyncIterator[TaskEvent],
    caller: Principal,
    watch: CredentialWatch,
    echo: frozenset[str],
) -> AsyncIterator[str]:
    """The task's events as SSE, a keepalive comment when idle, until the follow ends, the
    caller's credential stops working or the server stops; text messages whose id is in
    ``echo`` (the client's own) left out."""
    public: str | None = getattr(request.app.state, "public_url", None)
    base = (public or str(request.base_url)).rstrip("/")
    stopping: Shutdown = request.app.state.shutdown
    heartbeat: float = request.app.state.heartbeat
    events = aiter(follow)
    with watch.guard(credential_of(request, caller)) as ended, stopping.stream() as going:
        done = either(ended, going)
        step: asyncio.Future[TaskEvent] | None = None
        try:
            while True:
                if step is None:
                    step = asyncio.ensure_future(anext(events))
                waiting: list[asyncio.Future[Any]] = [step, done]
                await asyncio.wait(waiting, timeout=heartbeat, return_when=asyncio.FIRST_COMPLETED)
                if step.done():
                    try:
                        event = step.result()
                    except StopAsyncIteration:
                        return
                    step = None
                    if event.data.get("type") in _TEXT and event.data.get("messageId") in echo:
                        continue
                    yield frame(TaskEvent(id=event.id, data=_linked(event.data, base)))
                elif done.done():
                    reason = ended.result().message if ended.done() else "the server is stopping"
                    yield f": stream ended: {reason}\n\n"
                    return
                else:
                    yield ": keepalive\n\n"
        finally:
            done.cancel()
            if step is not None and not step.done():
                step.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, Exception):
                    await step
            closing = getattr(events, "aclose", None)
            if closing is not None:
                with contextlib.suppress(Exception):
                    await closing()


def _stream(
    request: Request,
    runner: HostedAgents,
    task: Task,
    after: str | None,
    until: FollowUntil,
    caller: Principal,
    watch: CredentialWatch,
    echo: frozenset[str] = frozenset(),
) -> StreamingResponse:
    # follow() is called here, before the answer starts: what it refuses is a JSON 4xx
    events = runner.follow(task, after, until=until)
    return StreamingResponse(
        _events(request, events, caller, watch, echo),
        media_type=EVENT_STREAM,
        headers=_STREAM_HEADERS,
    )


async def _agui_run(
    name: str,
    data: dict[str, JsonValue],
    request: Request,
    service: Service,
    runner: HostedAgents,
    caller: Principal,
    watch: CredentialWatch,
) -> StreamingResponse:
    """An AG-UI ``RunAgentInput``: a new thread, a resume, or a follow-up; its run's events."""
    run: RunAgentInput = _parse(RunAgentInput, data)
    echo = frozenset(message.id for message in run.messages)
    if THREAD_ID.fullmatch(run.thread_id) is None:
        raise InvalidRequest("threadId: 1 to 128 of the characters A-Z a-z 0-9 _ . : -")
    if not run.run_id or len(run.run_id) > 200 or "\x00" in run.run_id:
        raise InvalidRequest("runId: 1 to 200 characters, no NUL")
    try:
        task: Task | None = await service.get_conversation(run.thread_id, caller)
    except TaskNotFound:
        task = None
    if task is None:
        if run.resume:  # nothing the caller may see waits on these
            raise TaskNotFound(run.thread_id)
        prompt = _prompt(run)
        if prompt is None:
            raise InvalidRequest("messages: a new thread needs a last message from the user")
        try:
            begun = await runner.begin(
                name,
                prompt,
                caller,
                task_id=run.thread_id,
                run_id=run.run_id,
                message_id=_message_id(run, None),
            )
        except InvalidTransition:  # the id is someone else's task: it does not exist for you
            raise TaskNotFound(run.thread_id) from None
        return _stream(request, runner, begun, None, "run", caller, watch, echo)
    if task.agent != name:
        raise InvalidRequest(f"threadId: thread {task.id} is a conversation with {task.agent!r}")
    after = runner.last_event_id(task)
    if run.resume:
        await _resume(service, runner, task, run, caller)
        return _stream(request, runner, task, after, "run", caller, watch, echo)
    prompt = _prompt(run)
    if prompt is None:
        raise InvalidTransition(
            f"thread {task.id} is {task.status}: send resume entries or a new user message",
            status=task.status,
        )
    message_id = _message_id(run, task)
    await runner.follow_up(task.id, prompt, caller, run_id=run.run_id, message_id=message_id)
    return _stream(request, runner, task, after, "run", caller, watch, echo)


def agui_router(revalidate: float = REVALIDATE) -> APIRouter:
    """``POST /agents/{name}/runs``, ``GET /tasks/{id}/stream``, ``POST /tasks/{id}/messages``.

    Their streams end when the server stops or the caller's credential stops working
    (checked again every ``revalidate`` seconds).
    """
    router = APIRouter(prefix=API)
    watch = CredentialWatch(revalidate)

    @router.post(
        "/agents/{name}/runs",
        status_code=201,
        response_model=TaskView,
        response_model_exclude_unset=True,
        responses={201: {"content": {EVENT_STREAM: {}}}},
    )
    async def run(
        name: str,
        body: Annotated[dict[str, JsonValue], Body()],
        request: Request,
        service: ServiceDep,
        caller: Caller,
    ) -> Response | TaskView:
        """Run an agent. ``{"prompt"}``: the task (Completed with its output, or Paused with
        what it waits on), or its run's AG-UI events with ``Accept: text/event-stream``. An
        AG-UI ``RunAgentInput`` (``threadId``, ``runId``, ``messages``): its run's events.
        Its ``resume`` entries decide what the run waits on; a rejection
        (``{"approved": false}``) needs a ``reason`` that is not blank: 422 ``a reason is
        required to reject`` otherwise, and none of the entries is recorded."""
        runner = runner_of(request)
        if name not in runner.agents:
            known = ", ".join(sorted(runner.agents)) or "none"
            raise TaskNotFound(f"agent {name!r} (registered: {known})")
        if {"threadId", "runId", "messages"} <= body.keys():
            return await _agui_run(name, body, request, service, runner, caller, watch)
        asked: RunBody = _parse(RunBody, body)
        if _wants_stream(request):
            task = await runner.begin(name, asked.prompt, caller, session_id=asked.session_id)
            return _stream(request, runner, task, None, "run", caller, watch)
        return view_of(await runner.run(name, asked.prompt, caller, asked.session_id), request)

    @router.get("/tasks/{task_id}/stream", response_class=StreamingResponse)
    async def stream(
        task_id: str,
        request: Request,
        service: ServiceDep,
        caller: Caller,
        after: Annotated[str | None, Query(max_length=40)] = None,
        last_event_id: Annotated[str | None, Header(max_length=40)] = None,
    ) -> StreamingResponse:
        """The conversation's AG-UI events from the start, or after ``Last-Event-ID`` (or
        ``?after=``), until the task is done; a ``: keepalive`` comment every 15 s when idle.
        Its user and admins only."""
        runner = runner_of(request)
        start = _after(last_event_id if last_event_id is not None else after)
        task = await service.get_conversation(task_id, caller)
        return _stream(request, runner, task, start, "rest", caller, watch)

    @router.post(
        "/tasks/{task_id}/messages",
        status_code=202,
        response_model=TaskView,
        response_model_exclude_unset=True,
        responses={202: {"content": {EVENT_STREAM: {}}}},
    )
    async def message(
        task_id: str,
        body: MessageBody,
        request: Request,
        service: ServiceDep,
        caller: Caller,
    ) -> Response | TaskView:
        """Continue a Completed conversation with a message, keeping its history: the task
        (Running), or the new run's AG-UI events with ``Accept: text/event-stream``."""
        runner = runner_of(request)
        task = await service.get_conversation(task_id, caller)
        after = runner.last_event_id(task)
        running = await runner.follow_up(task.id, body.content, caller)
        if _wants_stream(request):
            return _stream(request, runner, task, after, "run", caller, watch)
        return view_of(running, request)

    return router
