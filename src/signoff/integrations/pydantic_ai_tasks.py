"""Deprecated: this module is :mod:`signoff.integrations.pydantic_ai.tasks`."""

import warnings

from signoff.integrations.pydantic_ai import tasks
from signoff.integrations.pydantic_ai.tasks import TaskRunner

__all__ = ["TaskRunner"]

warnings.warn(
    "signoff.integrations.pydantic_ai_tasks is deprecated: "
    "import from signoff.integrations.pydantic_ai.tasks",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str) -> object:
    """``task_view``, deprecated in the module that moved, with its own warning."""
    return getattr(tasks, name)
