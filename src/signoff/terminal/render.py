"""How requests look in a terminal. Agent-supplied text is never read as rich markup."""

from __future__ import annotations

import json
from datetime import datetime

from rich.console import Group, RenderableType
from rich.highlighter import JSONHighlighter
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from signoff.domain.audit import AuditEntry
from signoff.domain.events import Event
from signoff.domain.previews import FilePreview, origin_label
from signoff.domain.requests import ApprovalRequest, ChoiceRequest, QuestionsRequest, Request
from signoff.terminal.safe_text import dumps_visible, visible, visible_json

__all__ = [
    "STATUS_STYLE",
    "audit_table",
    "decision_json",
    "diff_text",
    "event_line",
    "json_text",
    "preview_parts",
    "request_details",
    "request_panel",
    "requests_table",
    "summary",
]

PANEL_ARG_LINES = 40
"""How many lines of arguments ``signoff show`` prints before pointing to ``--json``."""

STATUS_STYLE = {
    "pending": "yellow",
    "approved": "green",
    "executing": "cyan",
    "completed": "green",
    "rejected": "red",
    "expired": "magenta",
    "canceled": "dim",
    "failed": "red",
}


def summary(request: Request) -> str:
    """One line saying what the request is about (agent text with its controls escaped)."""
    if isinstance(request, ApprovalRequest):
        args = dumps_visible(request.tool_args)
        line = f"{request.tool_name} {args[:80]}{'…' if len(args) > 80 else ''}"
    elif isinstance(request, ChoiceRequest):
        line = f"{request.prompt[:60]} [{' / '.join(request.options)[:40]}]"
    else:
        first = request.questions[0].text if request.questions else ""
        line = f"{len(request.questions)} question(s): {first[:60]}"
    return visible(line, multiline=False)


