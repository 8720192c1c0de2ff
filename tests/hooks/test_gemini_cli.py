"""The real Gemini CLI, offline, gated by ``signoff hook gemini`` against a real server.

Gemini runs its scripted model (``--fake-responses``): the model writes a file, then runs a
shell command that appends a line to a log, then says it is done. Each call goes through the
``BeforeTool`` hook that ``signoff hook install gemini --project`` wrote into the project's
``.gemini/settings.json``; a person decides through the HTTP API while Gemini waits. What the
model is sent next is read from Gemini's own telemetry (prompts logged to a local file), so a
rejection's reason is checked where it lands.

The npm package is installed once into ``.cache/npm-gemini`` (ignored by git). Without node
20+ and npm the module is skipped, except in CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.node import cache_lock, need_node
from tests.serving import Server, agent_token, bearer, free_port, start_server

GEMINI_VERSION = "0.61.0"
"""The Gemini CLI release these tests pin (its hook contract was read from this one)."""

NODE_MAJOR = 20
"""Gemini CLI 0.61 needs node 20 or newer."""

CACHE = Path(__file__).resolve().parents[2] / ".cache" / "npm-gemini"
"""Where the npm package is installed, once (ignored by git)."""

RUN_TIMEOUT = 90.0
"""Seconds one Gemini run may take before the test gives up on it."""

API = "/api/v1"

Decide = Callable[[dict[str, Any]], dict[str, Any] | None]
"""A person: the decision body for a pending request, or None to leave it pending."""


# --- the Gemini CLI -------------------------------------------------------------------


def _installed_version() -> str | None:
    manifest = CACHE / "node_modules" / "@google" / "gemini-cli" / "package.json"
    try:
        version = json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None
    return version if isinstance(version, str) else None


@pytest.fixture(scope="module")
def gemini() -> Path:
    """The ``gemini`` executable, installed from npm into the cache on first use."""
    need_node(NODE_MAJOR, f"Gemini CLI {GEMINI_VERSION}")
    binary = CACHE / "node_modules" / ".bin" / "gemini"
    with cache_lock(CACHE):
        if _installed_version() != GEMINI_VERSION or not binary.exists():
            package = f"@google/gemini-cli@{GEMINI_VERSION}"
            done = subprocess.run(
                ["npm", "install", "--prefix", str(CACHE), "--no-audit", "--no-fund", package],
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert done.returncode == 0, f"npm install {package} failed:\n{done.stderr[-3000:]}"
    return binary


# --- the model's script ---------------------------------------------------------------


def _turn(*parts: dict[str, Any]) -> str:
    """One line of a fake-responses file: the model's streamed answer to one request."""
    candidate = {"content": {"role": "model", "parts": list(parts)}, "finishReason": "STOP"}
    return json.dumps(
        {"method": "generateContentStream", "response": [{"candidates": [candidate]}]}
    )


def _script(project: Path) -> str:
    """Write ``out.txt``, append a line to ``log.txt`` in the shell, then stop."""
    write = {"file_path": str(project / "out.txt"), "content": "from the model\n"}
    shell = {"command": "echo ran >> log.txt", "description": "log that the model ran"}
    turns = [
        _turn({"functionCall": {"name": "write_file", "args": write}}),
        _turn({"functionCall": {"name": "run_shell_command", "args": shell}}),
        _turn({"text": "done"}),
    ]
    return "\n".join(turns) + "\n"


# --- a project with the hook installed ------------------------------------------------


@dataclass
class Project:
    """A workspace Gemini runs in, with its own home (where signoff's hook settings go)."""

    root: Path
    directory: Path
    env: dict[str, str]

    @property
    def telemetry(self) -> Path:
        """Gemini's local telemetry file (it logs each request sent to the model)."""
        return self.root / "telemetry.log"

    def read(self, name: str) -> str | None:
        """A file in the workspace, or None when it was not written."""
        path = self.directory / name
        return path.read_text() if path.exists() else None


