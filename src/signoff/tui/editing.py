"""Editing a tool call's arguments in ``signoff inbox``, and seeing what the edit would do.

``e`` opens one input per argument, typed by the tool's JSON Schema when the request carries
one (else by the value the agent sent): a text area for a string, a number input, a
checkbox, a select for an enum, and JSON for nested or unknown shapes (Ctrl+R edits the whole
arguments as JSON). Ctrl+S asks the backend for the call's preview made again for the edited
arguments (``preview_edit``: the server's endpoint, or the same service method in process),
shows the schema's complaints beside their fields, and, when they fit, a confirm screen with
the recomputed diff before anything is approved. Agent text is shown as plain text with its
hidden characters escaped; a string holding any is edited as JSON.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import JsonValue
from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Checkbox, Input, Label, Select, Static, TextArea

from signoff.backends import Backend
from signoff.domain.edits import EditPreview
from signoff.domain.requests import ApprovalRequest
from signoff.errors import SignoffError
from signoff.terminal.render import diff_text, preview_parts
from signoff.terminal.safe_text import dumps_visible, visible
from signoff.tui.inbox import EditArgsScreen, InboxDialog

__all__ = ["NOTICE", "ArgsFormScreen", "ConfirmEditScreen", "field_kind"]

NOTICE = "You are approving these edited arguments, not what the agent asked"
"""What the confirm screen says above an edited call's diff."""

Kind = Literal["text", "integer", "number", "boolean", "enum", "json"]

_SIMPLE = (str, int, float, bool)


def _pretty(value: object) -> str:
    return dumps_visible(value, indent=2, sort_keys=True)


def _schema_type(prop: Mapping[str, Any]) -> str | None:
    kind = prop.get("type")
    if isinstance(kind, list):
        return kind[0] if len(kind) == 1 and isinstance(kind[0], str) else None
    return kind if isinstance(kind, str) else None


def field_kind(prop: Mapping[str, Any] | None, value: object, present: bool) -> Kind:
    """How an argument is edited: from its schema property, else from the value sent.

    A value that does not fit the field it would get (a string holding hidden characters,
    a float in an integer field) is edited as JSON, exactly as sent.
    """
    kind: Kind = "json"
    enum = prop.get("enum") if prop is not None else None
    if isinstance(enum, list) and enum and all(isinstance(e, _SIMPLE) for e in enum):
        kind = "enum"
    elif prop is not None and _schema_type(prop) is not None:
        kind = _by_schema(_schema_type(prop))
    elif present:
        kind = _by_value(value)
    if not present or _fits(kind, value, enum):
        return kind
    return "json"


def _by_schema(name: str | None) -> Kind:
    if name == "string":
        return "text"
    if name in ("integer", "number", "boolean"):
        return name  # type: ignore[return-value]
    return "json"


def _by_value(value: object) -> Kind:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "text" if isinstance(value, str) else "json"


def _fits(kind: Kind, value: object, enum: object) -> bool:
    if kind == "text":
        return isinstance(value, str) and visible(value) == value
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "enum":
        return isinstance(enum, list) and any(e == value and type(e) is type(value) for e in enum)
    return True


@dataclass
class _Field:
    """One argument's input; read() gives its value, or raises ValueError saying why not."""

    name: str
    kind: Kind
    widget: Widget
    present: bool
    enum: list[Any]

    def read(self) -> tuple[bool, JsonValue]:
        """(whether the argument is sent, its value)."""
        widget = self.widget
        if isinstance(widget, TextArea):
            text = widget.text
            if self.kind == "text":
                return self.present or bool(text), text
            if not text.strip():
                return False, None
            try:
                value: JsonValue = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not valid JSON: {exc.msg}") from None
            return True, value
        if isinstance(widget, Checkbox):
            return self.present or widget.value, widget.value
        if isinstance(widget, Select):
            chosen = widget.value
            return (False, None) if not isinstance(chosen, int) else (True, self.enum[chosen])
        assert isinstance(widget, Input)
        raw = widget.value.strip()
        if not raw:
            return False, None
        try:
            return True, int(raw) if self.kind == "integer" else float(raw)
        except ValueError:
            raise ValueError(
                f"not {'an integer' if self.kind == 'integer' else 'a number'}"
            ) from None


