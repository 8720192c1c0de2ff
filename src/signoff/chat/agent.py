"""The agent behind ``signoff chat``: coding tools, the approval pause, and durable sessions.

This is the part of the chat with no screen. :func:`build_agent` makes a pydantic-ai agent
with five tools working in one directory (``read_file``, ``list_files``, ``write_file``,
``edit_file``, ``shell``). A :class:`ChatSession` runs it under a :class:`SignoffGate` in
``defer`` mode, so a gated call ends the run with ``DeferredToolRequests``; the caller
(the terminal app) then loops: :meth:`ChatSession.pause` files one request per call,
people decide, :meth:`ChatSession.resume` runs on with the decided results.

A session is stored as a :class:`~signoff.domain.tasks.Task` with ``agent="chat"``: its
message history, and while approvals are outstanding, the calls waiting for them. Its
status is always ``Paused``, since a chat session always waits on its person (the next
prompt or a decision); ``--resume ID`` restores it and asks about waiting calls again.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from signoff.backends import Backend
from signoff.domain.clock import Clock, system_clock
from signoff.domain.policies import Policy
from signoff.domain.principals import Principal
from signoff.domain.requests import Request
from signoff.domain.tasks import PendingCall, Task
from signoff.errors import InvalidRequest, InvalidTransition, TaskNotFound
from signoff.integrations.pydantic_ai import (
    META_KEY,
    SignoffGate,
    decided_results,
    edit_problem,
    file_deferred,
)
from signoff.service import Service, service_for
from signoff.store.base import Store

try:
    from pydantic_ai import Agent, DeferredToolRequests, FunctionToolset, ToolDenied
    from pydantic_ai.agent import AgentRunResult
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models import Model
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError("signoff chat needs pydantic-ai: pip install 'signoff[pydantic-ai]'") from exc

from signoff.chat.demo import DEMO_MODEL_NAME, resolve_model

__all__ = [
    "CANCELED_MESSAGE",
    "CHAT_AGENT",
    "CHAT_PRINCIPAL",
    "ChatOutput",
    "ChatSession",
    "Pause",
    "TerminalAnswer",
    "build_agent",
    "chat_tools",
    "decide_here",
    "model_label",
    "wait_decided",
]

CHAT_AGENT = "chat"
"""The ``agent`` name of the Task records that hold chat sessions."""
CHAT_PRINCIPAL = Principal(name="signoff-chat", role="agent")
"""Who a local chat's requests are filed as (so the person at the terminal may approve)."""
CANCELED_MESSAGE = "The user canceled this call at the terminal (Ctrl+C); it was not run."
"""What the model is told about a call canceled with Ctrl+C."""

ChatOutput: TypeAlias = "str | DeferredToolRequests"
_INSTRUCTIONS = (
    "You are a coding agent working in the user's current directory. Use the tools to read, "
    "list, write and edit files and to run shell commands. Some calls wait for the user's "
    "approval; if one is denied, respect the reason and do not retry the same call."
)
_MAX_OUTPUT = 20_000
_SHELL_TIMEOUT = 120.0


def _inside(root: Path, path: str) -> Path:
    target = (root / path).resolve()
    if root.resolve() not in (target, *target.parents):
        raise ValueError(f"{path!r} is outside the working directory")
    return target


def _cut(text: str) -> str:
    if len(text) <= _MAX_OUTPUT:
        return text
    return text[:_MAX_OUTPUT] + f"\n... ({len(text) - _MAX_OUTPUT} more characters)"


