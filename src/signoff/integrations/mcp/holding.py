"""Holding a call for a person, and ``signoff_await``, with which a model waits again.

MCP clients give up on a call that takes too long, and a person may take longer than
that. So a call that waits for a person is *held* for at most ``hold`` seconds (50 by
default); if nobody has decided by then the call returns a result telling the model the
request id and that it can call the added tool ``signoff_await(request_id)`` to wait
again. The request stays pending in the inbox meanwhile: nothing is lost or run.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

try:
    import mcp_types as types
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "signoff's MCP servers need the official MCP SDK: pip install 'signoff[mcp]'"
    ) from exc

from signoff.domain.requests import Request
from signoff.errors import CallerError

__all__ = [
    "AWAIT_TOOL",
    "HOLD_SECONDS",
    "await_tool",
    "clamp_hold",
    "held_request_id",
    "text_result",
    "waiting_result",
]

HOLD_SECONDS = 50.0
"""How long a call waits for a person before it returns and asks the model to wait again."""

AWAIT_TOOL = "signoff_await"
"""The tool both servers add, with which a model waits again for a held request."""

_MAX_HOLD = 600.0  # longer than any MCP client waits for one call


def await_tool() -> types.Tool:
    """The ``signoff_await`` tool as listed to clients."""
    return types.Tool(
        name=AWAIT_TOOL,
        title="Wait for a person's decision",
        description=(
            "Wait again for a person to decide a request that an earlier tool call said is "
            "still waiting. Pass the request_id that call gave you. Returns the outcome (the "
            "tool's result once approved, or the person's answer or reason), or says it is "
            "still waiting, in which case you may call this again."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "request_id": {
                    "type": "string",
                    "description": "The id of the waiting request, e.g. req_...",
                }
            },
            "required": ["request_id"],
            "additionalProperties": False,
        },
    )


def held_request_id(arguments: MutableMapping[str, Any] | None) -> str:
    """The ``request_id`` argument of a ``signoff_await`` call; CallerError if unusable."""
    value = (arguments or {}).get("request_id")
    if not isinstance(value, str) or not value.strip():
        raise CallerError("signoff_await needs request_id: the id a waiting call gave you")
    return value.strip()


def text_result(
    text: str, *, error: bool = False, structured: dict[str, Any] | None = None
) -> types.CallToolResult:
    """A tool result of one text block (``error`` sets ``isError``)."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        is_error=error,
        structured_content=structured,
    )


def waiting_result(request: Request, what: str, *, error: bool = False) -> types.CallToolResult:
    """The result of a call still waiting for a person: its id, and how to wait again.

    ``error`` marks it ``isError``: a proxied tool's output schema describes its own result,
    which this is not, and clients check only results that are not errors against it.
    """
    return text_result(
        f"{what} is waiting for a person's decision, and nobody has decided yet. "
        f"The request id is {request.id}. Nothing has run. To wait for the decision again, "
        f'call the tool {AWAIT_TOOL} with {{"request_id": "{request.id}"}}.',
        error=error,
        structured={"status": "pending", "request_id": request.id},
    )


def clamp_hold(seconds: float) -> float:
    """``seconds`` as a hold time; ValueError when it is not a usable one."""
    if not 0 < seconds <= _MAX_HOLD:
        raise ValueError(f"the hold time must be above 0 and at most {_MAX_HOLD:.0f} seconds")
    return seconds
