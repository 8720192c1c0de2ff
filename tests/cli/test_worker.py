"""``signoff worker``, run as a real subprocess: it runs approved calls with the user's tools."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from pydantic import JsonValue

from signoff.domain.principals import Principal
from signoff.domain.requests import ApprovalRequest
from signoff.service import Service
from signoff.store.base import RequestQuery
from signoff.store.sqlite import SQLiteStore
from signoff.testing import APPROVER
from tests.serving import Server, agent_token, bearer

# Runs the real CLI entry point; registers `worker` only if cli/app.py does not yet.
SHIM = """
from signoff.cli import app as cli_app, main, worker
if not any(c.callback is worker.worker for c in cli_app.app.registered_commands):
    worker.register(cli_app.app)
main()
"""

TOOLS = """
from pathlib import Path
from signoff.executor import ToolRegistry

registry = ToolRegistry()
empty = ToolRegistry()
not_a_registry = {"write_note": print}


@registry.tool
def write_note(path: str, text: str) -> dict[str, int]:
    with Path(path).open("a") as f:
        f.write(text + "\\n")
    return {"wrote": len(text)}


@registry.tool
async def explode(message: str) -> None:
    raise RuntimeError(message)
"""

CLI_AGENT = Principal(name="cli-agent", role="agent")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A working directory holding the tools modules the worker imports."""
    directory = tmp_path / "project"
    directory.mkdir()
    (directory / "mytools.py").write_text(TOOLS)
    (directory / "broken.py").write_text("raise RuntimeError('half-written module')\n")
    (directory / "needs_dep.py").write_text("import no_such_dependency_xyz\n")
    return directory


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment with no global policy and no inherited signoff target or agent name."""
    config = tmp_path / "config"
    config.mkdir()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    return {**clean, "XDG_CONFIG_HOME": str(config), "COLUMNS": "200"}


def worker(
    env: dict[str, str], cwd: Path, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``signoff worker ARGS`` in ``cwd`` and return the finished process."""
    return subprocess.run(
        [sys.executable, "-c", SHIM, "worker", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


async def _seed(db: Path, note: Path) -> dict[str, str]:
    """Requests in every state the worker must tell apart; their ids by role."""
    service = Service(SQLiteStore(db), read_file=None)
    await service.open()
    try:

        async def ask(tool: str, args: dict[str, JsonValue], who: Principal = CLI_AGENT) -> str:
            body = {"session_id": "s", "kind": "approval", "tool_name": tool, "tool_args": args}
            return (await service.submit(body, who)).request.id

        ids = {
            "edited": await ask("write_note", {"path": str(note), "text": "proposed"}),
            "explode": await ask("explode", {"message": "no disk"}),
            "pending": await ask("write_note", {"path": str(note), "text": "pending"}),
            "other_agent": await ask(
                "write_note",
                {"path": str(note), "text": "other"},
                Principal(name="other-agent", role="agent"),
            ),
        }
        edited = {"path": str(note), "text": "edited"}
        await service.decide(ids["edited"], {"type": "approve", "args": edited}, APPROVER)
        for key in ("explode", "other_agent"):
            await service.decide(ids[key], {"type": "approve"}, APPROVER)
        return ids
    finally:
        await service.close()


async def _stored(db: Path) -> dict[str, ApprovalRequest]:
    """Every request in the database, by id."""
    store = SQLiteStore(db)
    await store.open()
    try:
        page = await store.list_requests(RequestQuery(limit=500))
    finally:
        await store.close()
    found = {r.id: r for r in page.items if isinstance(r, ApprovalRequest)}
    assert len(found) == len(page.items)
    return found


def test_once_runs_the_approved_calls_and_prints_one_line_each(
    tmp_path: Path, project: Path, env: dict[str, str]
) -> None:
    """--once runs each approved call once with its approved args, prints it, and exits 0."""
    db, note = tmp_path / "signoff.db", tmp_path / "note.txt"
    ids = asyncio.run(_seed(db, note))
    url = f"sqlite:///{db}"
    done = worker(env, project, "--once", "--tools", "mytools:registry", "--db", url)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == sorted(
        [f"{ids['edited']} write_note completed", f"{ids['explode']} explode failed"]
    )
    assert note.read_text() == "edited\n"
    stored = asyncio.run(_stored(db))
    edited, exploded = stored[ids["edited"]], stored[ids["explode"]]
    assert edited.status == "completed"
    assert edited.result is not None and edited.result.result == {"wrote": 6}
    assert exploded.status == "failed"
    assert exploded.result is not None and exploded.result.error == "RuntimeError: no disk"
    assert stored[ids["pending"]].status == "pending"
    assert stored[ids["other_agent"]].status == "approved"  # another agent's call: not ours

    again = worker(env, project, "--once", "--tools", "mytools:registry", "--db", url)
    assert again.returncode == 0 and again.stdout == ""
    assert note.read_text() == "edited\n"


def test_requester_names_the_agent_whose_calls_run(
    tmp_path: Path, project: Path, env: dict[str, str]
) -> None:
    """--requester (SIGNOFF_AGENT) runs that agent's approved calls instead of cli-agent's."""
    db, note = tmp_path / "signoff.db", tmp_path / "note.txt"
    ids = asyncio.run(_seed(db, note))
    done = worker(
        {**env, "SIGNOFF_AGENT": "other-agent"},
        project,
        "--once",
        "--tools",
        "mytools:registry",
        "--db",
        f"sqlite:///{db}",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{ids['other_agent']} write_note completed"]
    assert note.read_text() == "other\n"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("mytools", "--tools takes MODULE:ATTRIBUTE"),
        ("mytools:", "--tools takes MODULE:ATTRIBUTE"),
        ("no_such_module:registry", "no module named 'no_such_module'"),
        ("mytools:missing", "module 'mytools' has no attribute 'missing'"),
        ("mytools:not_a_registry", "mytools:not_a_registry is a dict, not a signoff ToolRegistry"),
        ("mytools:empty", "mytools:empty has no tools registered"),
        ("broken:registry", "cannot import 'broken': RuntimeError: half-written module"),
        ("needs_dep:registry", "No module named 'no_such_dependency_xyz'"),
    ],
)
def test_a_bad_tools_spec_is_one_error_line_and_exit_3(
    tmp_path: Path, project: Path, env: dict[str, str], spec: str, message: str
) -> None:
    """A spec that is malformed, missing, or not a ToolRegistry: one ``error:`` line, exit 3."""
    done = worker(env, project, "--once", "--tools", spec, "--db", f"sqlite:///{tmp_path / 'x.db'}")
    assert done.returncode == 3
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: ") and message in done.stderr, done.stderr


def test_a_worker_without_tools_is_a_usage_error(project: Path, env: dict[str, str]) -> None:
    """Leaving out --tools exits 64, as every usage error does."""
    assert worker(env, project, "--once").returncode == 64


def test_a_running_worker_over_http_runs_calls_as_they_are_approved(
    server: Server, project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """Against a real server, with the agent's token, an approval runs at once; Ctrl+C exits 0."""
    admin = server.admin_token
    assert admin is not None
    bot = agent_token(server, "bot")
    note = tmp_path / "note.txt"
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SHIM,
            "worker",
            "--tools",
            "mytools:registry",
            "--poll",
            "60",
            "--server",
            server.base,
            "--token",
            bot,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=project,
    )
    try:
        assert process.stderr is not None
        assert process.stderr.readline().startswith("worker: running explode, write_note")
        time.sleep(1)  # let it subscribe to events: the next poll is a minute away
        api = f"{server.base}/api/v1"
        body = {
            "session_id": "s",
            "kind": "approval",
            "tool_name": "write_note",
            "tool_args": {"path": str(note), "text": "hi"},
        }
        created = httpx.post(f"{api}/requests", json=body, headers=bearer(bot), timeout=10)
        request_id = created.json()["id"]
        decided = httpx.post(
            f"{api}/requests/{request_id}/decision",
            json={"type": "approve"},
            headers=bearer(admin),
            timeout=10,
        )
        assert decided.status_code == 200, decided.text
        deadline = time.monotonic() + 20
        status = ""
        while time.monotonic() < deadline and status != "completed":
            time.sleep(0.1)
            got = httpx.get(f"{api}/requests/{request_id}", headers=bearer(admin), timeout=10)
            status = got.json()["status"]
        assert status == "completed"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert out.splitlines() == [f"{request_id} write_note completed"]
    assert note.read_text() == "hi\n"
