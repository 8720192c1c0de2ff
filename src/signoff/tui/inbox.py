"""The terminal inbox (``signoff inbox``): the web inbox's functions, driven by the keyboard.

A live list of pending requests (kept current by the event stream), a detail pane, every
decision a request allows, batch approve / reject, and a history view. It works on any
:class:`signoff.backends.Backend`, so the same app runs on a database or against a server.

Everything an agent sent is rendered as plain :class:`rich.text.Text`, never as markup,
with its control and bidi characters shown as escapes (:mod:`signoff.terminal.safe_text`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar

from pydantic import JsonValue

try:
    from textual.app import App, ComposeResult
    from textual.binding import Binding, BindingType
    from textual.containers import Horizontal, Vertical, VerticalScroll
    from textual.screen import ModalScreen
    from textual.widgets import Footer, Header, Input, Label, OptionList, Static, TextArea
    from textual.widgets.option_list import Option
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("the terminal inbox needs Textual: pip install 'signoff[tui]'") from exc

from rich.text import Text

from signoff.backends import Backend
from signoff.domain.decisions import QUICK_REASONS, REASON_REQUIRED
from signoff.domain.requests import ApprovalRequest, ChoiceRequest, QuestionsRequest, Request
from signoff.errors import InvalidDecision, SignoffError
from signoff.store.base import RequestQuery
from signoff.terminal.outcome_lines import decided_notice
from signoff.terminal.render import STATUS_STYLE, request_details, summary
from signoff.terminal.safe_text import dumps_visible, visible

__all__ = [
    "AnswerScreen",
    "ChooseScreen",
    "EditArgsScreen",
    "HelpScreen",
    "InboxApp",
    "InboxDialog",
    "ReasonScreen",
    "parse_choice",
]

PENDING_LIMIT = 500
"""How many pending requests the list loads at start (the event stream adds the rest)."""
HISTORY_LIMIT = 200
"""How many decided requests the history view shows."""
RECONCILE_SECONDS = 5.0
"""How often the queue is re-read to catch what a (re)connecting event stream missed."""

KEYS: tuple[tuple[str, str], ...] = (
    ("j / ↓", "next request"),
    ("k / ↑", "previous request"),
    ("a", "approve (questions: approve as asked)"),
    ("r", "reject, with a reason or a quick pick's number (Enter rejects, Esc cancels)"),
    ("e", "edit the args field by field (Ctrl+R as JSON); Ctrl+S shows their diff to approve"),
    ("c", "choose: option number(s) 1..n, comma-separated for multi-select, or free text"),
    ("n", "answer the questions, with feedback (Enter moves on / sends, Ctrl+S sends)"),
    ("space", "select / unselect for a batch"),
    ("A", "approve every selected request"),
    ("R", "reject every selected request, with one reason"),
    ("h", "history: decided requests, who decided, the result (h again: pending)"),
    ("?", "this help"),
    ("q", "quit"),
)
"""The help screen's table; the footer shows the same keys."""


def _pretty(value: object) -> str:
    # JSON escapes for hidden characters: shown visibly, and the editor's text parses back
    # to exactly the value sent
    return dumps_visible(value, indent=2, sort_keys=True)


def _row(request: Request, *, selected: bool, history: bool) -> Text:
    """One line of the list; agent text stays literal."""
    line = Text()
    line.append("● " if selected else "  ", style="bold magenta")
    if history:
        line.append(f"{request.status:<9} ", style=STATUS_STYLE[request.status])
        by = visible(request.decision.decided_by, multiline=False) if request.decision else "-"
        line.append(f"{by[:12]:<12} ", style="cyan")
        if isinstance(request, ApprovalRequest) and request.result is not None:
            line.append("ok " if request.result.ok else "failed ", style="dim")
    else:
        line.append(f"{request.kind:<9} ", style="dim")
        if request.expires_at is not None:
            line.append("⏱ ", style="magenta")
    line.append(summary(request))
    line.no_wrap = True
    line.overflow = "ellipsis"
    return line


