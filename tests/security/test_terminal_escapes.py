"""Agent text cannot drive the terminal: every view shows its controls as visible escapes.

The agent names its tool ``delete_prod_database`` followed by ESC[2K (erase the line) and
a carriage return, then ``read_file``: printed raw, a person sees only ``read_file``. Its
prompt carries an OSC sequence that sets the terminal's title, its args a right-to-left
override. Each view runs in a real terminal (tmux) against a real server (or, for
``chat``, its --db file); the screen is read back: the true name and the escapes show, the
fake name never stands alone, and the pane's title is untouched.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.server.app import API
from tests.serving import Server, agent_token, bearer
from tests.tui.tmux import Tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

TOOL = "delete_prod_database\x1b[2K\rread_file"
"""What the agent calls: on a raw terminal the line is erased and only read_file remains."""
SHOWN_TOOL = "delete_prod_database\\x1b[2K\\x0dread_file"
"""The same name as a person must see it."""
ARGS = {"path": "/etc/passwd\x1b]0;pwned\x07", "mode": "\u202ewrite"}
PROMPT = "Deploy now?\x1b]0;pwned\x07"
"""A choice prompt that, printed raw, sets the terminal's title to 'pwned'."""
OPTIONS = ["yes\x1b[2K\rno", "later\u202e"]


def shows_true_name(screen: str, shown: str = SHOWN_TOOL) -> None:
    """The true tool name is on screen with its escapes; read_file never appears alone."""
    assert shown in screen, screen
    assert screen.count("read_file") == screen.count("\\x0dread_file"), screen


def title(tmux: Tmux) -> str:
    """The pane's title, as OSC 0 / OSC 2 would have set it."""
    return tmux.tmux("display-message", "-p", "-t", tmux.session, "#{pane_title}")


@contextmanager
def terminal(command: list[str], env: dict[str, str], cwd: Path | None = None) -> Iterator[Tmux]:
    """``command`` running in a fresh 200x50 tmux pane, kept open after it exits."""
    tmux = Tmux(f"signoff-test-{uuid.uuid4().hex[:8]}", "view")
    line = f"{shlex.join(command)}; echo __exit__ $?; sleep 600"
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
            "view",
            "-x",
            "200",
            "-y",
            "50",
            *(["-c", str(cwd)] if cwd else []),
            "sh",
            "-c",
            line,
        ],
        check=True,
        env=env,
    )
    try:
        yield tmux
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], check=False)


def terminal_env(base: dict[str, str]) -> dict[str, str]:
    """The CLI's environment at a real terminal: its size comes from the pane."""
    env = {k: v for k, v in base.items() if k not in ("COLUMNS", "LINES")}
    return {**env, "SIGNOFF_USER": "tester", "TERM": "xterm-256color"}


def cli(server: Server, *args: str) -> list[str]:
    """A signoff command, as the admin, against the server."""
    assert server.admin_token is not None
    return [
        sys.executable,
        "-m",
        "signoff",
        *args,
        "--server",
        server.base,
        "--token",
        server.admin_token,
    ]


@pytest.fixture
def attack(server: Server) -> Iterator[tuple[httpx.Client, dict[str, Any], dict[str, Any]]]:
    """An agent's HTTP client and the choice and approval requests it filed (that order)."""
    agent = httpx.Client(base_url=server.base, headers=bearer(agent_token(server)), timeout=30)
    filed = []
    for body in (
        {"kind": "choice", "prompt": PROMPT, "options": OPTIONS},
        {"kind": "approval", "tool_name": TOOL, "tool_args": ARGS},
    ):
        response = agent.post(f"{API}/requests", json={"session_id": "s", **body})
        assert response.status_code == 201, response.text
        filed.append(response.json())
    yield agent, filed[0], filed[1]
    agent.close()


def test_pending_shows_the_true_tool_name(server: Server, attack: Any) -> None:
    """`signoff pending` lists delete_prod_database\\x1b[2K..., and no title is set."""
    with terminal(cli(server, "pending"), terminal_env(server.env)) as tmux:
        screen = tmux.wait_for("__exit__ 0")
        shows_true_name(screen, "delete_prod_database\\x1b[2K\\x0dread_fil")
        assert "Deploy now?\\x1b]0;pwned\\x07" in screen
        assert "pwned" not in title(tmux)


def test_show_shows_the_true_tool_name_and_escaped_args(server: Server, attack: Any) -> None:
    """`signoff show` prints the full name, the args' RLO and the prompt's OSC as escapes."""
    _, choice, approval = attack
    env = terminal_env(server.env)
    with terminal(cli(server, "show", approval["id"]), env) as tmux:
        screen = tmux.wait_for("__exit__ 0")
        shows_true_name(screen, f"tool: {SHOWN_TOOL}")
        assert '"mode": "\\u202ewrite"' in screen
        assert '"path": "/etc/passwd\\u001b]0;pwned\\u0007"' in screen
    with terminal(cli(server, "show", choice["id"]), env) as tmux:
        screen = tmux.wait_for("__exit__ 0")
        assert "Deploy now?\\x1b]0;pwned\\x07" in screen
        assert "1. yes\\x1b[2K\\x0dno" in screen and "2. later\\u202e" in screen
        assert "pwned" not in title(tmux)


