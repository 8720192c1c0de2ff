"""The demo chat agent a server hosts, for the web chat with no API key.

``signoff serve --agent demo=signoff.chat.hosted:agent`` hosts :data:`agent`: the scripted
demo model (:mod:`signoff.chat.demo`) with the chat's file and shell tools
(:func:`~signoff.chat.agent.chat_tools`) working in ``$SIGNOFF_WORKSPACE``, or in the
directory the server started in when that is unset (read once, when this module is
imported), and the deferred human tools (a choice, questions) of
:func:`~signoff.integrations.pydantic_ai.human.deferred_human_toolset`. ``signoff demo``
builds the same agent on its own workspace with :func:`build_hosted_agent`.

As a hosted task, its gated calls and its questions pause the conversation until a person
decides them in the chat page, the inbox or the CLI; the demo model then sums up what
happened, quoting a rejection's reason as the model was told it.
"""

from __future__ import annotations

import os
from pathlib import Path

from signoff.chat.agent import chat_tools
from signoff.chat.demo import demo_model
from signoff.integrations.pydantic_ai.human import deferred_human_toolset

try:
    from pydantic_ai import Agent
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "the hosted demo agent needs pydantic-ai: pip install 'signoff[pydantic-ai]'"
    ) from exc

__all__ = ["ENV_WORKSPACE", "WORKSPACE", "agent", "build_hosted_agent"]

ENV_WORKSPACE = "SIGNOFF_WORKSPACE"
"""The environment variable naming the directory :data:`agent`'s tools work in."""

_INSTRUCTIONS = (
    "You are a coding agent working in one workspace directory. Use the tools to read, "
    "list, write and edit files and to run shell commands. Some calls wait for a person's "
    "approval; if one is rejected, respect the reason and do not retry the same call."
)


def build_hosted_agent(root: Path) -> Agent[None, str]:
    """The demo chat agent with its tools confined to ``root``."""
    return Agent(
        demo_model(),
        toolsets=[chat_tools(root), deferred_human_toolset()],
        instructions=_INSTRUCTIONS,
    )


WORKSPACE = Path(os.environ.get(ENV_WORKSPACE) or Path.cwd()).resolve()
"""Where :data:`agent`'s tools work: ``$SIGNOFF_WORKSPACE``, else the starting directory."""

agent = build_hosted_agent(WORKSPACE)
"""The agent ``signoff serve --agent demo=signoff.chat.hosted:agent`` hosts."""
