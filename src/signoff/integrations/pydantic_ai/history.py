"""What a hosted task keeps of its agent's run: its messages, and the history people read.

A task stores its agent's pydantic-ai messages as JSON (to run on from them) and, beside
them, :class:`~signoff.domain.tasks.HistoryItem` records: prompts, replies, tool calls and
results, and how people decided the calls a pause waited on.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from signoff.domain.decisions import DecisionRecord
from signoff.domain.requests import ApprovalRequest, Request
from signoff.domain.tasks import HistoryItem, PendingCall

try:
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_core import to_jsonable_python
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "hosted agent runs need pydantic-ai: pip install 'signoff[pydantic-ai]'"
    ) from exc

__all__ = ["decision_item", "history_items", "messages_json"]


def messages_json(messages: Sequence[ModelMessage]) -> str:
    """An agent's messages as the JSON a task stores (its ``messages``)."""
    return ModelMessagesTypeAdapter.dump_json(list(messages)).decode()


def history_items(messages: Sequence[ModelMessage], at: datetime) -> list[HistoryItem]:
    """What people read of an agent's messages: prompts, replies, tool calls and results."""
    items: list[HistoryItem] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                items.append(HistoryItem(kind="user", at=at, text=part.content))
            elif isinstance(part, TextPart):
                items.append(HistoryItem(kind="assistant", at=at, text=part.content))
            elif isinstance(part, ToolCallPart):
                items.append(
                    HistoryItem(
                        kind="tool_call",
                        at=at,
                        tool_name=part.tool_name,
                        tool_call_id=part.tool_call_id,
                        args=to_jsonable_python(part.args_as_dict(), fallback=str),
                    )
                )
            elif isinstance(part, ToolReturnPart):
                items.append(
                    HistoryItem(
                        kind="tool_result",
                        at=at,
                        tool_name=part.tool_name,
                        tool_call_id=part.tool_call_id,
                        text=part.model_response_str(),
                    )
                )
    return items


def decision_item(call: PendingCall, request: Request) -> HistoryItem:
    """What people read of how a decided request answered the call a task paused on."""
    record: DecisionRecord | None = request.decision
    at = record.decided_at if record is not None else request.updated_at
    by = record.decided_by if record is not None else None
    base: dict[str, Any] = {
        "at": at,
        "by": by,
        "tool_name": call.tool_name,
        "tool_call_id": call.tool_call_id,
        "request_id": request.id,
    }
    if request.status == "approved" and isinstance(request, ApprovalRequest):
        approved = request.approved_args or call.args
        if approved != call.args:
            return HistoryItem(kind="edit", args=approved, text="approved with edits", **base)
        return HistoryItem(kind="approval", text="approved", **base)
    if record is None:
        return HistoryItem(kind="rejection", text=f"no decision ({request.status})", **base)
    decision = record.decision
    text = getattr(decision, "reason", "") or getattr(decision, "feedback", "") or ""
    return HistoryItem(kind="rejection", text=text or request.status, **base)
