"""``signoff submit --wait`` against a real server: the request's link at once, the decision
when it comes, and a timeout or Ctrl+C cancels (``--keep`` leaves it pending); its spinner
in a real terminal (tmux)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serving import Server, agent_token, bearer, serve_for_module
from tests.tui.tmux import Tmux


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One ``signoff serve`` for the module."""
    yield from serve_for_module(tmp_path_factory.mktemp("submit-wait"))


@pytest.fixture(scope="module")
def bot(server: Server) -> str:
    """An agent token the waits submit with."""
    return agent_token(server, "waiter")


@pytest.fixture(scope="module")
def admin(server: Server) -> Iterator[httpx.Client]:
    """The admin's HTTP client, who decides and reads the requests."""
    assert server.admin_token is not None
    with httpx.Client(base_url=server.base, headers=bearer(server.admin_token)) as client:
        yield client


def start_wait(server: Server, bot: str, *extra: str) -> subprocess.Popen[str]:
    """``signoff submit --wait ...`` as the agent, running; stderr piped (not a terminal)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "signoff",
            "submit",
            "--tool",
            "shell",
            "--args",
            '{"command": "rm -rf build", "cwd": "/srv"}',
            "--wait",
            *extra,
            "--server",
            server.base,
            "--token",
            bot,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**server.env, "COLUMNS": "60"},
    )


def first_line(waiter: subprocess.Popen[str], server: Server) -> str:
    """The request's id, read from the line the wait prints at once (with its link)."""
    assert waiter.stderr is not None
    line = waiter.stderr.readline()
    assert line.startswith("request req_"), line
    request_id = line.split()[1]
    assert line.rstrip("\n").endswith(f": {server.base}/requests/{request_id}"), line
    assert "(shell rm -rf build)" in line
    return request_id


def ended(waiter: subprocess.Popen[str]) -> tuple[int, dict[str, Any], str]:
    """The exit code, the JSON printed on stdout, and the rest of stderr."""
    out, err = waiter.communicate(timeout=30)
    return waiter.returncode, json.loads(out), err


def reap(waiter: subprocess.Popen[str]) -> None:
    """Kill the wait if it still runs, wait for it and close its pipes, whether the test
    passed or not (a killed process left unwaited, its pipes open, warns later)."""
    waiter.kill()
    waiter.wait(timeout=20)
    for pipe in (waiter.stdout, waiter.stderr):
        if pipe is not None:
            pipe.close()


def test_the_link_comes_at_once_and_the_approval_ends_the_wait(
    server: Server, bot: str, admin: httpx.Client
) -> None:
    """While it waits, the id and page link are on stderr; an approval prints who decided,
    exits 0, and nothing on the (piped) stderr is a control code."""
    waiter = start_wait(server, bot, "--timeout", "60")
    try:
        request_id = first_line(waiter, server)
        assert waiter.poll() is None  # still waiting: the line came before the decision
        decided = admin.post(f"/api/v1/requests/{request_id}/decision", json={"type": "approve"})
        assert decided.is_success, decided.text
        code, printed, err = ended(waiter)
    finally:
        reap(waiter)
    assert code == 0, err
    assert (printed["id"], printed["status"]) == (request_id, "approved")
    assert err == "approved by admin\n"
    assert "\x1b" not in err and "\r" not in err


def test_a_timeout_cancels_the_request_and_says_so(
    server: Server, bot: str, admin: httpx.Client
) -> None:
    """--timeout 1 ends with exit 2, "timed out after 1 s; request X canceled", and the
    request canceled on the server."""
    waiter = start_wait(server, bot, "--timeout", "1")
    try:
        request_id = first_line(waiter, server)
        code, printed, err = ended(waiter)
    finally:
        reap(waiter)
    assert code == 2, err
    assert err == f"timed out after 1 s; request {request_id} canceled\n"
    assert printed["status"] == "canceled"
    assert admin.get(f"/api/v1/requests/{request_id}").json()["status"] == "canceled"


def test_keep_leaves_it_pending_and_ctrl_c_cancels(
    server: Server, bot: str, admin: httpx.Client
) -> None:
    """With --keep a timed-out request stays pending (exit 2); SIGINT during a wait cancels
    the request (exit 130), and with --keep leaves it pending."""
    kept = start_wait(server, bot, "--timeout", "0.5", "--keep")
    interrupted = start_wait(server, bot, "--timeout", "60")
    interrupted_kept = start_wait(server, bot, "--timeout", "60", "--keep")
    try:
        kept_id = first_line(kept, server)
        code, printed, err = ended(kept)
        assert code == 2, err
        assert err == f"timed out after 0.5 s; request {kept_id} is left pending (--keep)\n"
        assert printed["status"] == "pending"
        assert admin.get(f"/api/v1/requests/{kept_id}").json()["status"] == "pending"
        for waiter, status, said in (
            (interrupted, "canceled", "canceled"),
            (interrupted_kept, "pending", "is left pending (--keep)"),
        ):
            request_id = first_line(waiter, server)
            waiter.send_signal(signal.SIGINT)
            code, printed, err = ended(waiter)
            assert code == 130, err
            assert err == f"interrupted; request {request_id} {said}\n"
            assert admin.get(f"/api/v1/requests/{request_id}").json()["status"] == status
    finally:
        for waiter in (kept, interrupted, interrupted_kept):
            reap(waiter)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_spinner_counts_seconds_in_a_terminal(tmp_path: Path) -> None:
    """In a terminal a spinner shows the elapsed seconds going up; Ctrl+C there erases it,
    cancels the request and says so."""
    env = {
        **os.environ,
        "SIGNOFF_DB": f"sqlite:///{tmp_path / 'signoff.db'}",
        "XDG_CONFIG_HOME": str(tmp_path),
        "TERM": "xterm-256color",
    }
    tmux = Tmux(f"signoff-test-{uuid.uuid4().hex[:8]}", "wait")
    command = [sys.executable, "-m", "signoff", "submit", "--tool", "shell", "--wait"]
    # the pane stays after the command exits, so its last screen can be read (its exit code,
    # 130, is the piped SIGINT test's)
    subprocess.run(
        [
            *("tmux", "-L", tmux.socket, "-f", "/dev/null"),
            *("new-session", "-d", "-s", "wait", "-x", "160", "-y", "20", ";"),
            *("set-option", "remain-on-exit", "on", ";"),
            *("respawn-pane", "-k", *command),
        ],
        check=True,
        env=env,
    )
    try:
        tmux.wait_for("(Ctrl+C cancels it) 1 s")
        tmux.wait_for("(Ctrl+C cancels it) 2 s")
        tmux.tmux("send-keys", "-t", tmux.session, "C-c")
        screen = tmux.wait_for(" canceled")
        assert "interrupted; request req_" in screen
        assert "Ctrl+C cancels" not in screen  # the spinner's line was erased
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], check=False)