def _project(root: Path) -> Project:
    directory = root / "workspace"
    directory.mkdir(parents=True)
    (root / "home").mkdir()
    env = {
        **os.environ,
        "HOME": str(root / "home"),
        "GEMINI_API_KEY": "fake",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
        "GEMINI_TELEMETRY_ENABLED": "true",
        "GEMINI_TELEMETRY_TARGET": "local",
        "GEMINI_TELEMETRY_OUTFILE": str(root / "telemetry.log"),
        "GEMINI_TELEMETRY_LOG_PROMPTS": "true",
    }
    # signoff's hook settings go to $HOME/.config: Gemini passes hooks no other variable
    # when it runs in GitHub Actions (GITHUB_SHA set), not even XDG_CONFIG_HOME
    for name in ("XDG_CONFIG_HOME", "SIGNOFF_URL", "SIGNOFF_TOKEN", "SIGNOFF_DB"):
        env.pop(name, None)
    return Project(root, directory, env)


def _signoff_executable() -> str:
    """The ``signoff`` console script of the Python running the tests."""
    beside = Path(sys.executable).parent / "signoff"
    found = str(beside) if beside.is_file() else shutil.which("signoff")
    assert found is not None, "the signoff console script is not installed"
    return found


def install_hook(project: Project, server: str, token: str, timeout: int) -> None:
    """``signoff hook install gemini --project`` in the workspace, as a person would run it:
    Gemini may run the hook ``timeout`` seconds, signoff waits 10 s less."""
    command = [_signoff_executable(), "hook", "install", "gemini", "--project"]
    command += ["--server", server, "--token", token, "--timeout", str(timeout)]
    done = subprocess.run(
        command,
        cwd=project.directory,
        env=project.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (project.directory / ".gemini" / "settings.json").is_file()


def _set_gemini_limit(project: Project, seconds: int) -> None:
    """Change how long Gemini lets the installed hook run (its ``timeout``, in ms)."""
    path = project.directory / ".gemini" / "settings.json"
    settings = json.loads(path.read_text())
    for entry in settings["hooks"]["BeforeTool"]:
        for hook in entry["hooks"]:
            hook["timeout"] = seconds * 1000
    path.write_text(json.dumps(settings))


# --- one run ------------------------------------------------------------------------


@dataclass
class Run:
    """What one Gemini run left behind."""

    output: dict[str, Any]
    stderr: str
    requests: list[dict[str, Any]]
    model_requests: list[list[dict[str, Any]]]

    def tool_results(self) -> list[dict[str, Any]]:
        """Each call's result, as the model was sent it in the very next request."""
        return [
            part["functionResponse"]
            for contents in self.model_requests[1:]
            for part in contents[-1].get("parts", [])
            if "functionResponse" in part
        ]

    def tool_stats(self, tool: str) -> dict[str, Any]:
        """Gemini's own count of a tool's calls, successes and failures."""
        by_name: dict[str, Any] = self.output["stats"]["tools"]["byName"]
        stats: dict[str, Any] = by_name.get(tool, {"count": 0, "success": 0, "fail": 0})
        return stats


def _model_requests(telemetry: Path) -> list[list[dict[str, Any]]]:
    """Each request Gemini sent to the model: its contents, as telemetry logged them."""
    text = telemetry.read_text() if telemetry.exists() else ""
    decoder = json.JSONDecoder()
    found: list[list[dict[str, Any]]] = []
    at = 0
    while (at := _skip_space(text, at)) < len(text):
        record, at = decoder.raw_decode(text, at)
        attributes = record.get("attributes", {}) if isinstance(record, dict) else {}
        if attributes.get("event.name") == "gemini_cli.api_request":
            found.append(json.loads(attributes["request_text"]))
    return found


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _requests_of(http: httpx.Client, project: Project, status: str | None) -> list[dict[str, Any]]:
    """The requests this project's Gemini filed (the hook sends the workspace as cwd)."""
    params: dict[str, str | int] = {"limit": 200}
    if status is not None:
        params["status"] = status
    page = http.get(f"{API}/requests", params=params)
    assert page.status_code == 200, page.text
    items: list[dict[str, Any]] = page.json()["items"]
    mine = [r for r in items if r.get("context", {}).get("cwd") == str(project.directory)]
    return sorted(mine, key=lambda r: str(r["created_at"]))


def _decide_while_running(
    process: subprocess.Popen[bytes], project: Project, admin: httpx.Client | None, decide: Decide
) -> None:
    """Be the person until Gemini exits (or takes too long): decide each new pending request."""
    deadline = time.monotonic() + RUN_TIMEOUT
    decided: set[str] = set()
    while process.poll() is None and time.monotonic() < deadline:
        pending = _requests_of(admin, project, "pending") if admin is not None else []
        for request in pending:
            body = None if request["id"] in decided else decide(request)
            if admin is not None and body is not None:
                done = admin.post(f"{API}/requests/{request['id']}/decision", json=body)
                assert done.status_code == 200, done.text
                decided.add(request["id"])
        time.sleep(0.1)


def run_gemini(gemini: Path, project: Project, admin: httpx.Client | None, decide: Decide) -> Run:
    """Run Gemini on the script; while it waits, ``decide`` each pending request it filed."""
    fake = project.root / "responses.jsonl"
    fake.write_text(_script(project.directory))
    command = [str(gemini), "-m", "gemini-2.5-flash", "-p", "do the task", "--yolo"]
    command += ["--fake-responses", str(fake), "--output-format", "json"]
    out, err = project.root / "gemini.out", project.root / "gemini.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(
            command,
            cwd=project.directory,
            env=project.env,
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
        )
    _decide_while_running(process, project, admin, decide)
    if process.poll() is None:
        process.kill()
    process.wait(timeout=30)
    assert process.returncode == 0, f"gemini exited {process.returncode}:\n{err.read_text()}"
    requests = _requests_of(admin, project, None) if admin is not None else []
    output = json.loads(out.read_text())
    return Run(output, err.read_text(), requests, _model_requests(project.telemetry))


