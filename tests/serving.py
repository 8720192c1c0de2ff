"""A real ``signoff serve`` process for end-to-end tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from signoff.client import API

ROOT = Path(__file__).resolve().parents[1]
"""The repository."""
DEMO = "demo=signoff.chat.hosted:agent"
"""The ``--agent`` option hosting the demo chat agent as ``demo``."""


PORTS_BELOW = 32768
"""Linux's ephemeral ports start here (``ip_local_port_range``): the kernel hands those out to
``bind(0)`` and to every outgoing connection, so a port picked there and bound later by a child
process can be taken in between, by another xdist worker's client or server."""

PORTS_PER_WORKER = 1500
"""Each xdist worker (``gw0``, ``gw1``...) picks its ports in a slice of its own below
:data:`PORTS_BELOW`; a run without xdist (``-n 0``) takes the last of :data:`SLICES`, so it
meets no worker of a parallel run going on at the same time."""

SLICES = 8

_next_port: list[int] = []  # the next port this process tries, once the slice is known


def _slice() -> int:
    """This process's slice of ports: its xdist worker number, the last one without xdist."""
    number = os.environ.get("PYTEST_XDIST_WORKER", "").removeprefix("gw")
    return int(number) % (SLICES - 1) if number.isdigit() else SLICES - 1


def free_port() -> int:
    """A TCP port nobody listens on right now, that no other test worker will pick.

    Ports come in turn from this worker's slice (starting at a random place in it, so two runs
    at once rarely meet), never from the ephemeral range the kernel draws from, so the port stays
    free until the process a test starts binds it."""
    low = PORTS_BELOW - PORTS_PER_WORKER * (_slice() + 1)
    if not _next_port:
        _next_port.append(low + random.randrange(PORTS_PER_WORKER))
    for _ in range(PORTS_PER_WORKER):
        port = low + (_next_port[0] - low) % PORTS_PER_WORKER
        _next_port[0] = port + 1
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use, or in TIME_WAIT: the next one
            return port
    raise AssertionError(f"no free port in {low}..{low + PORTS_PER_WORKER - 1}")


@dataclass
class Server:
    """A running ``signoff serve`` and what a test needs to talk to it."""

    process: subprocess.Popen[str]
    base: str
    db: str
    admin_token: str | None
    env: dict[str, str]

    @property
    def port(self) -> int:
        """The server's TCP port."""
        return int(self.base.rsplit(":", 1)[1])

    def connect(self, timeout: float = 10.0) -> socket.socket:
        """A new TCP connection to the server (``timeout`` for each of its operations)."""
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run a CLI command on the same database."""
        return subprocess.run(
            [sys.executable, "-m", "signoff", *args, "--db", self.db],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
            check=False,
        )

    def stop(self) -> None:
        """Stop the server and wait for it."""
        self.process.terminate()
        self.process.communicate(timeout=20)


def start_server(
    db: str,
    port: int,
    env: dict[str, str],
    *extra: str,
    cwd: str | None = None,
    log: Path | None = None,
) -> Server:
    """Start ``signoff serve`` (with ``extra`` options) and wait until /healthz answers.

    Its stderr goes to the file ``log`` when given (its log lines at the level ``env`` or
    ``extra`` say), else to a pipe, at log level warning unless ``env`` says otherwise:
    nothing reads that pipe while it runs, and one full of a line per request would stop it.
    """
    if log is None:
        env = {"SIGNOFF_LOG_LEVEL": "warning", **env}
    sink = log.open("w") if log is not None else None
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "signoff", "serve", "--port", str(port), "--db", db, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if sink is None else sink,
            text=True,
            env=env,
            cwd=cwd,
        )
    finally:
        if sink is not None:
            sink.close()  # the process has its own copy
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    # one client for every try: each new one loads the CA bundle (30 ms of CPU), taken from
    # the server starting beside it
    with httpx.Client(timeout=1) as probe:
        while time.monotonic() < deadline:
            try:
                if probe.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
            if process.poll() is not None:
                _, err = process.communicate()
                raise AssertionError(f"serve exited: {err}")
        else:
            process.kill()
            process.communicate()
            raise AssertionError("serve did not come up")
    token = None
    assert process.stdout is not None
    for _ in range(6):
        line = process.stdout.readline()
        if line.startswith("admin token: "):
            token = line.split(": ", 1)[1].strip()
            break
        if line.startswith("Ctrl+C"):
            break
    return Server(process, base, db, token, env)


@contextlib.contextmanager
def nodes_on(db: str, home: Path, count: int, *others: str) -> Iterator[list[Server]]:
    """``count`` servers on one PostgreSQL database ``db`` (config under ``home``); the
    first printed the admin token, the others start with ``others`` (``--no-webhooks``, as
    docs/deployment.md runs them). Each is stopped on the way out."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(home), "COLUMNS": "200"}
    started: list[Server] = []
    try:
        for n in range(count):
            started.append(start_server(db, free_port(), env, *(others if n else ())))
        yield started
    finally:
        for node in started:
            if node.process.poll() is None:
                node.stop()


