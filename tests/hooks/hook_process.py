"""``signoff hook AGENT`` run as the agent runs it: a real process, JSON on stdin, against a
real ``signoff serve`` (see :mod:`tests.serving`)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import httpx

from signoff.server.app import API
from tests.serving import Server, bearer

__all__ = [
    "Hook",
    "HookRun",
    "assert_denied",
    "claude_call",
    "decide",
    "finish",
    "hook_command",
    "pending_listing",
    "reason",
    "requests_of",
    "run_hook",
    "run_hooks",
    "start_hook",
    "stop_leftovers",
    "verdict",
    "wait_pending",
]


Hook = subprocess.Popen[bytes]
"""A hook process started by :func:`start_hook`."""


@dataclass(frozen=True)
class HookRun:
    """What a hook process printed and how it exited."""

    code: int
    body: dict[str, Any]
    """Its stdout, which must be exactly one JSON object."""
    stderr: str


def hook_command(agent: str, server: Server, token: str, *extra: str) -> list[str]:
    """``signoff hook AGENT --server URL --token T ...`` as an agent's settings would run it."""
    return [
        sys.executable,
        "-m",
        "signoff",
        "hook",
        agent,
        "--server",
        server.base,
        "--token",
        token,
        *extra,
    ]


def start_hook(command: list[str], stdin: bytes | dict[str, Any], env: dict[str, str]) -> Hook:
    """Start ``command`` with ``stdin`` (a dict is sent as JSON) written and closed."""
    raw = json.dumps(stdin).encode() if isinstance(stdin, dict) else stdin
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError):  # it refused an oversized input unread
        process.stdin.write(raw)
    with contextlib.suppress(BrokenPipeError):
        process.stdin.close()
    process.stdin = None  # written and closed: communicate() must not flush it again
    _STARTED.append(process)
    return process


_STARTED: list[Hook] = []


def stop_leftovers() -> None:
    """Kill the hooks a failed test left running (a test fixture's teardown)."""
    while _STARTED:
        process = _STARTED.pop()
        if process.poll() is None:
            process.kill()
        process.communicate()


def finish(process: Hook) -> HookRun:
    """Wait for a started hook; its exit code, the JSON it printed and its stderr."""
    out, err = process.communicate(timeout=90)
    stdout, stderr = out.decode(), err.decode()
    assert "Traceback" not in stderr, stderr
    lines = stdout.strip().splitlines()
    assert len(lines) == 1, f"not one line of JSON on stdout: {stdout!r} (stderr {stderr!r})"
    body = json.loads(lines[0])
    assert isinstance(body, dict), stdout
    return HookRun(code=process.returncode, body=body, stderr=stderr)


def run_hook(command: list[str], stdin: bytes | dict[str, Any], env: dict[str, str]) -> HookRun:
    """Run a hook to the end."""
    return finish(start_hook(command, stdin, env))


def run_hooks(
    runs: dict[str, tuple[list[str], bytes | dict[str, Any]]], env: dict[str, str]
) -> dict[str, HookRun]:
    """Run several hooks at once (each name: its command and stdin); each one's end.

    A case whose output is not one JSON object (or that printed a traceback) fails naming it.
    """
    started = {name: start_hook(command, stdin, env) for name, (command, stdin) in runs.items()}
    ended: dict[str, HookRun] = {}
    for name, process in started.items():
        try:
            ended[name] = finish(process)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None
    return ended


def verdict(agent: str, body: dict[str, Any]) -> str:
    """``allow`` or ``deny``, read from a reply in ``agent``'s own shape."""
    if agent == "gemini":
        return str(body["decision"])
    if agent == "cursor":
        return str(body["permission"])
    output = body["hookSpecificOutput"]
    if "decision" in output:  # PermissionRequest
        return str(output["decision"]["behavior"])
    return str(output["permissionDecision"])


def reason(agent: str, body: dict[str, Any]) -> str:
    """The reason a reply in ``agent``'s shape gives."""
    if agent == "gemini":
        return str(body["reason"])
    if agent == "cursor":
        return str(body["agent_message"])
    output = body["hookSpecificOutput"]
    if "decision" in output:
        return str(output["decision"].get("message", ""))
    return str(output["permissionDecisionReason"])


def assert_denied(agent: str, run: HookRun, code: int) -> None:
    """The hook denied in ``agent``'s shape, exited ``code``, and (on 2) said why on stderr."""
    assert run.code == code, run
    assert verdict(agent, run.body) == "deny", run
    if code == 2:
        assert run.stderr.startswith("signoff: "), run


def claude_call(session: str, tool: str, tool_input: Any, **more: Any) -> dict[str, Any]:
    """Claude Code's ``PreToolUse`` stdin for one call."""
    return {
        "session_id": session,
        "transcript_path": f"/home/dev/.claude/projects/acme/{session}.jsonl",
        "cwd": "/home/dev/acme",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        **more,
    }


def requests_of(server: Server, token: str, **query: str) -> list[dict[str, Any]]:
    """The requests ``token`` sees, newest first (one page of 500)."""
    response = httpx.get(
        f"{server.base}{API}/requests",
        params={"limit": "500", **query},
        headers=bearer(token),
        timeout=30,
    )
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    assert len(items) < 500
    return items


def wait_pending(
    server: Server, token: str, session: str, process: subprocess.Popen[Any]
) -> dict[str, Any]:
    """The pending request a started hook filed in ``session``, once it is there."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = requests_of(server, token, status="pending", session_id=session)
        if found:
            assert len(found) == 1, found
            return found[0]
        if process.poll() is not None:
            raise AssertionError(f"the process ended first: {process.communicate()}")
        time.sleep(0.05)
    raise AssertionError(f"no pending request in session {session!r}")


def decide(server: Server, token: str, request_id: str, **decision: Any) -> httpx.Response:
    """POST a decision on a request as ``token``; the server's answer."""
    return httpx.post(
        f"{server.base}{API}/requests/{request_id}/decision",
        json=decision,
        headers=bearer(token),
        timeout=30,
    )


def pending_listing(server: Server, token: str) -> str:
    """What ``signoff pending`` prints for ``token`` (it must exit 0)."""
    listed = subprocess.run(
        [sys.executable, "-m", "signoff", "pending", "--server", server.base, "--token", token],
        capture_output=True,
        text=True,
        env=server.env,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    return listed.stdout
