"""Who may do what is checked once, in the service: the HTTP routes pass the caller on.

The backend suite (tests/backends/test_backend_suite.py) shows the service refuses each
operation to the wrong role in process (LocalBackend) and over HTTP alike; this reads the
routes' source for checks of their own, which would be a second, drifting copy.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import signoff.server

SERVER = Path(signoff.server.__file__).parent

ROLE_CHECKS_ALLOWED: dict[str, int] = {
    # a Claude Code / Codex hook's refused token is answered in the hook's own deny format
    # before anything is filed (the service would refuse the submit too, with a plain 403)
    "hooks.py": 1,
}
"""Modules that compare a role themselves, and how many times."""

AUTHORIZING = {
    "check_may_decide",
    "may_see_task",
    "may_see_conversation",
    "_admins_only",
    "_manages_webhooks",
}
"""The service's and the domain's checks of who may do what: called by the service only."""

NOT_ALLOWED_RAISED = {"auth.py"}
"""Modules that raise NotAllowed themselves: the inbox's sign-in refuses cross-site posts
and bad CSRF tokens (what the browser sent, not the caller's role)."""


def _modules() -> list[Path]:
    return sorted(SERVER.glob("*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _role_comparisons(tree: ast.Module) -> list[int]:
    """Lines comparing something's ``.role`` (``caller.role != "admin"`` and the like)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Attribute) and o.attr == "role" for o in operands):
                lines.append(node.lineno)
    return lines


def _called_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif isinstance(func, ast.Attribute):
                names.add(func.attr)
    return names


def _raises_not_allowed(tree: ast.Module) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            func = node.exc.func
            if isinstance(func, ast.Name) and func.id == "NotAllowed":
                lines.append(node.lineno)
    return lines


def _store_reads(tree: ast.Module) -> list[int]:
    """Lines reaching past the service into its store (``service.store.list_tokens()``)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "store"
        and isinstance(node.value, ast.Name)
        and node.value.id == "service"
    ]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_a_route_compares_no_roles(path: Path) -> None:
    """No ``caller.role == ...`` in the server: the service decides who may."""
    found = _role_comparisons(_tree(path))
    assert len(found) == ROLE_CHECKS_ALLOWED.get(path.name, 0), f"{path.name}: lines {found}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_a_route_calls_no_authorization_check(path: Path) -> None:
    """The checks the service makes are not made again before calling it."""
    assert not _called_names(_tree(path)) & AUTHORIZING, path.name


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_a_route_raises_no_refusal_of_its_own(path: Path) -> None:
    """NotAllowed comes from the service (the sign-in's cross-site refusals aside)."""
    found = _raises_not_allowed(_tree(path))
    assert not found or path.name in NOT_ALLOWED_RAISED, f"{path.name}: lines {found}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_a_route_reads_through_the_service_not_its_store(path: Path) -> None:
    """``service.store`` is the service's: a route reading it skips the service's check."""
    assert not _store_reads(_tree(path)), path.name


def test_the_source_checks_see_a_route_check() -> None:
    """The readers above find what they look for (a test of the test)."""
    source = ast.parse(
        "async def route(service, caller):\n"
        "    if caller.role != 'admin':\n"
        "        raise NotAllowed('only admins')\n"
        "    check_may_decide(caller)\n"
        "    return await service.store.list_tokens()\n"
    )
    assert _role_comparisons(source) == [2]
    assert _raises_not_allowed(source) == [3]
    assert "check_may_decide" in _called_names(source)
    assert _store_reads(source) == [5]
