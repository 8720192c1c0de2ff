"""The OpenAI Agents integration is a package at its old path, exporting the same names."""

from __future__ import annotations

import pytest

pytest.importorskip("agents", reason="needs signoff[openai-agents]")

from signoff.integrations import openai_agents
from signoff.integrations.openai_agents import loop


def test_the_package_exports_the_loop() -> None:
    """``signoff.integrations.openai_agents`` exports everything the loop module offers."""
    assert openai_agents.__all__ == loop.__all__
    for name in loop.__all__:
        assert getattr(openai_agents, name) is getattr(loop, name)
