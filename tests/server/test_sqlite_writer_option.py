"""``signoff serve --sqlite-writer process``: a real server whose SQLite writes run in a
process of its own, and the option refused where it has no meaning."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from signoff.server.app import API
from tests.serving import agent_token, bearer, free_port, start_server
from tests.store.test_sqlite_writer import alive


def children(pid: int) -> list[int]:
    """The processes ``pid`` started that still run."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found.extend(int(child) for child in text if alive(int(child)))
    return found


async def test_a_server_with_a_writer_process_runs_lifecycles_and_stops_it(
    tmp_path: Path,
) -> None:
    """Agents submit and wait, an admin decides, on a server whose writer is a process: every
    wait ends approved, the audit chain verifies; Ctrl-C stops the server and its writer."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    server = start_server(db, free_port(), env, "--sqlite-writer", "process")
    try:
        writers = children(server.process.pid)
        assert len(writers) == 1, writers
        agent = agent_token(server)
        admin = server.admin_token
        assert admin is not None
        async with (
            httpx.AsyncClient(base_url=server.base, headers=bearer(agent), timeout=30) as bot,
            httpx.AsyncClient(base_url=server.base, headers=bearer(admin), timeout=30) as person,
        ):

            async def lifecycle(n: int) -> str:
                body = {"session_id": f"s{n}", "tool_name": "shell", "tool_args": {"n": n}}
                made = await bot.post(f"{API}/requests", json=body)
                assert made.status_code == 201, made.text
                request_id = made.json()["id"]
                waiting = asyncio.create_task(bot.get(f"{API}/requests/{request_id}/wait"))
                decided = await person.post(
                    f"{API}/requests/{request_id}/decision", json={"type": "approve"}
                )
                assert decided.status_code == 200, decided.text
                status: str = (await waiting).json()["status"]
                return status

            assert await asyncio.gather(*(lifecycle(n) for n in range(40))) == ["approved"] * 40
            verify = (await person.get(f"{API}/audit/verify")).json()
            assert verify["ok"] is True, verify
        server.process.send_signal(signal.SIGINT)
        server.process.communicate(timeout=30)
        assert server.process.returncode == 0
        assert not any(alive(pid) for pid in writers)
    finally:
        if server.process.poll() is None:
            server.stop()


def test_the_option_is_a_thread_or_a_process_and_for_sqlite_only(tmp_path: Path) -> None:
    """Anything else, or another database, is one error line and exit 3, nothing created."""
    db = tmp_path / "serve.db"
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    run = [sys.executable, "-m", "signoff", "serve", "--port", str(free_port())]
    for extra, said in (
        (
            ["--db", f"sqlite:///{db}", "--sqlite-writer", "fork"],
            "error: --sqlite-writer is thread or process, not 'fork'",
        ),
        (
            ["--db", "postgresql://127.0.0.1/none", "--sqlite-writer", "process"],
            "error: --sqlite-writer applies to a SQLite database only (--db sqlite:///...)",
        ),
    ):
        refused = subprocess.run(
            [*run, *extra], capture_output=True, text=True, env=env, timeout=60
        )
        assert refused.returncode == 3, refused.stderr
        assert refused.stderr.strip().splitlines() == [said]
    assert not db.exists()
