"""The real `signoff chat` process in a real terminal (tmux): approve a write, reject a shell."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("textual", reason="signoff chat needs the tui extra")
pytest.importorskip("pydantic_ai", reason="signoff chat needs the pydantic-ai extra")

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

from tests.tui.tmux import Tmux  # noqa: E402


@pytest.fixture
def chat_in_tmux(tmp_path: Path) -> Iterator[tuple[Tmux, Path]]:
    """`signoff chat` on a fresh SQLite file, in a directory whose tools.toml gates two tools."""
    work = tmp_path / "work"
    (work / ".signoff").mkdir(parents=True)
    (work / ".signoff" / "tools.toml").write_text(
        '[tools]\nneed_approval = ["write_file", "shell"]\n'
    )
    db = f"sqlite:///{tmp_path / 'signoff.db'}"
    env = {
        **os.environ,
        "SIGNOFF_USER": "tester",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "TERM": "xterm-256color",
    }
    command = [sys.executable, "-m", "signoff", "chat", "--db", db]
    tmux = Tmux(f"signoff-test-{uuid.uuid4().hex[:8]}", "chat")
    subprocess.run(
        [
            "tmux",
            "-L",
            tmux.socket,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "chat",
            "-x",
            "140",
            "-y",
            "45",
            "-c",
            str(work),
            *command,
        ],
        check=True,
        env=env,
    )
    try:
        yield tmux, work
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], check=False)


def test_real_chat_approves_a_write_and_rejects_a_shell_call(
    chat_in_tmux: tuple[Tmux, Path],
) -> None:
    """In a terminal, Enter runs write_file; a typed reason stops shell and reaches the model."""
    tmux, work = chat_in_tmux
    tmux.wait_for("Ready")
    tmux.type("create notes.md saying hello")
    screen = tmux.wait_for("Awaiting Approval | Enter: Approve | Text: Reject")
    assert "Tool 1 of 1: write_file" in screen
    tmux.tmux("send-keys", "-t", tmux.session, "Enter")
    tmux.wait_for("write_file: wrote 6 characters to notes.md")
    assert (work / "notes.md").read_text() == "hello\n"

    tmux.type("run touch forbidden")
    tmux.wait_for("Tool 1 of 1: shell")
    tmux.type("not in this repo")
    tmux.wait_for("shell was not run: A person rejected this call: not in this repo")
    assert not (work / "forbidden").exists()