def chat_tools(root: Path) -> FunctionToolset[None]:
    """read_file, list_files, write_file, edit_file and shell, confined to ``root``."""
    toolset: FunctionToolset[None] = FunctionToolset()

    @toolset.tool_plain
    def read_file(path: str) -> str:
        """The text of the file at ``path`` (relative to the working directory)."""
        try:
            return _cut(_inside(root, path).read_text(encoding="utf-8", errors="replace"))
        except (OSError, ValueError) as exc:
            return f"error: {exc}"

    @toolset.tool_plain
    def list_files(path: str = ".") -> str:
        """The entries of the directory at ``path``, one a line; directories end in /."""
        try:
            base = _inside(root, path)
            names = sorted(p.name + ("/" if p.is_dir() else "") for p in base.iterdir())
        except (OSError, ValueError) as exc:
            return f"error: {exc}"
        return "\n".join(names[:1000]) or "(empty)"

    @toolset.tool_plain
    def write_file(path: str, content: str) -> str:
        """Write ``content`` to the file at ``path``, replacing what it held."""
        try:
            target = _inside(root, path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        except (OSError, ValueError) as exc:
            return f"error: {exc}"
        return f"wrote {len(content)} characters to {path}"

    @toolset.tool_plain
    def edit_file(path: str, old_string: str, new_string: str) -> str:
        """Replace the first occurrence of ``old_string`` with ``new_string`` in a file."""
        try:
            target = _inside(root, path)
            text = target.read_text(encoding="utf-8")
        except (OSError, ValueError) as exc:
            return f"error: {exc}"
        if not old_string or old_string not in text:
            return f"error: old_string was not found in {path}; nothing changed"
        target.write_text(text.replace(old_string, new_string, 1), encoding="utf-8")
        return f"edited {path}"

    @toolset.tool_plain
    async def shell(command: str) -> str:
        """Run ``command`` with /bin/sh in the working directory; its output and exit code."""
        try:
            done = await asyncio.to_thread(
                subprocess.run,  # a person approved this command (or policy allows it)
                ["/bin/sh", "-c", command],
                cwd=root,
                capture_output=True,
                text=True,
                timeout=_SHELL_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"timed out after {_SHELL_TIMEOUT:.0f} seconds"
        output = (done.stdout + done.stderr).strip()
        return _cut(f"{output}\n(exit code {done.returncode})".strip())

    return toolset


def model_label(model: Model | str) -> str:
    """The name to show for a model: the demo's own name, or the model string."""
    return model if isinstance(model, str) else DEMO_MODEL_NAME


def build_agent(model: str | None, root: Path) -> Agent[None, ChatOutput]:
    """The chat agent on ``model`` (None or "demo": the scripted demo), tools in ``root``."""
    return Agent(
        resolve_model(model),
        toolsets=[chat_tools(root)],
        output_type=[str, DeferredToolRequests],
        instructions=_INSTRUCTIONS,
    )


@dataclass
class Pause:
    """One run's pause: its deferred calls, those denied at once, and those asked about."""

    deferred: DeferredToolRequests
    """What the run ended with."""
    denied: dict[str, ToolDenied]
    """Calls policy denied, by tool_call_id; no request was filed for them."""
    asked: list[tuple[ToolCallPart, str]]
    """Each call filed as a request, with its id, in the model's call order."""


@dataclass(frozen=True)
class TerminalAnswer:
    """What the person typed into the approval panel, turned into a decision."""

    kind: Literal["approve", "reject", "edit"]
    """Approve as proposed, reject with a reason, or enter edit mode."""
    reason: str = ""
    """The rejection's reason."""

    @classmethod
    def parse(cls, text: str) -> TerminalAnswer:
        """Empty or ``y`` approves, ``e`` edits, anything else rejects with that reason."""
        words = text.strip()
        if words.lower() in ("", "y", "yes"):
            return cls("approve")
        if words.lower() == "e":
            return cls("edit")
        return cls("reject", words)


async def wait_decided(backend: Backend, request_id: str) -> Request:
    """The request once it is no longer pending, however long that takes."""
    while True:
        request = await backend.wait(request_id, 30.0)
        if request.status != "pending":
            return request


async def decide_here(
    decider: Backend, request_id: str, decision: dict[str, Any]
) -> tuple[Request, bool]:
    """Decide as the person at the terminal: the request, and whether this decision won.

    When someone else (the web inbox) decided first, the service refuses this one with a
    conflict; the request is then returned as they left it.
    """
    try:
        return await decider.decide(request_id, decision), True
    except InvalidTransition:
        return await decider.get(request_id), False


def _unanswered(messages: Sequence[ModelMessage]) -> list[ToolCallPart]:
    """The calls of the model's last turn that have no result yet (those waiting)."""
    last = next((m for m in reversed(messages) if isinstance(m, ModelResponse)), None)
    if last is None:
        return []
    after = messages[list(messages).index(last) + 1 :]
    answered = {
        p.tool_call_id
        for m in after
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }
    return [p for p in last.parts if isinstance(p, ToolCallPart) and p.tool_call_id not in answered]


def _call_order(messages: Sequence[ModelMessage]) -> dict[str, int]:
    calls = _unanswered(messages)
    return {call.tool_call_id: n for n, call in enumerate(calls)}


@dataclass
class ChatSession:
    """One chat: the agent, its gate, its message history and its stored Task record."""

    agent: Agent[None, ChatOutput]
    """The agent that answers."""
    backend: Backend
    """Where the agent files its requests and claims approved calls."""
    store: Store | Service
    """Where the session is kept: a service, or a store it writes through a service."""
    task: Task
    """The session's record as last stored."""
    policy: Policy
    """Which calls need a person."""
    clock: Clock = system_clock
    """Stamps the record."""
    messages: list[ModelMessage] = field(default_factory=list)
    """The conversation so far."""

    @classmethod
    async def start(
        cls,
        agent: Agent[None, ChatOutput],
        backend: Backend,
        store: Store | Service,
        *,
        user: str,
        policy: Policy | None = None,
        clock: Clock = system_clock,
    ) -> ChatSession:
        """A new session, stored at once so its id can be resumed."""
        task = await service_for(store, clock=clock).create_task(
            agent=CHAT_AGENT, user=user, status="Paused"
        )
        return cls(agent, backend, store, task, policy or Policy.load(), clock)

    @classmethod
    async def restore(
        cls,
        task_id: str,
        agent: Agent[None, ChatOutput],
        backend: Backend,
        store: Store | Service,
        *,
        policy: Policy | None = None,
        clock: Clock = system_clock,
    ) -> ChatSession:
        """The stored session ``task_id``; TaskNotFound when there is no such chat."""
        try:
            task = await service_for(store, clock=clock).get_task(task_id)
        except TaskNotFound:
            task = None
        if task is None or task.agent != CHAT_AGENT:
            raise TaskNotFound(f"chat session {task_id!r}")
        messages = list(ModelMessagesTypeAdapter.validate_json(task.messages))
        return cls(agent, backend, store, task, policy or Policy.load(), clock, messages)

    @property
    def id(self) -> str:
        """The session's id (its Task id), for ``--resume``."""
        return self.task.id

    def gate(self) -> SignoffGate:
        """The capability that defers gated calls."""
        return SignoffGate(
            self.backend, session_id=self.task.session_id, mode="defer", policy=self.policy
        )

    async def run(self, prompt: str) -> AgentRunResult[ChatOutput]:
        """Send ``prompt``; the result is text, or the calls waiting for approval."""
        if not self.task.prompt:
            await self._save(prompt=prompt)
        result = await self.agent.run(
            prompt, message_history=self.messages, capabilities=[self.gate()]
        )
        self.messages = result.all_messages()
        return result

    async def pause(self, deferred: DeferredToolRequests) -> Pause:
        """File a request per waiting call and store them with the history."""
        denied, asked = await file_deferred(
            deferred,
            self.backend,
            session_id=self.task.session_id,
            messages=self.messages,
            agent=self.agent,
        )
        order = _call_order(self.messages)
        asked.sort(key=lambda pair: order.get(pair[0].tool_call_id, len(order)))
        pending = tuple(
            PendingCall(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                args=call.args_as_dict(),
                request_id=request_id,
            )
            for call, request_id in asked
        )
        await self._save(pending=pending)
        return Pause(deferred, denied, asked)

    async def waiting(self) -> Pause | None:
        """For a restored session: its calls still waiting for approval, filed again.

        Filing is idempotent (same session and tool_call_id), so this finds the same
        requests, and any decision made on them meanwhile. A waiting call with no stored
        request was denied by policy, and is denied again.
        """
        calls = _unanswered(self.messages)
        if not calls:
            return None
        stored = {p.tool_call_id for p in self.task.pending}
        metadata = {
            c.tool_call_id: {META_KEY: {"verdict": "deny", "policy": "restored session"}}
            for c in calls
            if c.tool_call_id not in stored
        }
        deferred = DeferredToolRequests(approvals=calls, metadata=metadata)
        return await self.pause(deferred)

    async def resume(
        self,
        pause: Pause,
        decided: Sequence[tuple[ToolCallPart, Request]],
        canceled: Sequence[ToolCallPart] = (),
    ) -> AgentRunResult[ChatOutput]:
        """Run on with every call of ``pause`` decided (or canceled at the terminal)."""
        denied = dict(pause.denied)
        denied.update({call.tool_call_id: ToolDenied(CANCELED_MESSAGE) for call in canceled})
        results = await decided_results(
            pause.deferred, decided, self.backend, agent=self.agent, denied=denied
        )
        result = await self.agent.run(
            message_history=self.messages,
            deferred_tool_results=results,
            capabilities=[self.gate()],
        )
        self.messages = result.all_messages()
        await self._save(pending=())
        return result

    def edit_problem(self, tool_name: str, args: dict[str, Any]) -> str | None:
        """Why edited arguments do not fit the tool, or None when they do."""
        return edit_problem(self.agent, tool_name, args)

    async def finish(self, result: AgentRunResult[ChatOutput]) -> None:
        """Store the history after a turn that ended in text."""
        if isinstance(result.output, DeferredToolRequests):
            raise InvalidRequest("the run is still waiting for approvals")
        await self._save(pending=(), output=result.output)

    async def _save(
        self,
        *,
        prompt: str | None = None,
        pending: tuple[PendingCall, ...] | None = None,
        output: str | None = None,
    ) -> None:
        update: dict[str, Any] = {
            "messages": ModelMessagesTypeAdapter.dump_json(self.messages).decode(),
        }
        if prompt is not None:
            update["prompt"] = prompt
        if pending is not None:
            update["pending"] = pending
        if output is not None:
            update["output"] = output
        tasks = service_for(self.store, clock=self.clock)
        self.task = await tasks.save_task(self.task.model_copy(update=update))