def new_token(server: Server, name: str, role: str) -> tuple[str, str]:
    """A new token for ``name`` and its id: through the admin API while the server runs and
    this test started it on a new database (it printed the admin token), else through the CLI
    on the server's database. A CLI process costs a second of CPU on the project's machine,
    most of it importing; the tests of making tokens with the CLI are in tests/cli."""
    if server.admin_token is not None and server.process.poll() is None:
        made = httpx.post(
            f"{server.base}{API}/tokens",
            json={"name": name, "role": role},
            headers=bearer(server.admin_token),
            timeout=30,
        )
        assert made.status_code == 201, made.text
        body = made.json()
        return body["token"], body["id"]
    done = server.cli("token", "create", name, "--role", role)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip(), next(w for w in done.stderr.split() if w.startswith("tok_"))


def agent_token(server: Server, name: str = "bot") -> str:
    """A new agent token (:func:`new_token`)."""
    return new_token(server, name, "agent")[0]


def session_cookie(server: Server) -> str:
    """The admin signed in to the inbox through the sign-in form: the session cookie's value."""
    assert server.admin_token is not None
    response = httpx.post(
        f"{server.base}/login",
        content=f"token={server.admin_token}&next=/",
        headers={
            "content-type": "application/x-www-form-urlencoded",
            "sec-fetch-site": "same-origin",
        },
    )
    cookie = response.cookies.get("signoff_session")
    assert cookie, response.text
    return cookie


def bearer(token: str) -> dict[str, str]:
    """An Authorization header."""
    return {"Authorization": f"Bearer {token}"}


def serve_for_module(home: Path) -> Iterator[Server]:
    """Yield a ``signoff serve`` on its own SQLite file in ``home`` (also its
    ``XDG_CONFIG_HOME``), for a module fixture; stopped at the end unless a test stopped it."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(home)}
    running = start_server(f"sqlite:///{home / 'serve.db'}", free_port(), env)
    yield running
    if running.process.poll() is None:
        running.stop()


def serve_hosted(
    home: Path,
    *agents: str,
    tools_toml: str | None = None,
    workspace: Path | None = None,
    port: int | None = None,
) -> tuple[Server, Path]:
    """Start ``signoff serve --agent NAME=MODULE:ATTR...`` on its own SQLite file in ``home``
    (also its ``XDG_CONFIG_HOME`` and working directory, so ``tools_toml``, when given, is its
    only policy), its agents' files in ``workspace`` (``$SIGNOFF_WORKSPACE``, default
    ``home/workspace``), the repository on its ``PYTHONPATH`` (agents under tests/ import);
    ``port`` starts it again on the same database. The server and the workspace."""
    workspace = workspace or home / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    if tools_toml is not None:
        (home / ".signoff").mkdir(exist_ok=True)
        (home / ".signoff" / "tools.toml").write_text(tools_toml)
    environment = {
        **os.environ,
        "XDG_CONFIG_HOME": str(home),
        "SIGNOFF_WORKSPACE": str(workspace),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    options = [option for agent in agents for option in ("--agent", agent)]
    db = f"sqlite:///{home / 'serve.db'}"
    server = start_server(db, port or free_port(), environment, *options, cwd=str(home))
    return server, workspace


@contextlib.asynccontextmanager
async def api_as(server: Server, token: str) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client on the server's base URL that sends ``token``."""
    async with httpx.AsyncClient(base_url=server.base, headers=bearer(token), timeout=30) as client:
        yield client


@dataclass
class Receiver:
    """A real HTTP endpoint that records what it is sent and can fail on purpose."""

    url: str
    fail_next: int = 0
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


@contextlib.asynccontextmanager
async def run_receiver() -> AsyncIterator[Receiver]:
    """A webhook receiver served by uvicorn on a free port in this event loop."""
    port = free_port()
    state = Receiver(url=f"http://127.0.0.1:{port}/hook")

    async def hook(request: Request) -> Response:
        body = await request.body()
        if state.fail_next > 0:
            state.fail_next -= 1
            return Response("try later", status_code=500)
        state.received.append((dict(request.headers), body))
        state.arrived.set()
        return Response("ok")

    app = Starlette(routes=[Route("/hook", hook, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    await until_listening(server)
    yield state
    server.should_exit = True
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def until_listening(server: uvicorn.Server) -> None:
    """Wait until an in-process uvicorn ``server`` listens (uvicorn offers no event for it)."""
    for _ in range(1000):
        if server.started:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("uvicorn did not start listening within 10 s")