def parse_choice(request: ChoiceRequest, text: str) -> dict[str, Any]:
    """The ``choose`` decision typed as option numbers (1..n), comma-separated for a
    multi-select, or as free text where the request allows it."""
    text = text.strip()
    count = len(request.options)
    if not text:
        raise InvalidDecision(f"type an option number from 1 to {count}")
    parts = [p.strip() for p in text.split(",")] if request.multi_select else [text]
    chosen: list[str] = []
    for part in filter(None, parts):
        if part.isdigit() and 1 <= int(part) <= count:
            chosen.append(request.options[int(part) - 1])
        elif part in request.options or request.allow_other:
            chosen.append(part)
        else:
            raise InvalidDecision(f"{part!r} is not an option: type a number from 1 to {count}")
    if request.multi_select:
        return {"type": "choose", "choices": list(dict.fromkeys(chosen))}
    return {"type": "choose", "choice": chosen[0]}


class InboxDialog(ModalScreen[Any]):
    """A modal box over the inbox; Esc cancels it."""

    DEFAULT_CSS = """
    InboxDialog { align: center middle; }
    InboxDialog > Vertical {
        width: 90%; max-width: 110; height: auto; max-height: 90%;
        border: thick $accent; background: $surface; padding: 1 2;
    }
    InboxDialog .hint { color: $text-muted; }
    InboxDialog .error { color: $error; }
    InboxDialog TextArea { height: 16; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    AUTO_FOCUS = "Input, TextArea"

    def action_cancel(self) -> None:
        """Close without deciding."""
        self.dismiss(None)

    def show_error(self, message: str) -> None:
        """Say why the input was refused, and stay open."""
        self.query_one("#dialog-error", Static).update(Text(message))


class ReasonScreen(InboxDialog):
    """Asks for a reason (required); a quick pick's number fills it in; Esc cancels."""

    def __init__(self, title: str) -> None:
        super().__init__()
        self.title_text = title

    def compose(self) -> ComposeResult:
        picks = "   ".join(f"{n}) {text}" for n, text in enumerate(QUICK_REASONS, 1))
        with Vertical():
            yield Label(Text(self.title_text, style="bold"))
            yield Input(placeholder="reason, told to the agent (required)", id="reason")
            yield Label(Text(f"Quick picks: {picks}"), classes="hint")
            yield Label(
                Text("a number + Enter fills in that reason · Enter rejects · Esc cancels"),
                classes="hint",
            )
            yield Static(id="dialog-error", classes="error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter: fill in a quick pick typed by number, else reject with this reason."""
        event.stop()
        text = event.value.strip()
        if text.isdigit() and 1 <= int(text) <= len(QUICK_REASONS):
            event.input.value = QUICK_REASONS[int(text) - 1]
            event.input.cursor_position = len(event.input.value)
            self.show_error("")
        elif not text:
            self.show_error(REASON_REQUIRED)
        else:
            self.dismiss(text)


class EditArgsScreen(InboxDialog):
    """A JSON editor for a tool call's args (``args``, else the agent's); only a JSON object
    is accepted, and given back to be reviewed (signoff.tui.editing)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "save", "Review the edit"),
    ]

    def __init__(self, request: ApprovalRequest, args: dict[str, JsonValue] | None = None) -> None:
        super().__init__()
        self.request = request
        self.args = request.tool_args if args is None else args

    def compose(self) -> ComposeResult:
        with Vertical():
            tool = visible(self.request.tool_name, multiline=False)
            yield Label(Text(f"edit the args of {tool} as JSON", style="bold"))
            yield TextArea(_pretty(self.args), id="args")
            yield Label(Text("Ctrl+S reviews the edited call's diff · Esc cancels"), classes="hint")
            yield Static(id="dialog-error", classes="error")

    def action_save(self) -> None:
        """Give back the edited args, if they are a JSON object."""
        text = self.query_one("#args", TextArea).text
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            self.show_error(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
            return
        if not isinstance(value, dict):
            self.show_error(f"the args must be a JSON object, not {type(value).__name__}")
            return
        self.dismiss(value)


class ChooseScreen(InboxDialog):
    """Picks a choice request's option(s) by number, or free text where allowed."""

    def __init__(self, request: ChoiceRequest) -> None:
        super().__init__()
        self.request = request

    def compose(self) -> ComposeResult:
        r = self.request
        with Vertical():
            yield Label(Text(visible(r.prompt), style="bold"))
            for n, option in enumerate(r.options, 1):
                yield Label(Text(f"  {n}. {visible(option, multiline=False)}"))
            how = "numbers, comma-separated" if r.multi_select else "a number"
            other = ", or free text" if r.allow_other else ""
            yield Input(placeholder=f"{how} from 1 to {len(r.options)}{other}", id="choice")
            yield Label(Text("Enter chooses · Esc cancels"), classes="hint")
            yield Static(id="dialog-error", classes="error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter: choose what was typed, or say why it is not an option."""
        event.stop()
        try:
            decision = parse_choice(self.request, event.value)
        except InvalidDecision as exc:
            self.show_error(exc.message)
            return
        self.dismiss(decision)


class AnswerScreen(InboxDialog):
    """One input per question and one for overall feedback; sends an ``answer`` decision."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "send", "Send answers"),
    ]

    def __init__(self, request: QuestionsRequest) -> None:
        super().__init__()
        self.request = request

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            if self.request.prompt:
                yield Label(Text(visible(self.request.prompt), style="bold"))
            for n, q in enumerate(self.request.questions, 1):
                asked = visible(q.text, multiline=False)
                yield Label(Text(f"{n}. {asked}" + (" (required)" if q.required else "")))
                yield Input(id=f"answer-{n}", classes="field")
            yield Label(Text("feedback (optional)"))
            yield Input(id="feedback", classes="field")
            yield Label(
                Text("Enter moves on, on the last field sends · Ctrl+S sends · Esc cancels"),
                classes="hint",
            )
            yield Static(id="dialog-error", classes="error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter: the next field, or send from the last one."""
        event.stop()
        if event.input.id == "feedback":
            self.action_send()
        else:
            self.focus_next(Input)

    def action_send(self) -> None:
        """Send the answers typed so far."""
        answers: dict[str, str] = {}
        for n, q in enumerate(self.request.questions, 1):
            value = self.query_one(f"#answer-{n}", Input).value
            if value:
                answers[q.id] = value
        feedback = self.query_one("#feedback", Input).value
        self.dismiss({"type": "answer", "answers": answers, "feedback": feedback or None})


class HelpScreen(InboxDialog):
    """Every key of the inbox."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "cancel", "Close"),
    ]

    def compose(self) -> ComposeResult:
        table = Text()
        for key, does in KEYS:
            table.append(f"{key:<8}", style="bold")
            table.append(does + "\n")
        table.rstrip()
        with Vertical():
            yield Label(Text("signoff inbox: keys", style="bold"))
            yield Static(table, id="help-keys")
            yield Label(Text("Esc, q or ? closes"), classes="hint")


_DONE = {"approve": "approved", "edit": "edited", "choose": "chosen", "answer": "answered"}
"""Each verb of a key that acts on one kind, as "only choice requests can be chosen"."""

_INBOX_ACTIONS = frozenset(
    {
        "cursor_down",
        "cursor_up",
        "approve",
        "reject",
        "edit",
        "choose",
        "answer",
        "toggle_select",
        "approve_selected",
        "reject_selected",
        "toggle_history",
        "help",
    }
)


class InboxApp(App[None]):
    """The terminal inbox on one backend."""

    TITLE = "signoff inbox"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    #main { height: 1fr; }
    #requests { width: 2fr; height: 1fr; text-wrap: nowrap; text-overflow: ellipsis; }
    #detail-box { width: 3fr; height: 1fr; border-left: solid $accent; padding: 0 1; }
    #status { height: 1; padding: 0 1; background: $boost; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "cursor_down", "Down", key_display="j"),
        Binding("k,up", "cursor_up", "Up", key_display="k"),
        Binding("a", "approve", "Approve"),
        Binding("r", "reject", "Reject"),
        Binding("e", "edit", "Edit"),
        Binding("c", "choose", "Choose"),
        Binding("n", "answer", "Answer"),
        Binding("space", "toggle_select", "Select"),
        Binding("A", "approve_selected", "Approve sel"),
        Binding("R", "reject_selected", "Reject sel"),
        Binding("h", "toggle_history", "History"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, backend: Backend, *, refresh: float = RECONCILE_SECONDS) -> None:
        super().__init__()
        self.backend = backend
        self.refresh_seconds = refresh
        """How often the queue is re-read, for what the event stream cannot deliver."""
        self.history = False
        """Whether the list shows decided requests instead of pending ones."""
        self.selected: set[str] = set()
        """Ids selected for a batch decision."""
        self.status_message = ""
        """The last message on the status line (also notified)."""
        self._known: dict[str, Request] = {}
        self._last_seq: int | None = None

    # layout and state

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="main"):
            yield OptionList(id="requests", markup=False)
            with VerticalScroll(id="detail-box"):
                yield Static(id="detail")
        yield Static(id="status")
        yield Footer(compact=True)

    async def on_mount(self) -> None:
        """Load the queue, then follow the event stream."""
        self.query_one("#requests", OptionList).focus()
        await self._reload()
        self.run_worker(self._follow(), name="events", group="events", exit_on_error=False)
        self.set_interval(1.0, self._tick)
        self.set_timer(1.0, self._start_reconcile)
        self.set_interval(self.refresh_seconds, self._start_reconcile)

    def _start_reconcile(self) -> None:
        # the function, not a coroutine: a worker never started while the app closes
        # leaves no coroutine behind un-awaited (Textual runs an async function as one;
        # its run_worker typing infers no result type for a bare async method)
        self.run_worker(self._reconcile, group="reconcile", exclusive=True)  # type: ignore[arg-type]

    async def _reconcile(self) -> None:
        """Re-read the queue: the stream cannot deliver what happened while it connected."""
        try:
            page = await self.backend.list_requests(
                RequestQuery(status="pending", limit=PENDING_LIMIT)
            )
        except SignoffError:
            return  # the event stream's reconnect loop reports an unreachable backend
        changed = [self._merge(r) for r in page.items]
        if any(changed):
            self._render_list()
        if page.next_cursor is None:
            fresh = {r.id for r in page.items}
            for known in list(self._known.values()):
                if known.status == "pending" and known.id not in fresh:
                    await self._refresh_one(known.id)

    def _tick(self) -> None:
        """Count an expiring request down in the detail pane."""
        if not self.query("#requests"):  # closing: the widgets go before the timers stop
            return
        request = self.current
        if request is not None and request.expires_at is not None and not self.history:
            self._render_detail()

    @property
    def visible_ids(self) -> list[str]:
        """The ids the list shows, top to bottom."""
        return [r.id for r in self._listed()]

    @property
    def current(self) -> Request | None:
        """The highlighted request."""
        option = self.query_one("#requests", OptionList).highlighted_option
        return None if option is None or option.id is None else self._known.get(option.id)

    def _listed(self) -> list[Request]:
        if self.history:
            done = [r for r in self._known.values() if r.status != "pending"]
            return sorted(done, key=lambda r: r.updated_at, reverse=True)[:HISTORY_LIMIT]
        pending = [r for r in self._known.values() if r.status == "pending"]
        return sorted(pending, key=lambda r: r.created_at, reverse=True)

    def _render_list(self) -> None:
        listing = self.query_one("#requests", OptionList)
        keep = self.current
        old_index = listing.highlighted or 0
        shown = self._listed()
        listing.set_options(
            Option(_row(r, selected=r.id in self.selected, history=self.history), id=r.id)
            for r in shown
        )
        ids = [r.id for r in shown]
        if keep is not None and keep.id in ids:
            listing.highlighted = ids.index(keep.id)
        elif ids:
            listing.highlighted = min(old_index, len(ids) - 1)
        view = "history" if self.history else "pending"
        picked = f" · {len(self.selected)} selected" if self.selected else ""
        self.sub_title = f"{len(ids)} {view}{picked}"
        self._render_detail()

    def _render_detail(self) -> None:
        request = self.current
        detail = self.query_one("#detail", Static)
        if request is None:
            empty = "no decided requests yet" if self.history else "nothing awaits you"
            detail.update(Text(empty, style="dim"))
        else:
            detail.update(request_details(request))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        """Show the highlighted request in the detail pane."""
        self._render_detail()

    def say(self, message: str, *, error: bool = False) -> None:
        """Put a message on the status line and in a notification (as plain text)."""
        message = visible(message, multiline=False)  # it may quote agent text
        self.status_message = message
        self.query_one("#status", Static).update(Text(message, style="red" if error else ""))
        self.notify(message, severity="error" if error else "information", markup=False)

    def _merge(self, request: Request) -> bool:
        """Keep a newer copy of a request; whether it was newer than the one known."""
        known = self._known.get(request.id)
        if known is not None and known.version >= request.version:
            return False
        self._known[request.id] = request
        if request.status != "pending":
            self.selected.discard(request.id)
        return True

    def _apply(self, request: Request) -> None:
        """Take a newer copy of a request and show it; stale copies are ignored."""
        if self._merge(request):
            self._render_list()

    async def _reload(self) -> None:
        """Load the pending queue (and history when shown) afresh."""
        try:
            items = (
                await self.backend.list_requests(
                    RequestQuery(status="pending", limit=PENDING_LIMIT)
                )
            ).items
            if self.history:
                items += (await self.backend.list_requests(RequestQuery(limit=HISTORY_LIMIT))).items
        except SignoffError as exc:
            self.say(exc.message, error=True)
            return
        self._known = {}
        for request in items:
            self._known.setdefault(request.id, request)
        self.selected &= {r.id for r in items if r.status == "pending"}
        self._render_list()

    async def _follow(self) -> None:
        """Apply every event; after a dropped stream, reconnect and replay what was missed."""
        delay = 0.5
        while True:
            try:
                async for event in self.backend.events(since=self._last_seq):
                    self._last_seq = event.seq
                    self._apply(event.request)
                    delay = 0.5
            except SignoffError as exc:
                self.say(f"live updates stopped: {exc.message}; reconnecting", error=True)
            except Exception as exc:  # keep following whatever broke; say what it was
                self.say(f"live updates stopped: {exc!r}; reconnecting", error=True)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)
            if self._last_seq is None:
                await self._reload()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The inbox's keys act only when no dialog is open."""
        return not (action in _INBOX_ACTIONS and len(self.screen_stack) > 1)

    # deciding

    def _target(self, *, kind: str | None = None, verb: str) -> Request | None:
        """The highlighted pending request, or None after saying why there is none."""
        request = self.current
        if self.history:
            self.say("the history is read-only: press h for the pending queue", error=True)
            return None
        if request is None:
            self.say(f"nothing to {verb}", error=True)
            return None
        if kind is not None and request.kind != kind:
            self.say(f"only {kind} requests can be {_DONE.get(verb, verb)} this way", error=True)
            return None
        return request

    async def _decide(self, request: Request, decision: dict[str, Any]) -> None:
        try:
            updated = await self.backend.decide(request.id, decision)
        except SignoffError as exc:
            where = "" if request.id in exc.message else f"{request.id}: "
            self.say(where + exc.message, error=True)
            await self._refresh_one(request.id)
            return
        self._apply(updated)
        self.say(decided_notice(updated))

    async def _refresh_one(self, request_id: str) -> None:
        try:
            self._apply(await self.backend.get(request_id))
        except SignoffError:
            self._known.pop(request_id, None)
            self.selected.discard(request_id)
            self._render_list()

    async def action_approve(self) -> None:
        """Approve the highlighted request as proposed (scope once)."""
        request = self._target(verb="approve")
        if request is None:
            return
        if isinstance(request, ChoiceRequest):
            self.say("a choice request is answered with c (choose)", error=True)
            return
        await self._decide(request, {"type": "approve"})

    def action_reject(self) -> None:
        """Ask for a reason, then reject the highlighted request."""
        request = self._target(verb="reject")
        if request is None:
            return

        async def done(reason: str | None) -> None:
            if reason is not None:
                await self._decide(request, {"type": "reject", "reason": reason})

        self.push_screen(ReasonScreen(f"reject {summary(request)}"), done)

    def action_edit(self) -> None:
        """Edit the highlighted call's args, see the edit's diff, then approve the edit."""
        request = self._target(kind="approval", verb="edit")
        if not isinstance(request, ApprovalRequest):
            return
        if not request.editable:
            self.say(
                f"{request.id} may not be edited: a approves it as proposed, r rejects it",
                error=True,
            )
            return

        async def done(args: dict[str, JsonValue] | None) -> None:
            if args is not None:
                await self._decide(request, {"type": "approve", "args": args})

        # imported here: the editing screens build on this module's dialogs
        from signoff.tui.editing import ArgsFormScreen

        self.push_screen(ArgsFormScreen(request, self.backend), done)

    def action_choose(self) -> None:
        """Choose the highlighted choice request's option(s)."""
        request = self._target(kind="choice", verb="choose")
        if not isinstance(request, ChoiceRequest):
            return

        async def done(decision: dict[str, Any] | None) -> None:
            if decision is not None:
                await self._decide(request, decision)

        self.push_screen(ChooseScreen(request), done)

    def action_answer(self) -> None:
        """Answer the highlighted questions request."""
        request = self._target(kind="questions", verb="answer")
        if not isinstance(request, QuestionsRequest):
            return

        async def done(decision: dict[str, Any] | None) -> None:
            if decision is not None:
                await self._decide(request, decision)

        self.push_screen(AnswerScreen(request), done)

    def action_toggle_select(self) -> None:
        """Select or unselect the highlighted request for a batch decision."""
        request = self._target(verb="select")
        if request is None:
            return
        self.selected ^= {request.id}
        self._render_list()

    async def _decide_selected(self, type_: str, reason: str = "") -> None:
        ids = [r.id for r in self._listed() if r.id in self.selected]
        try:
            outcomes = await self.backend.decide_many(ids, type_, reason)
        except SignoffError as exc:
            self.say(exc.message, error=True)
            return
        failed = [o for o in outcomes if o.error is not None]
        done = len(outcomes) - len(failed)
        message = f"{done} {type_.removesuffix('e')}ed"
        if failed:
            first = failed[0]
            why = first.error.message if first.error is not None else "?"
            message += f", {len(failed)} failed ({first.id}: {why})"
        for outcome in outcomes:
            await self._refresh_one(outcome.id)
        self.say(message, error=bool(failed))

    def _selection(self) -> bool:
        if self.history:
            self.say("the history is read-only: press h for the pending queue", error=True)
            return False
        if not self.selected:
            self.say("nothing selected: space selects requests", error=True)
            return False
        return True

    async def action_approve_selected(self) -> None:
        """Approve every selected request."""
        if self._selection():
            await self._decide_selected("approve")

    def action_reject_selected(self) -> None:
        """Ask for one reason, then reject every selected request."""
        if not self._selection():
            return

        async def done(reason: str | None) -> None:
            if reason is not None:
                await self._decide_selected("reject", reason)

        self.push_screen(ReasonScreen(f"reject {len(self.selected)} selected requests"), done)

    async def action_toggle_history(self) -> None:
        """Switch between the pending queue and the decided requests."""
        self.history = not self.history
        await self._reload()

    def action_help(self) -> None:
        """Show every key."""
        self.push_screen(HelpScreen())

    def action_cursor_down(self) -> None:
        """Highlight the next request."""
        self.query_one("#requests", OptionList).action_cursor_down()

    def action_cursor_up(self) -> None:
        """Highlight the previous request."""
        self.query_one("#requests", OptionList).action_cursor_up()
