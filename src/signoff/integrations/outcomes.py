"""What an agent is told about a decided request, the same words in every integration.

Framework-free, so each adapter (pydantic-ai, the OpenAI Agents SDK, plain chat-completion
messages) can import it without pulling in another framework. Nothing here carries request
ids, states or other signoff protocol data: it is text for a model.
"""

from __future__ import annotations

import json
import time

from signoff.backends import Backend
from signoff.domain.decisions import Answer, Approve, Choose, Reject
from signoff.domain.requests import ChoiceRequest, QuestionsRequest, Request
from signoff.errors import InvalidTransition

__all__ = [
    "DENIED_NO_DECISION",
    "NO_ANSWER",
    "choice_result",
    "declined",
    "denial",
    "edit_note",
    "questions_result",
    "wait_decided",
]

DENIED_NO_DECISION = "No decision came in time, so the call was not run."
"""A gated call nobody decided before its deadline."""

NO_ANSWER = "The person did not answer in time, so there is no answer to act on."
"""A choice or questions request nobody answered."""


async def wait_decided(backend: Backend, request_id: str, deadline: float) -> Request:
    """Wait (for a decision from any transport) until the request leaves pending.

    At ``deadline`` (a ``time.monotonic()`` value) a still-pending request is withdrawn, so
    the call fails closed; a decision that lands between the wait and the withdrawal stands.
    """
    while True:
        left = deadline - time.monotonic()
        request = await backend.wait(request_id, max(0.0, min(left, 60.0)))
        if request.status != "pending":
            return request
        if left <= 0:
            try:
                return await backend.cancel(request_id, "no decision in time")
            except InvalidTransition:
                return await backend.get(request_id)


def denial(request: Request) -> str:
    """What the model is told about a call that did not run: the reason, or the response."""
    record = request.decision
    if request.status in ("expired", "canceled") or record is None:
        return DENIED_NO_DECISION
    decision = record.decision
    if decision.type == "respond":
        return decision.feedback
    reason = getattr(decision, "reason", "") or ""
    if record.via == "policy":
        return f"The call was denied by policy and not run. {reason}".strip()
    return f"A person rejected this call{': ' + reason if reason else ''}. It was not run."


def edit_note(approved: object, original: object) -> str:
    """Appended to a tool's result when a person edited its arguments before approving."""

    def as_json(value: object) -> str:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)

    return (
        "Note: a person edited the arguments before approving. The call ran "
        f"with {as_json(approved)} instead of {as_json(original)}."
    )


def declined(sentence: str, decision: object) -> str:
    """``sentence``, followed by the person's reason when they gave one."""
    reason = decision.reason.strip() if isinstance(decision, Reject) else ""
    return f"{sentence} Their reason: {reason}" if reason else sentence


def choice_result(request: Request) -> str | list[str]:
    """What the model is told about a settled ``choice`` request: the chosen text, or why not.

    A list for multi-select, one option's text otherwise.
    """
    if not isinstance(request, ChoiceRequest):
        raise TypeError(f"expected a choice request, got a {request.kind} request")
    record = request.decision
    if request.status == "approved" and record is not None:
        resolved = (record.extra or {}).get("choices")
        if isinstance(resolved, list) and all(isinstance(c, str) for c in resolved):
            chosen = [str(c) for c in resolved]
        elif isinstance(record.decision, Choose):
            decision = record.decision
            chosen = list(decision.choices or ([decision.choice] if decision.choice else []))
        else:
            chosen = []
        if chosen:
            return chosen if request.multi_select else chosen[0]
    if request.status == "rejected" and record is not None:
        return declined("The person declined to choose.", record.decision)
    return NO_ANSWER


def questions_result(request: Request) -> str:
    """What the model is told about a settled ``questions`` request: finish, continue or stop."""
    if not isinstance(request, QuestionsRequest):
        raise TypeError(f"expected a questions request, got a {request.kind} request")
    record = request.decision
    if request.status == "approved" and record is not None:
        decision = record.decision
        if isinstance(decision, Approve):
            return "The person approved. Finish the task now; do not ask them again."
        if isinstance(decision, Answer):
            lines = ["The person answered. Continue the task using their reply."]
            if decision.feedback:
                lines.append(f"Feedback: {decision.feedback}")
            for question in request.questions:
                answer = decision.answers.get(question.id, "").strip()
                lines.append(f"Q: {question.text}")
                lines.append(f"A: {answer or '(no answer)'}")
            return "\n".join(lines)
    if request.status == "rejected" and record is not None:
        return declined(
            "The person rejected this. Stop the task and do not continue.", record.decision
        )
    return NO_ANSWER