def test_answer_prompts_show_escapes_and_decide_the_exact_option(
    server: Server, attack: Any
) -> None:
    """`signoff answer` asks about the true name; a numbered pick chooses the exact option."""
    agent, choice, approval = attack
    env = terminal_env(server.env)
    with terminal(cli(server, "answer", approval["id"]), env) as tmux:
        screen = tmux.wait_for("[y/n]:")
        shows_true_name(screen, f"Approve {SHOWN_TOOL}? [y/n]:")
        tmux.type("n")
        tmux.wait_for("Reason")
        tmux.type("not today")
        tmux.wait_for("__exit__ 0")
    with terminal(cli(server, "answer", choice["id"]), env) as tmux:
        screen = tmux.wait_for("Choose (")
        assert "Deploy now?\\x1b]0;pwned\\x07" in screen
        assert "1) yes\\x1b[2K\\x0dno" in screen and "2) later\\u202e" in screen
        tmux.type("2")
        tmux.wait_for("__exit__ 0")
        assert "pwned" not in title(tmux)
    assert agent.get(f"{API}/requests/{approval['id']}").json()["status"] == "rejected"
    decided = agent.get(f"{API}/requests/{choice['id']}").json()
    assert decided["decision"]["decision"]["choice"] == "later\u202e"


def test_watch_shows_the_true_tool_name(server: Server, attack: Any) -> None:
    """`signoff watch` replays both events with the escapes shown, and no title is set."""
    command = cli(server, "watch", "--since", "0", "--count", "2")
    with terminal(command, terminal_env(server.env)) as tmux:
        screen = tmux.wait_for("__exit__ 0")
        shows_true_name(screen, "delete_prod_database\\x1b[2K\\x0dread_file {")
        assert "Deploy now?\\x1b]0;pwned\\x07 [yes\\x1b[2K\\x0dno / later\\u202e]" in screen
        assert "pwned" not in title(tmux)


def test_inbox_shows_the_true_tool_name(server: Server, attack: Any) -> None:
    """The Textual inbox lists and details the true name; the args' RLO shows as \\u202e."""
    with terminal(cli(server, "inbox"), terminal_env(server.env)) as tmux:
        screen = tmux.wait_for("2 pending")
        tmux.wait_for("tool: delete_prod_database")
        screen = tmux.screen()
        shows_true_name(screen, f"tool: {SHOWN_TOOL}")
        assert '"mode": "\\u202ewrite"' in screen
        tmux.tmux("send-keys", "-t", tmux.session, "j")
        screen = tmux.wait_for("choose one option")  # the choice's details are drawn
        assert "Deploy now?\\x1b]0;pwned\\x07" in screen
        assert "2. later\\u202e" in screen
        assert "pwned" not in title(tmux)
        tmux.tmux("send-keys", "-t", tmux.session, "q")
        tmux.wait_for("__exit__ 0")


async def paused_chat(db: Path, root: Path) -> str:
    """A stored chat session whose model called TOOL and waits for approval; its id."""
    from pydantic_ai import DeferredToolRequests
    from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, UserPromptPart

    from signoff.backends import LocalBackend
    from signoff.chat import CHAT_PRINCIPAL, ChatSession, build_agent
    from signoff.domain.policies import Policy
    from signoff.service import Service
    from signoff.store.sqlite import SQLiteStore

    async with Service(SQLiteStore(db), policy=Policy(), read_file=None) as service:
        backend = LocalBackend(service, CHAT_PRINCIPAL)
        session = await ChatSession.start(
            build_agent(None, root), backend, service.store, user="tester", policy=Policy()
        )
        call = ToolCallPart(tool_name=TOOL, args=ARGS, tool_call_id="call-1")
        session.messages = [
            ModelRequest(parts=[UserPromptPart("tidy the server")]),
            ModelResponse(parts=[call]),
        ]
        await session.pause(DeferredToolRequests(approvals=[call]))
        return session.id


def test_chat_approval_panel_shows_the_true_tool_name(tmp_path: Path) -> None:
    """`signoff chat --resume` asks about the model's call under its true, escaped name."""
    pytest.importorskip("textual", reason="signoff chat needs the tui extra")
    pytest.importorskip("pydantic_ai", reason="signoff chat needs the pydantic-ai extra")
    work = tmp_path / "work"
    work.mkdir()
    db = tmp_path / "chat.db"
    session_id = asyncio.run(paused_chat(db, work))
    env = terminal_env({**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")})
    command = [
        sys.executable,
        "-m",
        "signoff",
        "chat",
        "--db",
        f"sqlite:///{db}",
        "--resume",
        session_id,
    ]
    with terminal(command, env, cwd=work) as tmux:
        screen = tmux.wait_for("Awaiting Approval")
        shows_true_name(screen, f"Tool 1 of 1: {SHOWN_TOOL}")
        assert '"mode": "\\u202ewrite"' in screen
        tmux.type("no")
        screen = tmux.wait_for(f"{SHOWN_TOOL}: rejected by you: no")
        shows_true_name(screen)
        assert "pwned" not in title(tmux)
