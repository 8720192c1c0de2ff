"""How requests look in a terminal. Agent-supplied text is never read as rich markup."""

from __future__ import annotations

import json
from datetime import datetime

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from signoff.domain.audit import AuditEntry
from signoff.domain.events import Event
from signoff.domain.requests import ApprovalRequest, ChoiceRequest, QuestionsRequest, Request

__all__ = [
    "audit_table",
    "decision_json",
    "event_line",
    "request_panel",
    "requests_table",
    "summary",
]

_MAX_ARG_LINES = 40

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
    """One line saying what the request is about."""
    if isinstance(request, ApprovalRequest):
        args = json.dumps(request.tool_args, ensure_ascii=False)
        return f"{request.tool_name} {args[:80]}{'…' if len(args) > 80 else ''}"
    if isinstance(request, ChoiceRequest):
        return f"{request.prompt[:60]} [{' / '.join(request.options)[:40]}]"
    first = request.questions[0].text if request.questions else ""
    return f"{len(request.questions)} question(s): {first[:60]}"


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
            Text(r.session_id),
            Text(r.requested_by),
            Text(summary(r)),
            Text(_when(r.created_at)),
            Text(_when(r.expires_at)),
        )
    return table


def _args_syntax(args: object) -> Syntax:
    text = json.dumps(args, indent=2, ensure_ascii=False, sort_keys=True)
    lines = text.splitlines()
    if len(lines) > _MAX_ARG_LINES:
        hidden = len(lines) - _MAX_ARG_LINES
        text = "\n".join([*lines[:_MAX_ARG_LINES], f"... {hidden} more lines (use --json)"])
    return Syntax(text, "json", word_wrap=True)


def request_panel(request: Request, audit: list[AuditEntry] | None = None) -> RenderableType:
    """Everything a person needs to decide: the call, its diff, grant, votes, history."""
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()

    def row(label: str, value: str | None) -> None:
        if value:
            head.add_row(label, Text(value))

    row("id", request.id)
    head.add_row("status", Text(request.status, style=STATUS_STYLE[request.status]))
    row("kind", request.kind)
    row("session", request.session_id)
    row("requested by", request.requested_by)
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
    parts: list[RenderableType] = [head]
    if request.context is not None:
        parts += [
            Text("context", style="bold"),
            Text(json.dumps(request.context, ensure_ascii=False)),
        ]
    if isinstance(request, ApprovalRequest):
        parts += [Text(f"tool: {request.tool_name}", style="bold"), _args_syntax(request.tool_args)]
        if request.preview is not None:
            title = f"diff of {request.preview.path}" + (
                "" if request.preview.exists else " (new file)"
            )
            parts.append(Text(title, style="bold"))
            if request.preview.note:
                parts.append(Text(request.preview.note, style="yellow"))
            parts.append(Syntax(request.preview.diff or "(no change)", "diff", word_wrap=True))
        if request.approved_args is not None and request.approved_args != request.tool_args:
            parts += [
                Text("approved (edited) args", style="bold"),
                _args_syntax(request.approved_args),
            ]
        if request.args_digest:
            parts.append(Text(f"grant digest: {request.args_digest}"))
        if request.result is not None:
            outcome = "ok" if request.result.ok else f"failed: {request.result.error}"
            parts.append(Text(f"result: {outcome} {json.dumps(request.result.result)[:200]}"))
    elif isinstance(request, ChoiceRequest):
        parts.append(Text(request.prompt, style="bold"))
        for n, option in enumerate(request.options, start=1):
            parts.append(Text(f"  {n}. {option}"))
        mode = "several options" if request.multi_select else "one option"
        parts.append(Text(f"choose {mode}" + (", or free text" if request.allow_other else "")))
    elif isinstance(request, QuestionsRequest):
        if request.prompt:
            parts.append(Text(request.prompt, style="bold"))
        for q in request.questions:
            parts.append(Text(f"  {q.id}: {q.text}" + (" (required)" if q.required else "")))
    if request.grant_id:
        parts.append(Text(f"approved by standing grant {request.grant_id}", style="green"))
    for vote in request.votes:
        parts.append(Text(f"approval by {vote.decided_by} at {_when(vote.decided_at)}"))
    if request.decision is not None:
        d = request.decision
        parts.append(
            Text(
                f"decision: {d.decision.type} by {d.decided_by} ({d.via}) "
                f"at {_when(d.decided_at)}: "
                + json.dumps(
                    d.decision.model_dump(mode="json", exclude={"type"}, exclude_none=True)
                ),
            )
        )
    if audit:
        parts += [Text("audit", style="bold"), audit_table(audit)]
    return Panel(Group(*parts), title=Text(f"{request.kind} request"), expand=False)


def audit_table(entries: list[AuditEntry]) -> Table:
    """Audit entries, one row each."""
    table = Table(box=None, pad_edge=False)
    for column in ("seq", "at", "action", "actor", "from", "to", "request"):
        table.add_column(column)
    for e in entries:
        table.add_row(
            str(e.seq),
            _when(e.at),
            Text(e.action),
            Text(e.actor),
            e.from_status or "",
            e.to_status or "",
            Text(e.request_id or ""),
        )
    return table


def event_line(event: Event) -> Text:
    """One line for ``watch``."""
    r = event.request
    line = Text(f"{_when(event.at)} #{event.seq} {event.type:<8} ")
    line.append(r.status, style=STATUS_STYLE[r.status])
    line.append(f" {r.id} {r.session_id} {summary(r)}")
    return line


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
    return json.dumps(body, ensure_ascii=False)
