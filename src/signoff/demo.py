"""Deprecated: the scripted demo model is :mod:`signoff.chat.demo`."""

import warnings

from signoff.chat.demo import DEMO_MODEL_NAME, demo_model, resolve_model

__all__ = ["DEMO_MODEL_NAME", "demo_model", "resolve_model"]

warnings.warn(
    "signoff.demo is deprecated: import from signoff.chat.demo",
    DeprecationWarning,
    stacklevel=2,
)
