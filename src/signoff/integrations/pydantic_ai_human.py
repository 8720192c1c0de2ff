"""Deprecated: this module is :mod:`signoff.integrations.pydantic_ai.human`."""

import warnings

from signoff.integrations.pydantic_ai.human import (
    NO_ANSWER,
    choice_result,
    human_toolset,
    questions_result,
)

__all__ = ["NO_ANSWER", "choice_result", "human_toolset", "questions_result"]

warnings.warn(
    "signoff.integrations.pydantic_ai_human is deprecated: "
    "import from signoff.integrations.pydantic_ai.human",
    DeprecationWarning,
    stacklevel=2,
)