def _when(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S") if at else "-"


def requests_table(requests: list[Request]) -> Table:
    """A table of requests, one row each."""
    table = Table(box=None, pad_edge=False)
    # Ids are never cut: people copy them into the next command.
    table.add_column("id", no_wrap=True, min_width=26)
    table.add_column("kind", no_wrap=True, min_width=9)
    table.add_column("status", no_wrap=True, min_width=9)
    for column in ("session", "by"):
        table.add_column(column, no_wrap=True, max_width=16)
    table.add_column("what", no_wrap=True, overflow="ellipsis", max_width=40)
    for column in ("created", "expires"):
        table.add_column(column, no_wrap=True)
    for r in requests:
        table.add_row(
            Text(r.id),
            Text(r.kind),
            Text(r.status, style=STATUS_STYLE[r.status]),
            Text(visible(r.session_id, multiline=False)),
            Text(visible(r.requested_by, multiline=False)),
            Text(summary(r)),
            Text(_when(r.created_at)),
            Text(_when(r.expires_at)),
        )
    return table


def _args_syntax(args: object, max_lines: int | None) -> Syntax:
    text = dumps_visible(args, indent=2, sort_keys=True)
    lines = text.splitlines()
    if max_lines is not None and len(lines) > max_lines:
        hidden = len(lines) - max_lines
        text = "\n".join([*lines[:max_lines], f"... {hidden} more lines (use --json)"])
    return Syntax(text, "json", word_wrap=True)


def diff_text(diff: str) -> Text:
    """A unified diff as plain text: removed lines red, added lines green, hunks cyan."""
    out = Text()
    for line in diff.splitlines() or ["(no change)"]:
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        else:
            style = ""
        out.append(line + "\n", style=style)
    out.rstrip()
    return out


def preview_parts(preview: FilePreview) -> list[RenderableType]:
    """A call's preview: the file it writes (and whose old text it shows), a note, the diff."""
    origin = origin_label(preview)
    title = f"diff of {visible(preview.path, multiline=False)}" + (f" ({origin})" if origin else "")
    parts: list[RenderableType] = [Text(title, style="bold")]
    if preview.note:
        parts.append(Text(visible(preview.note), style="yellow"))
    parts.append(diff_text(visible(preview.diff)))
    return parts


def request_panel(request: Request, audit: list[AuditEntry] | None = None) -> RenderableType:
    """``signoff show``: the request's details and its audit trail, in a panel."""
    parts: list[RenderableType] = [request_details(request, max_arg_lines=PANEL_ARG_LINES)]
    if audit:
        parts += [Text("audit", style="bold"), audit_table(audit)]
    return Panel(Group(*parts), title=Text(f"{request.kind} request"), expand=False)


def request_details(request: Request, *, max_arg_lines: int | None = None) -> Group:
    """Everything a person needs to decide: the call, its diff, grant, votes, decision.

    The terminal inbox's detail pane and ``signoff show`` both show this; ``max_arg_lines``
    cuts long arguments (None shows them all).
    """
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()

    def row(label: str, value: str | None) -> None:
        if value:
            head.add_row(label, Text(visible(value, multiline=False)))

    row("id", request.id)
    head.add_row("status", Text(request.status, style=STATUS_STYLE[request.status]))
    row("kind", request.kind)
    row("session", request.session_id)
    row("requested by", request.requested_by)
    row("run started by", request.started_by)
    row("created", _when(request.created_at))
    row(
        "expires",
        f"{_when(request.expires_at)} (then {request.on_expire})" if request.expires_at else None,
    )
    row("policy", request.policy_note)
    if request.approvers or request.quorum > 1:
        row("approvers", ", ".join(request.approvers) or "any approver")
        row("quorum", f"{len(request.votes)} of {request.quorum} approvals")
    row("allowed", ", ".join(request.allowed_decisions))
    if isinstance(request, ApprovalRequest) and request.claimed_by is not None:
        leased = request.status == "executing" and request.lease_until is not None
        lease = f"; lease until {_when(request.lease_until)}" if leased else ""
        row("claimed", f"by {request.claimed_by} at {_when(request.claimed_at)}{lease}")
    if isinstance(request, ApprovalRequest) and not request.editable:
        row("edits", "not allowed: approve as proposed or reject")
    parts: list[RenderableType] = [head]
    if request.context is not None:
        parts += [
            Text("context", style="bold"),
            Text(dumps_visible(request.context)),
        ]
    if isinstance(request, ApprovalRequest):
        tool = visible(request.tool_name, multiline=False)
        parts += [
            Text(f"tool: {tool}", style="bold"),
            _args_syntax(request.tool_args, max_arg_lines),
        ]
        if request.preview is not None:
            parts += preview_parts(request.preview)
        if request.approved_args is not None and request.approved_args != request.tool_args:
            parts += [
                Text("approved (edited) args", style="bold"),
                _args_syntax(request.approved_args, max_arg_lines),
            ]
        if request.args_digest:
            parts.append(Text(f"grant digest: {request.args_digest}"))
        if request.result is not None:
            outcome = "ok" if request.result.ok else f"failed: {request.result.error}"
            said = json.dumps(request.result.result)[:200]
            parts.append(Text(visible(f"result: {outcome} {said}")))
    elif isinstance(request, ChoiceRequest):
        parts.append(Text(visible(request.prompt), style="bold"))
        for n, option in enumerate(request.options, start=1):
            parts.append(Text(f"  {n}. {visible(option, multiline=False)}"))
        mode = "several options" if request.multi_select else "one option"
        parts.append(Text(f"choose {mode}" + (", or free text" if request.allow_other else "")))
    elif isinstance(request, QuestionsRequest):
        if request.prompt:
            parts.append(Text(visible(request.prompt), style="bold"))
        for q in request.questions:
            asked = visible(f"  {q.id}: {q.text}", multiline=False)
            parts.append(Text(asked + (" (required)" if q.required else "")))
    if request.grant_id:
        parts.append(Text(f"approved by standing grant {request.grant_id}", style="green"))
    for vote in request.votes:
        by = visible(vote.decided_by, multiline=False)
        parts.append(Text(f"approval by {by} at {_when(vote.decided_at)}"))
    if request.decision is not None:
        d = request.decision
        said = json.dumps(d.decision.model_dump(mode="json", exclude={"type"}, exclude_none=True))
        parts.append(
            Text(
                visible(
                    f"decision: {d.decision.type} by {d.decided_by} ({d.via}"
                    + (f" in {d.client}" if d.client else "")
                    + ") "
                    f"at {_when(d.decided_at)}: {said}",
                    multiline=False,
                )
            )
        )
    return Group(*parts)


def audit_table(entries: list[AuditEntry]) -> Table:
    """Audit entries, one row each."""
    table = Table(box=None, pad_edge=False)
    for column in ("seq", "at", "action", "actor", "from", "to", "request"):
        table.add_column(column)
    for e in entries:
        table.add_row(
            str(e.seq),
            _when(e.at),
            Text(visible(e.action, multiline=False)),
            Text(visible(e.actor, multiline=False)),
            e.from_status or "",
            e.to_status or "",
            Text(visible(e.request_id or "", multiline=False)),
        )
    return table


def event_line(event: Event) -> Text:
    """One line for ``watch``."""
    r = event.request
    line = Text(f"{_when(event.at)} #{event.seq} {event.type:<8} ")
    line.append(r.status, style=STATUS_STYLE[r.status])
    line.append(f" {r.id} {visible(r.session_id, multiline=False)} {summary(r)}")
    return line


def json_text(value: object) -> Text:
    """A JSON value for ``--json``: indented, highlighted, hidden characters as JSON escapes.

    Unlike rich's ``print_json``, which writes bidi and C1 characters raw, what reaches
    the terminal is still JSON that parses to ``value``.
    """
    return JSONHighlighter()(Text(dumps_visible(value, indent=2)))


def decision_json(request: Request) -> str:
    """The outcome of a request as JSON, for scripts and shell hooks."""
    body: dict[str, object] = {"id": request.id, "status": request.status}
    if request.decision is not None:
        body["decision"] = request.decision.model_dump(mode="json")
    if isinstance(request, ApprovalRequest):
        body["tool_name"] = request.tool_name
        body["args"] = (
            request.approved_args if request.approved_args is not None else request.tool_args
        )
        body["args_digest"] = request.args_digest
    return visible_json(json.dumps(body, ensure_ascii=False))
