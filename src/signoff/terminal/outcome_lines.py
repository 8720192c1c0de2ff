"""One line per request saying what it is about and what became of it, for terminals.

``signoff demo`` prints these as queued calls are decided and run, ``submit --wait`` prints
the decision it waited for, and ``signoff inbox`` names the request it just decided:
"approved by alice: write_file notes.md -> wrote 6 bytes", "rejected by alice (too
risky): shell rm -rf build". Agent text in them has its controls escaped
(:func:`~signoff.terminal.safe_text.visible`) and is cut short; a line is one line.
"""

from __future__ import annotations

from collections.abc import Mapping

from signoff.domain.decisions import Answer, Choose, Reject, Respond
from signoff.domain.requests import ApprovalRequest, ChoiceRequest, QuestionsRequest, Request
from signoff.terminal.safe_text import dumps_visible, visible

__all__ = ["call_label", "decided_notice", "decision_line", "outcome_line"]

LABEL_WIDTH = 60
"""How many characters of a call's label a line shows."""
DETAIL_WIDTH = 80
"""How many characters of a reason, answer or result a line shows."""


def _short(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis. Every control is
    made visible, newlines and carriage returns too (``ls\\x0arm -rf /`` is two commands;
    shown as a space it would read as one)."""
    flat = visible(text, multiline=False)
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _first_value(args: Mapping[str, object]) -> str:
    """The first argument's value as text: a command, a path; JSON when it is not text."""
    for value in args.values():
        return value if isinstance(value, str) else dumps_visible(value)
    return ""


def call_label(request: Request) -> str:
    """What the request is about, short: ``shell rm -rf build``, ``write_file notes.md``,
    a choice's prompt, a questions request's first question."""
    if isinstance(request, ApprovalRequest):
        tool = visible(request.tool_name, multiline=False)
        value = _first_value(request.tool_args)
        return _short(f"{tool} {value}".strip(), LABEL_WIDTH)
    if isinstance(request, ChoiceRequest):
        return _short(request.prompt, LABEL_WIDTH)
    first = request.questions[0].text if request.questions else "questions"
    return _short(first, LABEL_WIDTH)


def decision_line(request: Request) -> str | None:
    """Who decided what, with the reason: "approved by alice", "rejected by alice (no)";
    None while nobody has."""
    record = request.decision
    if record is None:
        return None
    by = visible(record.decided_by, multiline=False)
    decision = record.decision
    if isinstance(decision, Reject):
        reason = f" ({_short(decision.reason, DETAIL_WIDTH)})" if decision.reason.strip() else ""
        return f"rejected by {by}{reason}"
    if isinstance(decision, Respond):
        return f"answered instead by {by} ({_short(decision.feedback, DETAIL_WIDTH)})"
    if isinstance(decision, Choose | Answer) or not isinstance(request, ApprovalRequest):
        return f"answered by {by}"
    edited = request.approved_args is not None and request.approved_args != request.tool_args
    return f"approved{' with edits' if edited else ''} by {by}"


def decided_notice(request: Request) -> str:
    """What the person who just decided is told, naming the request: "Approved shell rm -rf
    build", "Rejected shell rm -rf build", "Answered Which database?", or a vote's count."""
    label = call_label(request)
    if request.status == "pending":
        return f"Approval recorded for {label}: {len(request.votes)} of {request.quorum}"
    line = decision_line(request)
    if line is None:
        return f"{request.status.capitalize()}: {label}"
    done = line.split(" by ", 1)[0]  # "approved with edits", "rejected"...
    return f"{done[:1].upper()}{done[1:]} {label}"


def _answers(request: Request) -> str | None:
    """What a person answered a choice or questions request with, on one line."""
    record = request.decision
    if record is None:
        return None
    if isinstance(request, ChoiceRequest):
        chosen = (record.extra or {}).get("choices")
        if isinstance(chosen, list):
            return ", ".join(str(c) for c in chosen)
        return None
    if isinstance(request, QuestionsRequest) and isinstance(record.decision, Answer):
        answers = record.decision.answers
        said = [f"{q.text}: {answers[q.id]}" for q in request.questions if answers.get(q.id)]
        return "; ".join(said) or record.decision.feedback
    return None


def _result(request: ApprovalRequest) -> str | None:
    """What the call returned, or why it failed; None before it ran."""
    outcome = request.result
    if outcome is None:
        return None
    if not outcome.ok:
        return f"failed: {outcome.error or 'no reason given'}"
    value = outcome.result
    return value if isinstance(value, str) else dumps_visible(value)


def outcome_line(request: Request) -> str | None:
    """The request's outcome in one line, once it has one; None while pending or running.

    A tool call approved but not yet run has none either: its line waits for the result,
    "approved by alice: write_file notes.md -> wrote 6 bytes".
    """
    label = call_label(request)
    if request.status in ("expired", "canceled"):
        return f"{request.status}: {label}"
    decided = decision_line(request)
    if decided is None or request.status in ("pending", "executing"):
        return None
    if request.status == "rejected":
        return f"{decided}: {label}"
    if isinstance(request, ApprovalRequest):
        result = _result(request)
        return None if result is None else f"{decided}: {label} -> {_short(result, DETAIL_WIDTH)}"
    answered = _answers(request)
    return f"{decided}: {label}" + (f" -> {_short(answered, DETAIL_WIDTH)}" if answered else "")
