"""What each coding agent sends its hook and what it accepts back: pure, no IO.

Claude Code, Codex CLI, Gemini CLI and Cursor each run an outside program before a tool
call, hand it a JSON object on stdin and read a JSON object from stdout. They agree on one
dangerous thing: **only exit code 2 (or an explicit deny in the JSON) blocks the call**; any
other failure is a warning and the tool runs. So a reply here is always a complete answer in
the agent's own shape, and every failure is a deny with exit 2.

:func:`parse_call` turns the agent's JSON into a :class:`HookCall`; :func:`reply` turns a
:class:`Verdict` into the :class:`HookReply` (stdout JSON, exit code, stderr) that agent
honours for that event.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Literal, TypeAlias, get_args

from pydantic import JsonValue

__all__ = [
    "AGENTS",
    "AGENT_LABELS",
    "AGENT_TIMEOUT",
    "DEFAULT_WAIT",
    "AgentName",
    "HookCall",
    "HookInputError",
    "HookReply",
    "Verdict",
    "parse_call",
    "reply",
]

AgentName: TypeAlias = Literal["claude-code", "codex", "gemini", "cursor"]
"""The coding agents ``signoff hook`` speaks to."""
AGENTS: tuple[AgentName, ...] = get_args(AgentName)

AGENT_LABELS: dict[AgentName, str] = {
    "claude-code": "Claude Code",
    "codex": "Codex CLI",
    "gemini": "Gemini CLI",
    "cursor": "Cursor",
}
"""How each agent is named to a person."""

AGENT_TIMEOUT: dict[AgentName, float] = {
    "claude-code": 600.0,
    "codex": 600.0,
    "gemini": 60.0,
    "cursor": 60.0,
}
"""Each agent's own default hook timeout, in seconds: past it the agent kills the hook."""

DEFAULT_WAIT: dict[AgentName, float] = {
    name: max(1.0, timeout - max(5.0, timeout / 20)) for name, timeout in AGENT_TIMEOUT.items()
}
"""How long ``signoff hook`` waits for a person by default: ends before the agent's timeout,
so the hook answers (deny) itself instead of being killed."""

MAX_INPUT_BYTES = 4_000_000
"""Hook input larger than this is refused (denied) unread."""


class HookInputError(ValueError):
    """The hook's stdin is not the JSON this agent sends."""


@dataclass(frozen=True)
class HookCall:
    """One tool call an agent asks its hook about."""

    agent: AgentName
    event: str
    """The agent's hook event, e.g. ``PreToolUse`` or ``beforeShellExecution``."""
    tool_name: str
    tool_input: dict[str, JsonValue]
    session_id: str
    """The agent's session (conversation) id; signoff's session for the request."""
    tool_use_id: str | None = None
    """The agent's id for this call, when it sends one: a repeat returns the same request."""
    cwd: str | None = None
    transcript_path: str | None = None


@dataclass(frozen=True)
class Verdict:
    """What the hook answers: run the call (maybe with edited input) or not, and why."""

    allow: bool
    reason: str
    """Shown to the model (deny) or logged (allow)."""
    updated_input: dict[str, JsonValue] | None = None
    """The arguments a person approved instead of the agent's, when they edited them."""
    failure: bool = False
    """True when no person's yes or no is behind a deny (signoff unreachable, bad input,
    timeout, expiry, a crash): the reply exits 2 as well, which every agent honours."""


@dataclass(frozen=True)
class HookReply:
    """What the hook process prints and how it exits."""

    body: dict[str, JsonValue]
    """The JSON object for stdout."""
    exit_code: int
    """0 for a decision, 2 for a failure (never anything else: 1 lets the call run)."""
    stderr: str = ""
    """The reason, for agents that read stderr on exit 2."""


# -- reading the agent's JSON ---------------------------------------------------------------


def _text(data: Mapping[str, object], key: str, *, required: bool = False) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            raise HookInputError(f"the hook input has no {key!r}")
        return None
    if not isinstance(value, str):
        raise HookInputError(f"{key!r} must be a string")
    if required and not value:
        raise HookInputError(f"{key!r} is empty")
    return value


