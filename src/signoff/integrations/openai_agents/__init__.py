"""OpenAI Agents SDK runs ask signoff about every tool call that needs approval.

The approval loop (:func:`run_with_signoff`, :func:`resume_with_signoff`), the decisions it
applies to a paused run and the tool-side edits are in
:mod:`signoff.integrations.openai_agents.loop`; everything it offers is exported here.
Needs ``pip install 'signoff[openai-agents]'``.
"""

from signoff.integrations.openai_agents import loop
from signoff.integrations.openai_agents.loop import *  # noqa: F403 (exactly loop.__all__)

__all__: list[str] = []
__all__ += loop.__all__
