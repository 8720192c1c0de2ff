"""Coding agents' hooks (Claude Code, Codex CLI, Gemini CLI, Cursor) answered by signoff.

``signoff hook AGENT`` reads the agent's JSON on stdin, files the tool call as an approval
request, waits for policy or a person, and answers in that agent's exact shape; every
failure blocks the call (exit 2). See :mod:`.contracts` for the shapes and :mod:`.gate` for
the decision.
"""

from signoff.integrations.hooks.contracts import (
    AGENTS,
    AgentName,
    HookCall,
    HookReply,
    Verdict,
    parse_call,
    reply,
)
from signoff.integrations.hooks.gate import answer, gate

__all__ = [
    "AGENTS",
    "AgentName",
    "HookCall",
    "HookReply",
    "Verdict",
    "answer",
    "gate",
    "parse_call",
    "reply",
]
