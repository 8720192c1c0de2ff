"""What both halves of the LangGraph integration build on."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

try:
    from langchain_core.messages import AIMessage
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "signoff.integrations.langgraph needs LangGraph: pip install 'signoff[langgraph]'"
    ) from exc

__all__ = ["FrozenModel", "last_ai_message"]


class FrozenModel(BaseModel):
    """A resume value or filed record: immutable, and refusing fields it does not know."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def last_ai_message(messages: Any) -> AIMessage | None:
    """The last AI message of a thread's messages, if any."""
    return next((m for m in reversed(list(messages)) if isinstance(m, AIMessage)), None)
