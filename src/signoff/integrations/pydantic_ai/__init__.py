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

from signoff.integrations.pydantic_ai import gate
from signoff.integrations.pydantic_ai.gate import *  # noqa: F403 (exactly gate.__all__)

__all__: list[str] = []
__all__ += gate.__all__