def _object(value: object, key: str) -> dict[str, JsonValue]:
    """The tool input as a JSON object (an agent may send it as a JSON string)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise HookInputError(f"{key!r} is a string that is not JSON") from None
    if not isinstance(value, dict):
        raise HookInputError(f"{key!r} must be a JSON object")
    return value


def _common(agent: AgentName, data: Mapping[str, object], session_key: str) -> dict[str, object]:
    return {
        "agent": agent,
        "session_id": _text(data, session_key) or agent,
        "cwd": _text(data, "cwd"),
        "transcript_path": _text(data, "transcript_path"),
    }


_CLAUDE_EVENTS = ("PreToolUse", "PermissionRequest")
_CODEX_EVENTS = ("PreToolUse", "PermissionRequest")
_GEMINI_EVENTS = ("BeforeTool",)
_CURSOR_EVENTS = ("beforeShellExecution", "beforeMCPExecution", "preToolUse")


def _event(data: Mapping[str, object], known: tuple[str, ...]) -> str:
    event = _text(data, "hook_event_name", required=True)
    assert event is not None
    if event not in known:
        raise HookInputError(
            f"hook event {event!r} is not one signoff answers (it answers {', '.join(known)})"
        )
    return event


def _tool_event(agent: AgentName, data: Mapping[str, object], known: tuple[str, ...]) -> HookCall:
    """Claude Code, Codex and Gemini: ``tool_name`` and ``tool_input`` as sent."""
    event = _event(data, known)
    tool = _text(data, "tool_name", required=True)
    assert tool is not None
    return HookCall(
        event=event,
        tool_name=tool,
        tool_input=_object(data.get("tool_input"), "tool_input"),
        tool_use_id=_text(data, "tool_use_id") or None,
        **_common(agent, data, "session_id"),  # type: ignore[arg-type]
    )


def _cursor(data: Mapping[str, object]) -> HookCall:
    event = _event(data, _CURSOR_EVENTS)
    common = _common("cursor", data, "conversation_id")
    if event == "beforeShellExecution":
        command = _text(data, "command", required=True)
        tool = "Shell"
        tool_input: dict[str, JsonValue] = {"command": command}
        if common["cwd"]:
            tool_input["cwd"] = str(common["cwd"])
    else:
        tool = _text(data, "tool_name", required=True) or ""
        tool_input = _object(data.get("tool_input", {}), "tool_input")
        if event == "beforeMCPExecution":
            # mcp_server_name (the mcp.json key) is the stable id; url / command vary by install
            server = _text(data, "mcp_server_name") or _text(data, "url") or _text(data, "command")
            tool = f"mcp:{server}:{tool}" if server else f"mcp:{tool}"
    if not common["cwd"]:  # beforeMCPExecution sends no cwd: the workspace it runs in
        roots = data.get("workspace_roots")
        if isinstance(roots, list) and roots and isinstance(roots[0], str):
            common["cwd"] = roots[0]
    return HookCall(
        event=event,
        tool_name=tool,
        tool_input=dict(tool_input),
        tool_use_id=_text(data, "tool_use_id") or None,
        **common,  # type: ignore[arg-type]
    )


def parse_call(agent: AgentName, data: object) -> HookCall:
    """The tool call in an agent's hook input (decoded JSON), or :class:`HookInputError`."""
    if not isinstance(data, dict):
        raise HookInputError("the hook input must be a JSON object")
    if agent == "claude-code":
        return _tool_event(agent, data, _CLAUDE_EVENTS)
    if agent == "codex":
        return _tool_event(agent, data, _CODEX_EVENTS)
    if agent == "gemini":
        return _tool_event(agent, data, _GEMINI_EVENTS)
    return _cursor(data)


# -- answering in the agent's shape ---------------------------------------------------------

_NO_REASON = "Denied in signoff; the call was not run."
"""A deny's reason when none was given: Codex ignores a deny without one."""

