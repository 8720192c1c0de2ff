"""``signoff demo`` end to end: a real process fills a live inbox, and approvals run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serving import bearer, free_port


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """A running ``signoff demo``: its URL, admin token and workspace."""
    port = free_port()
    workspace = tmp_path / "workspace"
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "signoff",
            "demo",
            "--port",
            str(port),
            "--workspace",
            str(workspace),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    token = ""
    login = ""
    for _ in range(10):
        line = process.stdout.readline()
        if line.startswith("admin token: "):
            token = line.split(": ", 1)[1].strip()
        if "/login?token=" in line:
            login = line.strip()
            break
    base = f"http://127.0.0.1:{port}"
    try:
        assert token and login == f"{base}/login?token={token}", (token, login)
        wait_for(lambda: _healthy(base), "the demo server to listen")
        yield base, token, workspace
    finally:
        process.terminate()
        process.communicate(timeout=20)


def _healthy(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def wait_for(check: Any, what: str, seconds: float = 20) -> Any:
    """Poll ``check()`` until it returns something truthy."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_demo_files_a_mix_of_requests_and_runs_what_is_approved(
    demo: tuple[str, str, Path],
) -> None:
    """Within seconds the inbox holds a diffed file edit, shell calls, a choice and questions."""
    base, token, workspace = demo
    http = httpx.Client(base_url=base, headers=bearer(token), timeout=30)

    def pending() -> list[dict[str, Any]] | None:
        items: list[dict[str, Any]] = http.get("/api/v1/requests?status=pending").json()["items"]
        return items if len(items) >= 5 else None

    items = wait_for(pending, "five pending requests")
    kinds = sorted((r["kind"], r.get("tool_name") or "") for r in items)
    assert kinds == [
        ("approval", "shell"),
        ("approval", "shell"),
        ("approval", "write_file"),
        ("choice", ""),
        ("questions", ""),
    ]
    edit = next(r for r in items if r.get("tool_name") == "write_file")
    assert "-TODO: say hi" in edit["preview"]["diff"] and "+hello" in edit["preview"]["diff"]
    assert http.post(f"/api/v1/requests/{edit['id']}/decision", json={"type": "approve"}).is_success

    def completed() -> dict[str, Any] | None:
        request: dict[str, Any] = http.get(f"/api/v1/requests/{edit['id']}").json()
        return request if request["status"] == "completed" else None

    done = wait_for(completed, "the worker to run the approved edit")
    assert done["result"]["result"] == "wrote 6 bytes to notes.md"
    assert (workspace / "notes.md").read_text() == "hello\n"
    shell = next(r for r in items if r.get("tool_args", {}).get("command") == "ls -la")
    rejected = http.post(
        f"/api/v1/requests/{shell['id']}/decision", json={"type": "reject", "reason": "no"}
    )
    assert rejected.json()["status"] == "rejected"
    assert (workspace / "logs").is_dir()  # the unapproved delete never ran
    http.close()
