"""The Makefile's first-use install says what it is doing (``make -n``: nothing is run).

A real fresh install takes a minute or more, too slow for the suite; this reads the recipe
``make`` would run for the venv stamp and checks each step announces itself, pip shows its
own progress, and the time taken is printed at the end.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.serving import ROOT


def _recipe() -> str:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(
        ["make", "-n", "-B", ".venv/.installed-stamp"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_venv_step_prints_a_line_per_step_pips_progress_and_the_time() -> None:
    recipe = _recipe()
    steps = [
        'echo "creating .venv',
        'echo "upgrading pip"',
        'echo "installing signoff and its dependencies (a minute or two)"',
        "pip install -e '.[all,dev]'",
        'echo ".venv ready in $(( $(date +%s) - start )) s"',
    ]
    at = [recipe.find(step) for step in steps]
    assert -1 not in at and at == sorted(at), recipe
    assert "--quiet" not in recipe and " -q " not in recipe