# --- the server, the person and the cases ----------------------------------------------


def approve(request: dict[str, Any]) -> dict[str, Any]:
    """A person approves as filed."""
    return {"type": "approve"}


def reject(request: dict[str, Any]) -> dict[str, Any]:
    """A person says no, naming the tool in the reason."""
    return {"type": "reject", "reason": f"not {request['tool_name']} today"}


def edit(request: dict[str, Any]) -> dict[str, Any]:
    """A person rewrites the file's content before approving; the command is approved."""
    if request["tool_name"] != "write_file":
        return {"type": "approve"}
    return {"type": "approve", "args": {**request["tool_args"], "content": "edited\n"}}


def nobody(request: dict[str, Any]) -> None:
    """Nobody decides."""


@dataclass(frozen=True)
class Case:
    """One scenario: who decides, how long Gemini lets the hook run (signoff waits 10 s less),
    whether signoff is up."""

    decide: Decide
    timeout: int = 70
    server_down: bool = False
    gemini_limit: int | None = None
    """Seconds Gemini itself lets the hook run, when the test raises it above ``timeout``."""


CASES = {
    "rejected": Case(reject),
    "approved": Case(approve),
    "edited": Case(edit),
    "server-stopped": Case(approve, server_down=True),
    # signoff waits 2 s; Gemini's own limit is raised from the installed 12 s, because a
    # hook Gemini kills lets the tool run, and a loaded machine can take 10 s to start one
    "no-decision": Case(nobody, timeout=12, gemini_limit=60),
}


def _start(root: Path) -> Server:
    env = {**os.environ, "XDG_CONFIG_HOME": str(root), "COLUMNS": "200"}
    return start_server(f"sqlite:///{root / 'serve.db'}", free_port(), env)


def _run_case(case: Case, gemini: Path, server: Server, root: Path) -> tuple[Project, Run]:
    """Install the hook in a fresh project and run Gemini while the case's person decides."""
    token = agent_token(server, "gemini")
    if case.server_down:
        server.stop()
    project = _project(root)
    install_hook(project, server.base, token, case.timeout)
    if case.gemini_limit is not None:
        _set_gemini_limit(project, case.gemini_limit)
    if case.server_down:
        return project, run_gemini(gemini, project, None, case.decide)
    assert server.admin_token is not None
    with httpx.Client(base_url=server.base, headers=bearer(server.admin_token)) as person:
        return project, run_gemini(gemini, project, person, case.decide)


