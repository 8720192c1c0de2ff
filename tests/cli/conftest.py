"""Fixtures for the command tests: a database, a project directory and the command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.running import Run


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment with its own database, no global policy and a known user."""
    config = tmp_path / "config"
    config.mkdir()
    return {
        **os.environ,
        "SIGNOFF_DB": f"sqlite:///{tmp_path / 'signoff.db'}",
        "XDG_CONFIG_HOME": str(config),
        "SIGNOFF_USER": "alice",
        "COLUMNS": "200",
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A working directory with no tools.toml of its own."""
    directory = tmp_path / "project"
    directory.mkdir()
    return directory


@pytest.fixture
def cli(env: dict[str, str], project: Path) -> Run:
    """Run ``signoff ARGS`` and return the finished process."""

    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "signoff", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=project,
            timeout=timeout,
            check=False,
        )

    return run
