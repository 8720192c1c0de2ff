"""Requests as tab-separated lines, for ``signoff pending`` when its output is not a terminal.

Nothing is cut (a table on a terminal shortens long args; a script reading a pipe needs them
whole) and every value is one field: tabs, newlines and the other control, bidi and invisible
characters an agent's text may hold are shown as escapes (``\\t``, ``\\n``, ``\\x1b``), so a
value can neither start a new field or line nor reach the terminal the output ends up in.
"""

from __future__ import annotations

from datetime import datetime

from signoff.domain.requests import ApprovalRequest, ChoiceRequest, Request
from signoff.terminal.safe_text import dumps_visible, visible

__all__ = ["COLUMNS", "requests_tsv", "what"]

COLUMNS = ("id", "kind", "status", "session", "by", "what", "created", "expires")
"""The header line's names, in order."""


def what(request: Request) -> str:
    """What the request asks, whole: the tool and its JSON args, the prompt and its options,
    or the questions."""
    if isinstance(request, ApprovalRequest):
        return f"{request.tool_name} {dumps_visible(request.tool_args)}"
    if isinstance(request, ChoiceRequest):
        return f"{request.prompt} [{' / '.join(request.options)}]"
    texts = " | ".join(question.text for question in request.questions)
    return f"{len(request.questions)} question(s): {texts}"


def _when(at: datetime | None) -> str:
    return at.isoformat() if at else ""


def _line(fields: tuple[str, ...]) -> str:
    return "\t".join(visible(field, multiline=False) for field in fields)


def requests_tsv(requests: list[Request]) -> str:
    """A header line, then a line per request; every line ends with a newline."""
    rows = [
        (
            r.id,
            r.kind,
            r.status,
            r.session_id,
            r.requested_by,
            what(r),
            _when(r.created_at),
            _when(r.expires_at),
        )
        for r in requests
    ]
    return "".join(f"{_line(row)}\n" for row in [COLUMNS, *rows])