@pytest.fixture(scope="module")
def runs(
    gemini: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[tuple[Project, Run]]]]:
    """Every case, run side by side (each Gemini run takes seconds) on one shared server
    (the server-stopped case has its own, stopped before Gemini starts)."""
    shared = _start(tmp_path_factory.mktemp("signoff"))
    try:
        with ThreadPoolExecutor(len(CASES)) as pool:
            futures = {
                name: pool.submit(
                    _run_case,
                    case,
                    gemini,
                    _start(tmp_path_factory.mktemp("down")) if case.server_down else shared,
                    tmp_path_factory.mktemp(name),
                )
                for name, case in CASES.items()
            }
            wait(futures.values())
        yield futures
    finally:
        if shared.process.poll() is None:
            shared.stop()


def _errors(run: Run) -> list[str]:
    return [result["response"].get("error", "") for result in run.tool_results()]


def test_rejected_call_does_not_run_and_the_model_reads_why(
    runs: dict[str, Future[tuple[Project, Run]]],
) -> None:
    """A person's "no" blocks the write and the shell command; the reason is in the next
    request the model is sent, as the tool's error."""
    project, run = runs["rejected"].result()

    assert project.read("out.txt") is None
    assert project.read("log.txt") is None
    assert [r["tool_name"] for r in run.requests] == ["write_file", "run_shell_command"]
    assert [r["status"] for r in run.requests] == ["rejected", "rejected"]
    errors = _errors(run)
    assert len(errors) == 2
    assert errors[0].startswith("Tool execution blocked") and "not write_file today" in errors[0]
    assert "not run_shell_command today" in errors[1]
    assert run.tool_stats("write_file")["success"] == 0


def test_approved_calls_run_once(runs: dict[str, Future[tuple[Project, Run]]]) -> None:
    """Approved, the file is written with the model's content and the command runs once."""
    project, run = runs["approved"].result()

    assert project.read("out.txt") == "from the model\n"
    assert project.read("log.txt") == "ran\n"
    assert [r["status"] for r in run.requests] == ["approved", "approved"]
    assert run.requests[0]["tool_args"]["content"] == "from the model\n"
    for tool in ("write_file", "run_shell_command"):
        assert (run.tool_stats(tool)["success"], run.tool_stats(tool)["fail"]) == (1, 0)
    assert _errors(run) == ["", ""]


def test_edited_arguments_are_what_runs(runs: dict[str, Future[tuple[Project, Run]]]) -> None:
    """The person edits the file's content before approving: the edited content is written,
    and Gemini tells the model its input was changed."""
    project, run = runs["edited"].result()

    assert project.read("out.txt") == "edited\n"
    assert project.read("log.txt") == "ran\n"
    assert run.requests[0]["approved_args"]["content"] == "edited\n"
    written = run.tool_results()[0]["response"]["output"]
    assert "edited" in written and "modified by a hook" in written


def test_server_stopped_blocks_the_calls(runs: dict[str, Future[tuple[Project, Run]]]) -> None:
    """signoff is down: the hook cannot file, so nothing runs and Gemini reports why."""
    project, run = runs["server-stopped"].result()

    assert project.read("out.txt") is None
    assert project.read("log.txt") is None
    errors = _errors(run)
    assert len(errors) == 2
    assert all(e.startswith("Tool execution blocked: signoff could not") for e in errors)
    assert "Tool execution blocked" in run.stderr


def test_no_decision_in_time_blocks_and_withdraws(
    runs: dict[str, Future[tuple[Project, Run]]],
) -> None:
    """Nobody decides before the hook's wait ends: the calls are blocked and their requests
    are withdrawn, not left pending for someone to approve later."""
    project, run = runs["no-decision"].result()

    assert project.read("out.txt") is None, run.stderr
    assert project.read("log.txt") is None
    assert [r["tool_name"] for r in run.requests] == ["write_file", "run_shell_command"]
    assert {r["status"] for r in run.requests} <= {"canceled", "expired"}
    errors = _errors(run)
    assert len(errors) == 2
    assert all(e.startswith("Tool execution blocked") for e in errors)
