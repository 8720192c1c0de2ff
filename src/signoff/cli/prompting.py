"""Plain prompts for one request: a numbered menu, y/n with a reason, one line per question.

Agent text (tool name, prompt, options, questions) is shown through
:func:`~signoff.terminal.safe_text.visible`: its controls and bidi marks are escaped.

No full screen, so it works over ssh and in scripts: the lines come from a reader that is
the terminal when there is one and standard input otherwise. At a terminal a bad answer
is asked again; from a script it is an error (a script cannot correct itself).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, assert_never

from signoff.domain.decisions import REASON_REQUIRED
from signoff.domain.requests import ApprovalRequest, ChoiceRequest, QuestionsRequest, Request
from signoff.errors import InvalidDecision
from signoff.terminal.safe_text import visible

__all__ = ["Asker", "ask_decision", "terminal_asker"]

Asker = Callable[[str], str]
"""Shows a prompt and returns the line typed (without its newline); EOFError when none."""


def terminal_asker() -> tuple[Asker, bool]:
    """A line reader on stdin, and whether it is an interactive terminal."""
    interactive = sys.stdin.isatty()

    def ask(prompt: str) -> str:
        if interactive:
            return input(prompt)
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")

    return ask, interactive


def _again(interactive: bool, say: Callable[[str], None], problem: str) -> None:
    if not interactive:
        raise InvalidDecision(problem)
    say(problem)


def _reason(ask: Asker, interactive: bool, say: Callable[[str], None], prompt: str) -> str:
    """A rejection's reason, asked until it is not blank: a person says why (the one rule)."""
    while True:
        reason = ask(prompt).strip()
        if reason:
            return reason
        _again(interactive, say, REASON_REQUIRED)


def _choice(
    request: ChoiceRequest, ask: Asker, interactive: bool, say: Callable[[str], None]
) -> dict[str, Any]:
    say(visible(request.prompt))
    for n, option in enumerate(request.options, 1):
        say(f"  {n}) {visible(option, multiline=False)}")
    how = "numbers separated by commas" if request.multi_select else "a number"
    if request.allow_other:
        how += ", or your own answer"
    while True:
        line = ask(f"Choose ({how}, or 'r' to reject): ").strip()
        if line.lower() == "r":
            return {"type": "reject", "reason": _reason(ask, interactive, say, "Reason: ")}
        picks = [p.strip() for p in line.split(",")] if request.multi_select else [line]
        chosen: list[str] = []
        problem = None
        for pick in picks:
            if pick.isdigit() and 1 <= int(pick) <= len(request.options):
                chosen.append(request.options[int(pick) - 1])
            elif request.allow_other and pick and not pick.isdigit():
                chosen.append(pick)
            else:
                problem = f"choose 1 to {len(request.options)}, not {pick!r}"
                break
        if problem is None and chosen:
            if request.multi_select:
                return {"type": "choose", "choices": chosen}
            return {"type": "choose", "choice": chosen[0]}
        _again(interactive, say, problem or "choose at least one")


def _approval(
    request: ApprovalRequest, ask: Asker, interactive: bool, say: Callable[[str], None]
) -> dict[str, Any]:
    while True:
        tool = visible(request.tool_name, multiline=False)
        line = ask(f"Approve {tool}? [y/n]: ").strip().lower()
        if line in ("y", "yes"):
            return {"type": "approve"}
        if line in ("n", "no"):
            reason = _reason(ask, interactive, say, "Reason (told to the agent): ")
            return {"type": "reject", "reason": reason}
        _again(interactive, say, f"answer y or n, not {line!r}")


def _questions(
    request: QuestionsRequest, ask: Asker, interactive: bool, say: Callable[[str], None]
) -> dict[str, Any]:
    if request.prompt:
        say(visible(request.prompt))
    answers: dict[str, str] = {}
    for question in request.questions:
        mark = " (required)" if question.required else ""
        asked = visible(question.text, multiline=False)
        while True:
            text = ask(f"{asked}{mark}: ").strip()
            if text or not question.required:
                break
            _again(interactive, say, f"question {question.id!r} needs an answer")
        if text:
            answers[question.id] = text
    feedback = ask("Feedback (optional): ").strip()
    decision: dict[str, Any] = {"type": "answer", "answers": answers}
    if feedback:
        decision["feedback"] = feedback
    return decision


def ask_decision(
    request: Request, ask: Asker, *, interactive: bool, say: Callable[[str], None]
) -> dict[str, Any]:
    """Ask for a decision on ``request``, by its kind; the decision as a dict."""
    if isinstance(request, ApprovalRequest):
        return _approval(request, ask, interactive, say)
    if isinstance(request, ChoiceRequest):
        return _choice(request, ask, interactive, say)
    if isinstance(request, QuestionsRequest):
        return _questions(request, ask, interactive, say)
    assert_never(request)
