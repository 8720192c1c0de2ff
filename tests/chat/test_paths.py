"""signoff.chat is one package (agent, demo model); signoff.demo still works, with a warning."""

from __future__ import annotations

import importlib
import sys

import pytest

pytest.importorskip("pydantic_ai", reason="signoff chat needs the pydantic-ai extra")

from signoff import chat
from signoff.chat import agent, demo


def test_signoff_chat_exports_the_agent() -> None:
    """``signoff.chat`` exports what the old module did, from ``signoff.chat.agent``."""
    assert set(chat.__all__) == set(agent.__all__)
    for name in chat.__all__:
        assert getattr(chat, name) is getattr(agent, name)


def test_signoff_demo_warns_and_gives_the_same_model() -> None:
    """Importing ``signoff.demo`` warns once and exports the very same objects."""
    sys.modules.pop("signoff.demo", None)
    with pytest.warns(DeprecationWarning, match=r"signoff\.chat\.demo"):
        old = importlib.import_module("signoff.demo")
    for name in ("DEMO_MODEL_NAME", "demo_model", "resolve_model"):
        assert getattr(old, name) is getattr(demo, name)
