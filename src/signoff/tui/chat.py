"""``signoff chat`` on screen: a prompt, the conversation, and an approval panel.

Approval is a loop around the run, not a screen state: after each run that ends with
calls waiting, the app files them (:meth:`ChatSession.pause`), asks about them one by one
("Tool 2 of 3"), and resumes with every decision. Each question races the person at this
terminal against any other transport (the web inbox): the app waits on ``backend.wait``
while it waits for input, and whichever decides first wins; the loser is told. Decisions
typed here go through the backend as the local person, so they are on the record.

What the model wrote (its text, tool names, arguments) is shown with its control and bidi
characters as visible escapes (:mod:`signoff.terminal.safe_text`): a model steered by what it
read can be as hostile as any agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import JsonValue

from signoff.backends import Backend
from signoff.chat import ChatSession, Pause, TerminalAnswer, decide_here, wait_decided
from signoff.domain.requests import ApprovalRequest, Request
from signoff.errors import InvalidTransition, SignoffError
from signoff.terminal.safe_text import dumps_visible, visible

try:
    from pydantic_ai import DeferredToolRequests
    from pydantic_ai.agent import AgentRunResult
    from pydantic_ai.messages import ToolCallPart
    from rich.syntax import Syntax
    from rich.text import Text
    from textual.app import App, ComposeResult
    from textual.binding import Binding, BindingType
    from textual.containers import Vertical, VerticalScroll
    from textual.widgets import Input, Static
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "signoff chat needs its extras: pip install 'signoff[tui,pydantic-ai]'"
    ) from exc

__all__ = ["AWAITING", "MAX_ARG_LINES", "ChatApp", "args_view"]

MAX_ARG_LINES = 20
"""Argument JSON longer than this is cut in the panel."""
AWAITING = "Awaiting Approval | Enter: Approve | Text: Reject | e: Edit | Ctrl+C: Cancel all"
"""The status bar's state while a call waits for the person."""
_HELP = "Enter or y: approve · any other text + Enter: reject with it as the reason · e: edit args"
_EDIT_HELP = "Edit the arguments (a JSON object), Enter approves them · Esc: back"


class _Canceled(Exception):
    """Ctrl+C while calls were waiting: withdraw all of them."""


def args_view(args: dict[str, JsonValue]) -> str:
    """The arguments as indented JSON, cut after :data:`MAX_ARG_LINES` lines.

    Hidden characters are JSON escapes, so they show and the JSON still means the same.
    """
    lines = dumps_visible(args, indent=2).splitlines()
    if len(lines) > MAX_ARG_LINES:
        lines = [*lines[:MAX_ARG_LINES], "... (truncated)"]
    return "\n".join(lines)


def _outcome(request: Request, *, by_you: bool) -> str:
    """One line saying how a request was decided."""
    record = request.decision
    who = "you" if by_you else (record.decided_by if record else "nobody")
    where = "" if by_you or record is None else f" via {record.via}"
    reason = getattr(record.decision, "reason", "") if record else ""
    edited = (
        " with edited arguments"
        if isinstance(request, ApprovalRequest)
        and request.approved_args is not None
        and request.approved_args != request.tool_args
        else ""
    )
    tail = f": {reason}" if reason else ""
    return f"{request.status}{edited} by {who}{where}{tail}"


