"""The pydantic-ai integration is one package; its old module paths still work, with a warning."""

from __future__ import annotations

import importlib
import sys

import pytest

pytest.importorskip("pydantic_ai", reason="needs signoff[pydantic-ai]")

from signoff.integrations import pydantic_ai
from signoff.integrations.pydantic_ai import gate, human, tasks


def test_the_package_exports_what_the_old_module_did() -> None:
    """``signoff.integrations.pydantic_ai`` still exports the gate's names."""
    assert pydantic_ai.__all__ == gate.__all__
    for name in gate.__all__:
        assert getattr(pydantic_ai, name) is getattr(gate, name)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("signoff.integrations.pydantic_ai_human", human),
        ("signoff.integrations.pydantic_ai_tasks", tasks),
    ],
)
def test_old_module_paths_warn_and_give_the_same_objects(old: str, new: object) -> None:
    """Importing a moved module's old path warns and exports the very same objects."""
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=old.replace(".", r"\.") + " is deprecated"):
        module = importlib.import_module(old)
    for name in module.__all__:
        assert getattr(module, name) is getattr(new, name)
