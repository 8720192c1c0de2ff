"""The docs are checked like code: every command, event type and setting is documented."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import typer

from signoff.cli.app import app
from signoff.domain.events import EventType

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
CHANGELOG = (ROOT / "CHANGELOG.md").read_text()


def command_paths(typer_app: typer.Typer, prefix: str = "signoff") -> list[str]:
    """Every command of the CLI as it is typed, e.g. ``signoff audit verify``."""
    paths = []
    for command in typer_app.registered_commands:
        name = command.name or (command.callback.__name__ if command.callback else "")
        paths.append(f"{prefix} {name.replace('_', '-')}")
    for group in typer_app.registered_groups:
        assert group.typer_instance is not None and group.name is not None
        paths += command_paths(group.typer_instance, f"{prefix} {group.name}")
    return paths


def test_every_cli_command_is_in_the_readme_and_changelog() -> None:
    """Each command appears in the README as it is typed, and in the changelog."""
    paths = command_paths(app)
    assert len(paths) >= 17
    for path in paths:
        assert f"`{path}" in README, f"{path} is not documented in README.md"
        assert f"`{path.removeprefix('signoff ')}" in CHANGELOG, f"{path} missing in CHANGELOG"


def test_every_event_type_is_documented() -> None:
    """Each event type is named in the README's events section."""
    section = README.split("## Events", 1)[1].split("\n## ", 1)[0]
    for event_type in get_args(EventType):
        assert f"`{event_type}`" in section


def test_every_setting_is_documented() -> None:
    """Each environment variable the code reads is named in the README."""
    names: set[str] = set()
    for path in (ROOT / "src" / "signoff").rglob("*.py"):
        names |= set(re.findall(r"\b(SIGNOFF_[A-Z_]+|XDG_[A-Z_]+)\b", path.read_text()))
    assert names >= {"SIGNOFF_DB", "SIGNOFF_USER"}
    for name in names:
        assert name in README, f"{name} is not documented in README.md"


def test_readme_python_example_runs(tmp_path: Path) -> None:
    """The README's Python example runs as written and completes its request."""
    example = README.split("```python\n", 1)[1].split("```", 1)[0]
    example += (
        "\nimport sqlite3\n"
        "row = sqlite3.connect('signoff.db').execute('SELECT status FROM requests').fetchone()\n"
        "print(row[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", example],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "completed"
