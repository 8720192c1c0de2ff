"""Deprecated: this module is :mod:`signoff.integrations.pydantic_ai.tasks`."""

import warnings

from signoff.integrations.pydantic_ai.tasks import TaskRunner

__all__ = ["TaskRunner"]

warnings.warn(
    "signoff.integrations.pydantic_ai_tasks is deprecated: "
    "import from signoff.integrations.pydantic_ai.tasks",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str) -> object:
    """``task_view``, deprecated: the API's task view is ``signoff.server.tasks.task_view``."""
    if name == "task_view":  # moved to the router that shows tasks
        warnings.warn(
            "signoff.integrations.pydantic_ai_tasks.task_view is deprecated: "
            "use signoff.server.tasks.task_view",
            DeprecationWarning,
            stacklevel=2,
        )
        from signoff.server.tasks import task_view

        return task_view
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
