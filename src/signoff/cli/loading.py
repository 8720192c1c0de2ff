"""Importing user objects named ``module:attribute`` (tool registries, agents)."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from signoff.cli.context import fail

__all__ = ["load_object"]


def load_object(spec: str, flag: str) -> Any:
    """The object ``module:attribute`` names, or one ``error:`` line and exit 3.

    The current directory is searched first, as ``python -m`` would: the user's module
    usually lives right there.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        fail(f"{flag} takes MODULE:ATTRIBUTE, not {spec!r}")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name or module_name.startswith(f"{exc.name}."):
            fail(f"no module named {module_name!r} (looked in {cwd} and on sys.path)")
        fail(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}")
    except Exception as exc:  # the module's own code failed; say how, in one line
        fail(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}")
    try:
        return getattr(module, attribute)
    except AttributeError:
        fail(f"module {module_name!r} has no attribute {attribute!r}")
