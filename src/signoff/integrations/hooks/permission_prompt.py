"""Claude Code's ``--permission-prompt-tool``: an MCP tool that answers its permission prompts.

Run non-interactively (``claude -p``), Claude Code has nobody to show a permission prompt
to; given ``--permission-prompt-tool mcp__signoff__approval_prompt`` it calls that MCP tool
instead, whenever its own permission rules would ask (a call its settings allow or deny
never reaches the tool), with ``{"tool_name", "input", "tool_use_id"}``. It reads the first
text block of the result as JSON, one of

- ``{"behavior": "allow", "updatedInput": {...}}``: run the call with ``updatedInput``,
  which is required (an empty object stands for the original input); signoff always sends
  the whole input, the person's edit when there is one;
- ``{"behavior": "deny", "message": "..."}``: do not run it; Claude reads the message.

:func:`answer_prompt` files the call through :func:`~signoff.integrations.hooks.gate.gate`
like a hook, and never raises: every failure is a deny with its reason.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from signoff.backends import Backend
from signoff.errors import SignoffError
from signoff.integrations.hooks.contracts import HookCall, HookInputError, Verdict
from signoff.integrations.hooks.gate import gate

__all__ = ["PROMPT_EVENT", "PROMPT_TOOL", "answer_prompt", "prompt_call", "prompt_result"]

PROMPT_TOOL = "approval_prompt"
"""The tool's name; Claude Code calls it ``mcp__<server name>__approval_prompt``."""

PROMPT_EVENT = "permission prompt tool"
"""How the request's context names the way it came (``Claude Code hook (...)``)."""


def prompt_call(args: dict[str, Any], session_id: str) -> HookCall:
    """The call Claude Code asks about, filed under ``session_id``, or HookInputError."""
    tool = args.get("tool_name")
    if not isinstance(tool, str) or not tool:
        raise HookInputError("'tool_name' must be a non-empty string")
    tool_input = args.get("input")
    if not isinstance(tool_input, dict):
        raise HookInputError("'input' must be a JSON object")
    call_id = args.get("tool_use_id")
    if call_id is not None and not isinstance(call_id, str):
        raise HookInputError("'tool_use_id' must be a string")
    return HookCall(
        agent="claude-code",
        event=PROMPT_EVENT,
        tool_name=tool,
        tool_input=tool_input,
        session_id=session_id,
        tool_use_id=call_id or None,
    )


def prompt_result(verdict: Verdict, tool_input: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """The JSON Claude Code reads: allow with the whole input to run, or deny and why."""
    if verdict.allow:
        run_with = verdict.updated_input if verdict.updated_input is not None else tool_input
        return {"behavior": "allow", "updatedInput": run_with}
    return {"behavior": "deny", "message": verdict.reason}


async def answer_prompt(
    backend: Backend, args: dict[str, Any], *, session_id: str, wait: float
) -> dict[str, JsonValue]:
    """File the call Claude Code asks about, wait up to ``wait`` seconds, and answer.

    Never raises (except for cancellation, which withdraws the request): bad arguments,
    signoff unreachable, no decision in time or a crash each deny with the reason.
    """
    try:
        call = prompt_call(args, session_id)
        verdict = await gate(backend, call, wait=wait)
    except HookInputError as exc:
        reason = f"signoff could not read the permission prompt: {exc}; the call was blocked"
        return {"behavior": "deny", "message": reason}
    except SignoffError as exc:
        reason = f"signoff could not decide ({exc.message}); the call was blocked"
        return {"behavior": "deny", "message": reason}
    except Exception as exc:  # a permission prompt fails closed, whatever broke
        reason = f"signoff failed ({type(exc).__name__}: {exc}); the call was blocked"
        return {"behavior": "deny", "message": reason}
    return prompt_result(verdict, call.tool_input)
