"""What docs/architecture.md promises about the code's shape: the layers and the one writer.

The layers tests run the real ``lint-imports`` over a copy of ``src/signoff`` with one
change made to it, so that a contract that checks nothing (a typo in a layer, a container
that matches no module) fails here.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter", reason="lint-imports comes with signoff[dev]")

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(src: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the project's contract over the ``signoff`` package in ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache", "--no-logo"],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of src/ to break on purpose."""
    shutil.copytree(
        ROOT / "src" / "signoff",
        tmp_path / "signoff",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return tmp_path


def test_domain_importing_the_service_breaks_the_contract(tree: Path) -> None:
    """An inner layer importing an outer one (domain -> service) is reported by name."""
    clock = tree / "signoff" / "domain" / "clock.py"
    clock.write_text(clock.read_text() + "\nimport signoff.service  # noqa\n")
    result = lint_imports(tree)
    assert result.returncode == 1, result.stdout
    assert "signoff.domain is not allowed to import signoff.service" in result.stdout
    assert "signoff.domain.clock -> signoff.service" in result.stdout


def test_one_transport_importing_another_breaks_the_contract(tree: Path) -> None:
    """The web pages importing the terminal inbox (siblings in one layer) is reported."""
    routes = tree / "signoff" / "web" / "routes.py"
    routes.write_text(routes.read_text() + "\nimport signoff.tui  # noqa\n")
    result = lint_imports(tree)
    assert result.returncode == 1, result.stdout
    assert "signoff.web is not allowed to import signoff.tui" in result.stdout


def test_a_new_top_level_module_must_be_given_a_layer(tree: Path) -> None:
    """A module under signoff/ that the contract does not place fails the check."""
    (tree / "signoff" / "notes.py").write_text('"""Somewhere new."""\n')
    result = lint_imports(tree)
    assert result.returncode == 1, result.stdout
    assert "The following modules are not listed as layers" in result.stdout
    assert "- signoff.notes" in result.stdout


WRITERS = {Path("service.py")}
"""The modules allowed to commit a Write: the service (and the stores, which apply it)."""


def _writes(path: Path) -> list[str]:
    """Where ``path`` builds or commits a store Write: ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("signoff.store"):
            found += [f"{node.lineno}: imports Write" for a in node.names if a.name == "Write"]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "commit"
            and ast.unparse(node.func.value).split(".")[-1] == "store"
        ):
            found.append(f"{node.lineno}: {ast.unparse(node.func)}(...)")
    return found


def test_only_the_service_writes() -> None:
    """No module but service.py (and store/ itself) imports Write or calls store.commit."""
    package = ROOT / "src" / "signoff"
    writers = {
        str(path.relative_to(package)): found
        for path in sorted(package.rglob("*.py"))
        if path.relative_to(package) not in WRITERS
        and path.relative_to(package).parts[0] != "store"
        and (found := _writes(path))
    }
    assert writers == {}
