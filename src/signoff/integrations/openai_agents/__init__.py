"""OpenAI Agents SDK runs ask signoff about every tool call that needs approval.

The approval loop (:func:`run_with_signoff`, :func:`resume_with_signoff`), the decisions it
applies to a paused run and the tool-side edits are in
:mod:`signoff.integrations.openai_agents.loop`; everything it offers is exported here.
Needs ``pip install 'signoff[openai-agents]'``.
"""

from signoff.integrations.openai_agents.loop import (
    AGENT_PREFIX,
    Applied,
    apply_decisions,
    edit_problem,
    file_interruptions,
    resume_with_signoff,
    run_with_signoff,
    signoff_args,
    signoff_edits,
    task_agent,
)

__all__ = [
    "AGENT_PREFIX",
    "Applied",
    "apply_decisions",
    "edit_problem",
    "file_interruptions",
    "resume_with_signoff",
    "run_with_signoff",
    "signoff_args",
    "signoff_edits",
    "task_agent",
]