def _widget(kind: Kind, value: object, present: bool, enum: list[Any], wid: str) -> Widget:
    if kind == "text":
        return TextArea(str(value) if present else "", id=wid, soft_wrap=True)
    if kind in ("integer", "number"):
        shown = str(value) if present else ""
        return Input(shown, type="integer" if kind == "integer" else "number", id=wid)
    if kind == "boolean":
        return Checkbox("yes", value=value is True, id=wid)
    if kind == "enum":
        options = [(Text(visible(str(e), multiline=False)), i) for i, e in enumerate(enum)]
        chosen = next((i for i, e in enumerate(enum) if present and e == value), Select.NULL)
        return Select(options, value=chosen, allow_blank=not present, id=wid)
    return TextArea(_pretty(value) if present else "", id=wid, soft_wrap=True)


class ArgsFormScreen(InboxDialog):
    """One input per argument; Ctrl+S reviews the edit's preview, then asks to approve it.

    Dismissed with the edited arguments once the person confirms them, or None.
    """

    DEFAULT_CSS = """
    ArgsFormScreen VerticalScroll { height: auto; max-height: 30; }
    ArgsFormScreen TextArea { height: auto; min-height: 3; max-height: 10; }
    ArgsFormScreen .arg-name { margin-top: 1; text-style: bold; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "review", "Review the edit"),
        Binding("ctrl+r", "raw", "Raw JSON"),
    ]
    AUTO_FOCUS = "TextArea, Input, Checkbox, Select"

    def __init__(
        self,
        request: ApprovalRequest,
        backend: Backend,
        args: Mapping[str, JsonValue] | None = None,
    ) -> None:
        super().__init__()
        self.request = request
        self.backend = backend
        self.args: dict[str, JsonValue] = dict(request.tool_args if args is None else args)
        self.fields: list[_Field] = []
        schema = request.args_schema or {}
        props = schema.get("properties")
        self._props: dict[str, Any] = props if isinstance(props, dict) else {}
        required = schema.get("required")
        self._required = set(required) if isinstance(required, list) else set()

    def compose(self) -> ComposeResult:
        names = [*self.args, *(n for n in self._props if n not in self.args)]
        self.fields = []
        with Vertical():
            tool = visible(self.request.tool_name, multiline=False)
            yield Label(Text(f"edit the args of {tool}", style="bold"))
            with VerticalScroll():
                for number, name in enumerate(names):
                    yield from self._field(number, name)
            yield Label(
                Text("Ctrl+S reviews the edited call's diff · Ctrl+R raw JSON · Esc cancels"),
                classes="hint",
            )
            yield Static(id="dialog-error", classes="error")

    def _field(self, number: int, name: str) -> ComposeResult:
        prop = self._props.get(name)
        prop = prop if isinstance(prop, dict) else None
        present = name in self.args
        value = self.args.get(name)
        kind = field_kind(prop, value, present)
        enum = list(prop["enum"]) if kind == "enum" and prop is not None else []
        widget = _widget(kind, value, present, enum, f"arg-{number}")
        self.fields.append(_Field(name, kind, widget, present, enum))
        label = visible(name, multiline=False) + (" *" if name in self._required else "")
        hint = " (JSON)" if kind == "json" else ""
        yield Label(Text(label + hint), classes="arg-name")
        yield widget
        yield Static(id=f"arg-error-{number}", classes="error")

    def field_error(self, name: str) -> str:
        """What is shown under argument ``name`` (empty when nothing)."""
        number = next(i for i, f in enumerate(self.fields) if f.name == name)
        return str(self.query_one(f"#arg-error-{number}", Static).content)

    def _say(self, number: int | None, message: str) -> None:
        where = "#dialog-error" if number is None else f"#arg-error-{number}"
        self.query_one(where, Static).update(Text(visible(message)))

    def _collect(self) -> dict[str, JsonValue] | None:
        """The edited arguments, or None with each field's problem shown beside it."""
        args: dict[str, JsonValue] = {}
        good = True
        for number, item in enumerate(self.fields):
            self._say(number, "")
            try:
                sent, value = item.read()
            except ValueError as exc:
                self._say(number, str(exc))
                good = False
                continue
            if sent:
                args[item.name] = value
        return args if good else None

    def action_review(self) -> None:
        """Ask for the edit's preview; show its misfits, or the confirm screen."""
        self._say(None, "")
        args = self._collect()
        if args is None:
            self._say(None, "fix the fields marked above")
            return
        self.run_worker(self.review(args), exclusive=True)

    async def review(self, args: dict[str, JsonValue]) -> None:
        """The preview of ``args`` from the backend, then the confirm screen if they fit."""
        if args == self.request.tool_args:
            self._say(None, "nothing changed; a approves the call as proposed")
            return
        try:
            seen = await self.backend.preview_edit(self.request.id, args)
        except SignoffError as exc:
            self._say(None, exc.message)
            return
        if seen.errors:
            for problem in seen.errors:
                number = next(
                    (i for i, f in enumerate(self.fields) if f.name == problem.field), None
                )
                self._say(number, problem.message)
            self._say(None, "the edited args do not fit the tool's schema: fix the fields marked")
            return

        def confirmed(approve: bool | None) -> None:
            if approve:
                self.dismiss(args)

        self.app.push_screen(ConfirmEditScreen(self.request, seen), confirmed)

    def action_raw(self) -> None:
        """Edit the whole arguments as JSON; Ctrl+S there reviews them the same way."""
        args = self._collect()

        async def edited(value: dict[str, JsonValue] | None) -> None:
            if value is None:
                return
            self.args = value
            await self.recompose()
            await self.review(value)

        self.app.push_screen(EditArgsScreen(self.request, args or self.args), edited)


