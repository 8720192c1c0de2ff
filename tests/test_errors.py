"""The one exception tree: the store's and the MCP proxy's errors are in it (issue 18)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import signoff
from signoff import errors
from signoff.server.app import create_app
from signoff.server.errors import status_of
from signoff.service import Service
from signoff.store.memory import MemoryStore

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("name", "parent"),
    [
        ("VersionConflict", errors.StoreConflict),
        ("DuplicateRequest", errors.StoreConflict),
        ("UpstreamDown", errors.RuntimeFailure),
    ],
)
def test_error_is_in_the_tree(name: str, parent: type[errors.SignoffError]) -> None:
    """The error is defined in signoff.errors, under its branch, and drawn in the docstring."""
    cls = getattr(errors, name)
    assert cls.__module__ == "signoff.errors"
    assert issubclass(cls, parent)
    assert name in errors.__all__
    assert f"── {name} " in (errors.__doc__ or "")


def test_store_errors_keep_their_old_import_path() -> None:
    """``signoff.store.base`` still exports the very same classes."""
    from signoff.store import base

    assert base.VersionConflict is errors.VersionConflict
    assert base.DuplicateRequest is errors.DuplicateRequest


def test_upstream_down_is_exported_by_the_proxy() -> None:
    """``signoff.integrations.mcp.proxy`` exports the very same class."""
    proxy = pytest.importorskip("signoff.integrations.mcp.proxy", reason="needs signoff[mcp]")
    assert proxy.UpstreamDown is errors.UpstreamDown


def test_store_conflicts_reaching_http_are_server_errors() -> None:
    """A store conflict the service did not translate maps to 500, as before the move."""
    assert status_of(errors.VersionConflict("r1")) == 500
    assert status_of(errors.DuplicateRequest("r1")) == 500
    assert status_of(errors.UpstreamDown("gone")) == 500


def test_version_is_written_once() -> None:
    """pyproject reads the version from signoff/__version__.py and the API reports it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    source = project["tool"]["hatch"]["version"]["path"]
    assert (ROOT / source).resolve() == Path(signoff.__file__).with_name("__version__.py")
    app = create_app(Service(MemoryStore()))
    assert app.openapi()["info"]["version"] == signoff.__version__
