"""``signoff serve``'s log lines on stderr: JSON or console, one per HTTP request and per
state change, start and stop lines, and never a token, a cookie or (unless --log-args) an
argument's value."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from signoff.cli.app import app
from signoff.client import API
from tests.server.lifecycle import lifecycle
from tests.serving import Server, agent_token, bearer, free_port, session_cookie, start_server

SECRET_ARG = "hunter2-value-9f3"
"""An argument's value that must not reach the log without --log-args."""

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")


def serve(tmp_path: Path, *extra: str, **env: str) -> tuple[Server, Path]:
    """A real server whose stderr goes to a file; the server and the file."""
    log = tmp_path / "stderr.log"
    environment = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), **env}
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    return start_server(db, free_port(), environment, *extra, log=log), log


def stop(server: Server, log: Path) -> str:
    """SIGTERM the server, wait for it, and return what it wrote on stderr."""
    server.stop()
    return log.read_text()


def wait_for(log: Path, text: str) -> None:
    """Return once ``text`` is in the log (the event follower writes a moment later)."""
    deadline = time.monotonic() + 15
    while text not in log.read_text():
        assert time.monotonic() < deadline, f"{text!r} never logged:\n{log.read_text()}"
        time.sleep(0.05)


def test_json_lines_tell_a_lifecycle_and_hold_no_secret(tmp_path: Path) -> None:
    """Every line is a JSON object; the lifecycle's changes name the request and who made
    them; HTTP lines name the principal; no token, cookie, query or argument value appears;
    SIGTERM ends with the stop line and no traceback."""
    server, log = serve(tmp_path, "--log-format", "json")
    try:
        agent = agent_token(server)
        cookie = session_cookie(server)
        listed = httpx.get(f"{server.base}{API}/requests", cookies={"signoff_session": cookie})
        assert listed.status_code == 200
        request_id = lifecycle(server, agent, {"command": SECRET_ARG})
        assert server.admin_token is not None
        httpx.get(f"{server.base}/login", params={"token": server.admin_token})
        httpx.get(f"{server.base}{API}/requests", headers=bearer("so_not-a-real-token-123"))
        wait_for(log, '"request completed"')
    finally:
        text = stop(server, log)
    lines: list[dict[str, Any]] = [json.loads(line) for line in text.splitlines()]
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    assert lines[0]["message"] == "signoff started" and lines[0]["store"] == "sqlite"
    assert lines[0]["address"] == server.base and lines[0]["version"]
    assert lines[-1]["message"] == "signoff stopped"
    changes = [
        line
        for line in lines
        if line["logger"] == "signoff.requests" and line.get("request_id") == request_id
    ]
    assert [(c["message"], c["who"]) for c in changes] == [
        ("request submitted", "bot"),
        ("request decided", "admin"),
        ("request claimed", "bot"),
        ("request completed", "bot"),
    ]
    assert changes[0]["tool"] == "shell" and changes[0]["arg_names"] == ["command"]
    assert changes[1]["decision"] == "approve" and "args" not in changes[0]
    http = [line for line in lines if line["logger"] == "signoff.http"]
    claim = f"{API}/requests/{request_id}/claim"
    assert any(
        h["method"] == "POST" and h["path"] == claim and h["status"] == 200 and h["who"] == "bot"
        for h in http
    )
    by_cookie = [h for h in http if h["path"] == f"{API}/requests" and h["method"] == "GET"]
    assert by_cookie[0]["who"] == "admin" and by_cookie[0]["status"] == 200
    assert by_cookie[-1]["status"] == 401 and "who" not in by_cookie[-1]
    assert any(h["path"] == "/login" and h["method"] == "GET" for h in http)
    assert all(isinstance(h["duration_ms"], float | int) for h in http)
    for secret in (server.admin_token, agent, cookie, SECRET_ARG, "so_not-a-real-token"):
        assert secret not in text
    assert "Traceback" not in text


def test_console_lines_are_text_and_carry_values_only_with_log_args(tmp_path: Path) -> None:
    """The console format reads as ``TIME LOGGER LEVEL message key=value``; --log-args adds
    the values, a newline in one shown as an escape, never a second line."""
    server, log = serve(tmp_path, "--log-args")
    try:
        agent = agent_token(server)
        lifecycle(server, agent, {"command": SECRET_ARG, "note": "two\nlines"})
        wait_for(log, "request completed")
    finally:
        text = stop(server, log)
    lines = text.splitlines()
    assert all(STAMP.match(line) for line in lines), text
    submitted = next(line for line in lines if "request submitted" in line)
    assert " signoff.requests INFO request submitted request_id=" in submitted
    assert "who=bot" in submitted and "tool=shell" in submitted
    assert SECRET_ARG in submitted and "two\\nlines" in submitted
    assert any(
        re.search(r" signoff\.http INFO POST /api/v1/requests 201 duration_ms=[\d.]+ who=bot$", x)
        for x in lines
    ), text
    assert lines[-1].endswith(" signoff.server INFO signoff stopped")


def test_log_level_warning_silences_info_and_bad_options_are_refused(tmp_path: Path) -> None:
    """SIGNOFF_LOG_LEVEL=warning leaves out every info line; a bad level, format or metrics
    token is one ``error:`` line and no server."""
    server, log = serve(tmp_path, SIGNOFF_LOG_LEVEL="warning")
    try:
        agent = agent_token(server)
        created = httpx.post(
            f"{server.base}{API}/requests",
            json={"session_id": "quiet", "tool_name": "shell", "tool_args": {}},
            headers=bearer(agent),
        )
        assert created.status_code == 201
    finally:
        text = stop(server, log)
    assert "INFO" not in text and "request submitted" not in text, text
    runner = CliRunner()
    for option, value, said in (
        ("--log-level", "loud", "--log-level is one of debug, info, warning, error"),
        ("--log-format", "xml", "--log-format is one of console, json"),
        ("--metrics-token", "short", "--metrics-token must be at least 16 characters"),
    ):
        done = runner.invoke(app, ["serve", "--db", "sqlite:///nowhere/x.db", option, value])
        assert done.exit_code != 0 and done.output.startswith(f"error: {said}"), done.output
        assert done.output.count("\n") == 1 and "Traceback" not in done.output