class ConfirmEditScreen(InboxDialog):
    """The edited call's diff, recomputed, and the arguments against the agent's; Enter
    approves them, Esc goes back to editing."""

    DEFAULT_CSS = """
    ConfirmEditScreen VerticalScroll { height: auto; max-height: 34; }
    ConfirmEditScreen .notice { text-style: bold; color: $warning; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Back to editing"),
        Binding("enter,y", "approve", "Approve edited call"),
    ]
    AUTO_FOCUS = "VerticalScroll"

    def __init__(self, request: ApprovalRequest, seen: EditPreview) -> None:
        super().__init__()
        self.request = request
        self.seen = seen

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text(NOTICE), classes="notice")
            with VerticalScroll():
                yield Static(_edit_summary(self.request, self.seen), id="edit-preview")
            yield Label(
                Text("Enter approves the edited call · Esc goes back to editing"), classes="hint"
            )
            yield Static(id="dialog-error", classes="error")

    def action_approve(self) -> None:
        """Approve with the edited arguments."""
        self.dismiss(True)


def _edit_summary(request: ApprovalRequest, seen: EditPreview) -> RenderableType:
    before = _pretty(request.tool_args).splitlines()
    after = _pretty(seen.args).splitlines()
    changes = "\n".join(
        difflib.unified_diff(before, after, "the agent's args", "your edit", lineterm="")
    )
    parts: list[RenderableType] = []
    if seen.preview is not None:
        parts += preview_parts(seen.preview)
    else:
        parts.append(Text("(this call writes no file: no diff to show)", style="dim"))
    parts += [Text("args: the agent's vs your edit", style="bold"), diff_text(visible(changes))]
    return Group(*parts)