class ChatApp(App[None]):
    """The terminal chat: type a prompt; approve, reject or edit each gated call."""

    TITLE = "signoff chat"
    CSS = """
    #log { height: 1fr; padding: 0 1; }
    .user { color: $accent; margin-top: 1; }
    .agent { margin-top: 1; }
    .note { color: $text-muted; }
    #approval { display: none; height: auto; max-height: 70%; border: round $warning;
                padding: 0 1; overflow-y: auto; }
    #approval.shown { display: block; }
    #approval-title { text-style: bold; }
    #approval-error { color: $error; }
    #status { height: 1; background: $panel; color: $text; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "cancel_pending", "Cancel pending calls", priority=True),
        Binding("escape", "leave_edit", "Back", show=False),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(
        self,
        session: ChatSession,
        decider: Backend,
        *,
        model_name: str,
        mode: str,
        demo: bool = False,
    ) -> None:
        super().__init__()
        self.session = session
        self.decider = decider
        self.model_name = model_name
        self.mode = mode
        self.demo = demo
        self.transcript: list[str] = []
        """Everything shown in the conversation, as plain text."""
        self.status_text = ""
        """What the status bar says."""
        self.busy = False
        """Whether a turn (a run and its approvals) is under way."""
        self._answer: asyncio.Future[str] | None = None
        self._editing = False

    def compose(self) -> ComposeResult:
        """The conversation, the approval panel, the prompt and the status bar."""
        yield VerticalScroll(id="log")
        with Vertical(id="approval"):
            yield Static(id="approval-title")
            yield Static(id="approval-id")
            yield Static(id="approval-args")
            yield Static(id="approval-diff")
            yield Static(id="approval-error")
            yield Static(_HELP, id="approval-help")
        yield Input(placeholder="Ask the agent; Ctrl+Q quits", id="prompt")
        yield Static(id="status")

    async def on_mount(self) -> None:
        """Say which session this is; a restored one asks about its waiting calls first."""
        self._note(
            f"session {self.session.id} (resume with: signoff chat --resume {self.session.id})"
        )
        for line in _history_lines(self.session):
            line = visible(line)
            self.transcript.append(line)
            await self.query_one("#log", VerticalScroll).mount(Static(Text(line), classes="note"))
        self._status("Ready")
        self.query_one("#prompt", Input).focus()
        if self.session.task.pending or self.session.messages:
            self.busy = True
            self.run_worker(self._turn(None), group="turn", exit_on_error=False)

    # -- the conversation ----------------------------------------------------------------

    def _write(self, text: str, classes: str) -> None:
        text = visible(text)
        self.transcript.append(text)
        log = self.query_one("#log", VerticalScroll)
        log.mount(Static(Text(text), classes=classes))
        log.scroll_end(animate=False)

    def _note(self, text: str) -> None:
        self._write(text, "note")

    def _status(self, state: str) -> None:
        model = self.model_name + (" (no --model given: scripted demo)" if self.demo else "")
        # the state first, so a narrow terminal still shows what Enter and text do
        self.status_text = f"{state} | Mode: {self.mode} | Model: {model}"
        self.query_one("#status", Static).update(Text(self.status_text))

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        """An answer to the waiting call, or a new prompt."""
        text = event.value
        if self._answer is not None and not self._answer.done():
            event.input.value = ""
            self._answer.set_result(text)
            return
        if self.busy:
            self.notify("The agent is still working; wait for it to finish.")
            return
        if not text.strip():
            return
        event.input.value = ""
        self._write(f"you: {text}", "user")
        self.busy = True
        self.run_worker(self._turn(text), group="turn", exit_on_error=False)

    async def _turn(self, prompt: str | None) -> None:
        """One turn: run, then ask about waiting calls and resume until the model answers."""
        self.busy = True
        self._status("Thinking...")
        try:
            if prompt is None:
                pause = await self.session.waiting()
                if pause is None:
                    return
                self._note("This session ended with calls waiting for approval; asking again.")
                result = await self._approve_all(pause)
            else:
                result = await self.session.run(prompt)
            while isinstance(result.output, DeferredToolRequests):
                pause = await self.session.pause(result.output)
                result = await self._approve_all(pause)
            await self.session.finish(result)
            self._write(f"agent: {result.output}", "agent")
        except Exception as exc:  # shown, and the session stays usable
            self._note(f"error: {type(exc).__name__}: {exc}")
        finally:
            self.busy = False
            self._hide_panel()
            self._status("Ready")
            self.query_one("#prompt", Input).focus()

    # -- the approval loop ---------------------------------------------------------------

    async def _approve_all(self, pause: Pause) -> AgentRunResult[Any]:
        """Ask about each call of ``pause`` in turn, then resume the run with the decisions."""
        decided: list[tuple[ToolCallPart, Request]] = []
        canceled: list[ToolCallPart] = []
        total = len(pause.asked)
        try:
            for index, (call, request_id) in enumerate(pause.asked, 1):
                decided.append((call, await self._ask(call, request_id, index, total)))
        except _Canceled:
            done = {call.tool_call_id for call, _ in decided}
            rest = [(c, r) for c, r in pause.asked if c.tool_call_id not in done]
            more, canceled = await self._cancel(rest)
            decided.extend(more)
            self._note(f"Canceled {len(canceled)} pending call(s); the model is told.")
        self._hide_panel()
        self._status("Thinking...")
        return await self.session.resume(pause, decided, canceled)

    async def _cancel(
        self, rest: Sequence[tuple[ToolCallPart, str]]
    ) -> tuple[list[tuple[ToolCallPart, Request]], list[ToolCallPart]]:
        """Withdraw the undecided requests: those someone decided meanwhile, and the rest."""
        decided: list[tuple[ToolCallPart, Request]] = []
        canceled: list[ToolCallPart] = []
        for call, request_id in rest:
            try:
                await self.session.backend.cancel(request_id, "canceled at the terminal")
                canceled.append(call)
            except InvalidTransition:
                request = await self.session.backend.get(request_id)
                self._note(f"{call.tool_name}: {_outcome(request, by_you=False)} (before Ctrl+C)")
                decided.append((call, request))
        return decided, canceled

    async def _ask(self, call: ToolCallPart, request_id: str, index: int, total: int) -> Request:
        """The decided request: from this terminal or, if it answers first, elsewhere."""
        backend = self.session.backend
        request = await backend.get(request_id)
        if request.status != "pending":
            self._note(f"{call.tool_name}: {_outcome(request, by_you=False)}")
            return request
        self._show_panel(call, request, index, total)
        waiter: asyncio.Future[Request] = asyncio.ensure_future(wait_decided(backend, request_id))
        try:
            while True:
                answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
                self._answer = answer
                either: set[asyncio.Future[Any]] = {waiter, answer}
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                if waiter.done():
                    request = waiter.result()
                    self._note(
                        f"{call.tool_name}: {_outcome(request, by_you=False)} "
                        "(decided elsewhere first)"
                    )
                    return request
                decision = self._decision(call, answer.result())
                if decision is None:
                    continue
                try:
                    request, won = await decide_here(self.decider, request_id, decision)
                except SignoffError as exc:
                    self._panel_error(f"not recorded: {exc.message}; you may decide elsewhere")
                    continue
                if request.status == "pending":
                    self._panel_error("your approval is recorded; waiting for the others")
                    return await waiter
                note = "" if won else " (decided elsewhere first)"
                self._note(f"{call.tool_name}: {_outcome(request, by_you=won)}{note}")
                return request
        finally:
            waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await waiter
            if self._answer is not None and self._answer.done() and not self._answer.cancelled():
                self._answer.exception()  # retrieved: no "never retrieved" complaint
            self._answer = None
            self._editing = False

    def _decision(self, call: ToolCallPart, text: str) -> dict[str, Any] | None:
        """The decision ``text`` makes, or None when it only changed the panel."""
        if self._editing:
            try:
                args = json.loads(text)
            except json.JSONDecodeError as exc:
                self._panel_error(f"not valid JSON: {exc.msg}; edit again or Esc")
                self._edit_input(text)
                return None
            if not isinstance(args, dict):
                self._panel_error("the arguments must be a JSON object")
                self._edit_input(text)
                return None
            problem = self.session.edit_problem(call.tool_name, args)
            if problem is not None:
                self._panel_error(f"{call.tool_name} does not accept these: {problem}")
                self._edit_input(text)
                return None
            return {"type": "approve", "args": args}
        answer = TerminalAnswer.parse(text)
        if answer.kind == "edit":
            self._editing = True
            self._panel_error("")
            self.query_one("#approval-help", Static).update(_EDIT_HELP)
            self._edit_input(dumps_visible(call.args_as_dict()))
            return None
        if answer.kind == "approve":
            return {"type": "approve"}
        return {"type": "reject", "reason": answer.reason}

    def _edit_input(self, text: str) -> None:
        prompt = self.query_one("#prompt", Input)
        prompt.value = text
        prompt.cursor_position = len(text)
        prompt.focus()

    def action_cancel_pending(self) -> None:
        """Ctrl+C: cancel every call waiting for approval in this pause."""
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(_Canceled())
        elif self.busy:
            self.notify("Nothing is waiting for approval; the agent is working.")
        else:
            self.notify("Nothing is waiting for approval. Ctrl+Q quits.")

    def action_leave_edit(self) -> None:
        """Esc while editing: back to approve or reject."""
        if self._editing:
            self._editing = False
            self.query_one("#prompt", Input).value = ""
            self.query_one("#approval-help", Static).update(_HELP)
            self._panel_error("")

    # -- the panel -----------------------------------------------------------------------

    def _show_panel(self, call: ToolCallPart, request: Request, index: int, total: int) -> None:
        args = request.tool_args if isinstance(request, ApprovalRequest) else call.args_as_dict()
        tool = visible(call.tool_name, multiline=False)
        self.query_one("#approval-title", Static).update(Text(f"Tool {index} of {total}: {tool}"))
        call_id = visible(call.tool_call_id, multiline=False)
        self.query_one("#approval-id", Static).update(
            Text(f"call id {call_id} · request {request.id}")
        )
        self.query_one("#approval-args", Static).update(
            Syntax(args_view(args), "json", theme="ansi_dark", word_wrap=True)
        )
        preview = request.preview if isinstance(request, ApprovalRequest) else None
        diff = self.query_one("#approval-diff", Static)
        if preview is not None and preview.diff:
            shown = visible(preview.diff)
            diff.update(Syntax(shown, "diff", theme="ansi_dark", word_wrap=True))
            diff.display = True
        else:
            diff.update("")
            diff.display = False
        self.query_one("#approval-help", Static).update(_HELP)
        self._panel_error("")
        self.query_one("#approval").add_class("shown")
        self._status(AWAITING)
        self.query_one("#prompt", Input).focus()

    def _panel_error(self, text: str) -> None:
        self.query_one("#approval-error", Static).update(Text(visible(text)))

    def _hide_panel(self) -> None:
        self.query_one("#approval").remove_class("shown")

    @property
    def panel_text(self) -> str:
        """The approval panel's title, id line and arguments, as plain text (for tests)."""
        parts = []
        for name in ("title", "id", "args", "diff", "error", "help"):
            content = self.query_one(f"#approval-{name}", Static).content
            parts.append(content.code if isinstance(content, Syntax) else str(content))
        return "\n".join(parts)

    @property
    def awaiting(self) -> bool:
        """Whether a call waits for the person at this terminal."""
        return self._answer is not None and not self._answer.done()


def _history_lines(session: ChatSession) -> list[str]:
    """A restored session's past prompts and replies, to show again."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    lines: list[str] = []
    for message in session.messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    lines.append(f"you: {part.content}")
        elif isinstance(message, ModelResponse):
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            if text:
                lines.append(f"agent: {text}")
    return lines
