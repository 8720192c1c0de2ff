"""The coding agent behind ``signoff chat``, and the scripted model that needs no API key.

- :mod:`signoff.chat.agent`: the agent, its tools and its sessions, whose gated calls wait
  for a person (in the terminal's approval panel, the inbox, or both);
- :mod:`signoff.chat.demo`: the clearly labelled scripted stand-in for an LLM that
  ``signoff chat``, ``signoff demo`` and the README's examples use without an API key.
- :mod:`signoff.chat.hosted`: that model with the chat's tools as an agent a server hosts
  (``signoff serve --agent demo=signoff.chat.hosted:agent``, and ``signoff demo``'s chat).

The command is :mod:`signoff.cli.chat` and the screen :mod:`signoff.tui.chat`, beside the
other commands and terminal apps. Everything here needs ``pip install 'signoff[pydantic-ai]'``.
"""

from signoff.chat import agent
from signoff.chat.agent import *  # noqa: F403 (exactly agent.__all__)

__all__: list[str] = []
__all__ += agent.__all__
