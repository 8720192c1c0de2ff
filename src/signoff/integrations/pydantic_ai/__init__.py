"""pydantic-ai agents that ask signoff: the gate, tools to ask a person, hosted runs.

- :mod:`signoff.integrations.pydantic_ai.gate`: :class:`SignoffGate` and
  :func:`run_with_signoff`, gated tools in the inner loop, blocking or queued (exported
  here);
- :mod:`signoff.integrations.pydantic_ai.human`: ``human_toolset``, tools a model calls to
  ask a person to choose or answer;
- :mod:`signoff.integrations.pydantic_ai.tasks`: ``TaskRunner``, agents hosted by
  ``signoff serve --agent`` as durable tasks.

Everything here needs ``pip install 'signoff[pydantic-ai]'``.
"""

from signoff.integrations.pydantic_ai.gate import (
    META_KEY,
    GateMode,
    SignoffGate,
    checked_results,
    decided_results,
    edit_problem,
    file_deferred,
    queue_status_toolset,
    registry_from_agent,
    resolve_deferred,
    run_with_signoff,
    tool_schemas,
)

__all__ = [
    "META_KEY",
    "GateMode",
    "SignoffGate",
    "checked_results",
    "decided_results",
    "edit_problem",
    "file_deferred",
    "queue_status_toolset",
    "registry_from_agent",
    "resolve_deferred",
    "run_with_signoff",
    "tool_schemas",
]
