"""``signoff chat --model``: a model that cannot be used here is one line and exit 3."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai", reason="signoff chat needs the pydantic-ai extra")
pytest.importorskip("textual", reason="signoff chat needs the tui extra")

from signoff.cli.chat import model_problem


def _chat(tmp_path: Path, model: str) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.endswith(("_API_KEY", "_BASE_URL")) and not key.startswith("OPENAI_")
    }
    env["XDG_CONFIG_HOME"] = str(tmp_path)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "signoff",
            "chat",
            "--model",
            model,
            "--db",
            f"sqlite:///{tmp_path / 'chat.db'}",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("model", "named"),
    [
        ("openai:gpt-4o", "OPENAI_API_KEY"),
        ("nosuchprovider:model", "unknown model nosuchprovider:model"),
    ],
)
def test_chat_without_key_is_one_line(tmp_path: Path, model: str, named: str) -> None:
    """A model with no API key (or unknown) gets one error line naming it, exit 3, no traceback."""
    done = _chat(tmp_path, model)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    assert named in lines[0]
    assert "without --model" in lines[0]


def test_model_problem_names_the_setting() -> None:
    """The provider's missing-key message becomes the setting's name and the no-key way."""
    from pydantic_ai.exceptions import UserError

    line = model_problem(
        "openai:gpt-4o",
        UserError("Set the `OPENAI_API_KEY` environment variable or pass it via `x(api_key=...)`"),
    )
    assert line == (
        "openai:gpt-4o needs OPENAI_API_KEY; set it, "
        "or run without --model for the scripted demo model"
    )


def test_model_problem_names_the_package() -> None:
    """A provider whose package is missing gets the pip command that installs it."""
    line = model_problem(
        "groq:llama", ImportError('Please install `groq`: `pip install "pydantic-ai-slim[groq]"`')
    )
    assert line.startswith('groq:llama needs pip install "pydantic-ai-slim[groq]"; install it')