_EDIT_REFUSED = (
    "A person approved this call with edited arguments, which {label} cannot apply from "
    "this hook, so it was not run. Run it again with these arguments: {args}"
)


def _edit_refused(agent: AgentName, verdict: Verdict) -> Verdict:
    """An approval with edits the event cannot carry: deny, and say what was approved."""
    args = json.dumps(verdict.updated_input, ensure_ascii=False, sort_keys=True)
    reason = _EDIT_REFUSED.format(label=AGENT_LABELS[agent], args=args)
    return Verdict(allow=False, reason=reason)


def _claude_like(event: str | None, verdict: Verdict, *, edits_on_permission: bool) -> JsonValue:
    if event == "PermissionRequest":
        decision: dict[str, JsonValue] = {"behavior": "allow" if verdict.allow else "deny"}
        if not verdict.allow:
            decision["message"] = verdict.reason
        elif verdict.updated_input is not None and edits_on_permission:
            decision["updatedInput"] = verdict.updated_input
        return {"hookSpecificOutput": {"hookEventName": event, "decision": decision}}
    output: dict[str, JsonValue] = {
        "hookEventName": "PreToolUse",
        "permissionDecision": "allow" if verdict.allow else "deny",
        "permissionDecisionReason": verdict.reason,
    }
    if verdict.allow and verdict.updated_input is not None:
        output["updatedInput"] = verdict.updated_input
    return {"hookSpecificOutput": output}


def _claude(event: str | None, verdict: Verdict) -> JsonValue:
    return _claude_like(event, verdict, edits_on_permission=True)


def _codex(event: str | None, verdict: Verdict) -> JsonValue:
    if event == "PermissionRequest" and verdict.allow and verdict.updated_input is not None:
        # Codex fails a PermissionRequest reply carrying updatedInput closed: say so instead
        verdict = _edit_refused("codex", verdict)
    if event != "PermissionRequest" and verdict.allow and verdict.updated_input is None:
        # Codex's PreToolUse takes "allow" only with updatedInput (a bare allow is reported as
        # a failed hook): no decision is how it lets a call proceed
        return {}
    return _claude_like(event, verdict, edits_on_permission=False)


def _gemini(event: str | None, verdict: Verdict) -> JsonValue:
    body: dict[str, JsonValue] = {
        "decision": "allow" if verdict.allow else "deny",
        "reason": verdict.reason,
    }
    if verdict.allow and verdict.updated_input is not None:
        body["hookSpecificOutput"] = {
            "hookEventName": "BeforeTool",
            "tool_input": verdict.updated_input,
        }
    return body


def _cursor_reply(event: str | None, verdict: Verdict) -> JsonValue:
    edits = verdict.updated_input if verdict.allow else None
    if edits is not None and event != "preToolUse":
        # only preToolUse takes updated_input; the shell and MCP events cannot carry an edit
        verdict, edits = _edit_refused("cursor", verdict), None
    body: dict[str, JsonValue] = {
        "permission": "allow" if verdict.allow else "deny",
        "user_message": verdict.reason,
        "agent_message": verdict.reason,
    }
    if edits is not None:
        body["updated_input"] = edits
    return body


_REPLIES: dict[AgentName, Callable[[str | None, Verdict], JsonValue]] = {
    "claude-code": _claude,
    "codex": _codex,
    "gemini": _gemini,
    "cursor": _cursor_reply,
}


def reply(agent: AgentName, event: str | None, verdict: Verdict) -> HookReply:
    """The answer ``agent`` honours for ``event`` (None: the input could not be read)."""
    if not verdict.allow and not verdict.reason.strip():
        # Codex takes a deny without a reason (and exit 2 without stderr) for a failed hook
        verdict = replace(verdict, reason=_NO_REASON)
    body = _REPLIES[agent](event, verdict)
    assert isinstance(body, dict)
    if verdict.failure:
        return HookReply(body=body, exit_code=2, stderr=f"signoff: {verdict.reason}")
    return HookReply(body=body, exit_code=0)
