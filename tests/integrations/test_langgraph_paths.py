"""The LangGraph integration is one package; the bridge's old module path still works."""

from __future__ import annotations

import importlib
import sys

import pytest

pytest.importorskip("langgraph", reason="needs signoff[langgraph]")

from signoff.integrations import langgraph
from signoff.integrations.langgraph import bridge, interrupts


def test_the_package_exports_both_halves() -> None:
    """``signoff.integrations.langgraph`` exports the interrupts' and the bridge's names."""
    for name in interrupts.__all__:
        assert getattr(langgraph, name) is getattr(interrupts, name)
    for name in bridge.__all__:
        assert getattr(langgraph, name) is getattr(bridge, name)
    assert not hasattr(langgraph, "__getattr__")


def test_the_old_bridge_path_warns_and_gives_the_same_objects() -> None:
    """Importing ``signoff.integrations.langgraph_bridge`` warns and exports the same objects."""
    sys.modules.pop("signoff.integrations.langgraph_bridge", None)
    with pytest.warns(DeprecationWarning, match=r"langgraph_bridge is deprecated"):
        old = importlib.import_module("signoff.integrations.langgraph_bridge")
    for name in old.__all__:
        assert getattr(old, name) is getattr(bridge, name)
