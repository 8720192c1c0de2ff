"""An agent holding a ``Service`` in process wakes for a decision another process makes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ToolCallPart

from signoff.domain.principals import Principal
from signoff.integrations.pydantic_ai import run_with_signoff
from signoff.service import Service
from signoff.store.base import RequestQuery
from signoff.store.sqlite import SQLiteStore
from tests.integrations.test_pydantic_ai import ASK_ALL, script, tool_agent

BOT = Principal(name="bot", role="agent")
WAKE_WITHIN = 3.0
"""Seconds from the other process's decision to the run's end (README: tailed every 0.2 s)."""


def signoff_cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a real ``signoff`` command, as another terminal would, on the database file."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(db.parent), "SIGNOFF_USER": "alice"}
    return subprocess.run(
        [sys.executable, "-m", "signoff", *args, "--db", f"sqlite:///{db}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


async def decided_elsewhere(
    tmp_path: Path, ran: list[tuple[str, dict[str, Any]]], *decision: str
) -> tuple[str, float, str]:
    """Run an agent on ``Service(SQLiteStore(file))`` here, decide from a CLI process.

    Returns the run's output, the seconds it took to end after the command, and the id.
    """
    db = tmp_path / "shared.db"
    agent = tool_agent(script(ToolCallPart("shell", {"command": "ls"}, tool_call_id="c1")), ran)
    loop = asyncio.get_running_loop()
    async with Service(SQLiteStore(db), read_file=None) as service:
        running = asyncio.create_task(
            run_with_signoff(
                agent,
                "go",
                signoff=service,
                principal=BOT,
                session_id="x",
                policy=ASK_ALL,
                timeout=60,
            )
        )
        try:
            for _ in range(500):
                page = await service.list_requests(RequestQuery(status="pending"))
                if page.items:
                    break
                await asyncio.sleep(0.01)
            assert len(page.items) == 1, "the run never paused"
            request_id = page.items[0].id
            done = await asyncio.to_thread(signoff_cli, db, decision[0], request_id, *decision[1:])
            assert done.returncode in (0, 1), done.stderr
            decided_at = loop.time()
            result = await asyncio.wait_for(running, WAKE_WITHIN + 5)
            took = loop.time() - decided_at
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
    return str(result.output), took, request_id


async def test_approve_from_another_process_resumes_an_in_process_run(tmp_path: Path) -> None:
    """`signoff approve` in another process wakes the run within seconds; the tool runs once."""
    ran: list[tuple[str, dict[str, Any]]] = []
    output, took, request_id = await decided_elsewhere(tmp_path, ran, "approve")
    assert took < WAKE_WITHIN
    assert output == "shell[c1]=ran ls"
    assert ran == [("shell", {"command": "ls", "timeout": 10})]
    shown = signoff_cli(tmp_path / "shared.db", "show", request_id, "--json")
    assert json.loads(shown.stdout)["status"] == "completed"


async def test_reject_from_another_process_tells_the_in_process_model(tmp_path: Path) -> None:
    """`signoff reject --reason` in another process wakes the run; the model gets the reason."""
    ran: list[tuple[str, dict[str, Any]]] = []
    output, took, _ = await decided_elsewhere(
        tmp_path, ran, "reject", "--reason", "not on a Friday"
    )
    assert took < WAKE_WITHIN
    assert output.startswith("shell[c1]=")
    assert "not on a Friday" in output
    assert ran == []
