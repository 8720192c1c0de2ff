"""``signoff hook AGENT``: the command a coding agent runs as its pre-tool hook.

It answers on stdout in the agent's own JSON shape and exits 0 for a decision, 2 for any
failure; never 1, which these agents treat as a warning and run the tool anyway. Usage
errors in a hook command line fail closed the same way (see :func:`run_fail_closed`).
"""

# no ``from __future__ import annotations``: each agent's command is built in a loop, and
# Typer must see its option objects, not strings naming the loop's variables
import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

import typer

from signoff.backends import Backend, LocalBackend
from signoff.cli.backend import ServerOption, TokenOption
from signoff.cli.context import DbOption, open_service
from signoff.cli.hook_install import install_hook
from signoff.domain.principals import Principal
from signoff.errors import InvalidRequest
from signoff.integrations.hooks.contracts import (
    AGENT_LABELS,
    AGENT_TIMEOUT,
    AGENTS,
    DEFAULT_WAIT,
    MAX_INPUT_BYTES,
    AgentName,
    HookCall,
    HookReply,
    Verdict,
    reply,
)
from signoff.integrations.hooks.credentials import hook_settings_file, load_hook_settings
from signoff.integrations.hooks.gate import Connect, answer
from signoff.service import read_text_file

__all__ = ["hook_app", "register", "run_fail_closed"]

hook_app = typer.Typer(
    name="hook",
    help="Gate a coding agent's tool calls through its own hooks (fails closed).",
    no_args_is_help=True,
)


def _connector(db: str | None, server: str | None, token: str | None, agent_name: str) -> Connect:
    """Where the hook files: --server/--token, else the saved hook settings, else --db."""

    @asynccontextmanager
    async def connect(call: HookCall) -> AsyncIterator[Backend]:
        url, key = server, token
        if url is None and key is None and db is None:
            saved = load_hook_settings()
            if saved is not None:
                url, key = saved.server, saved.token
        if url is not None:
            if not key:
                raise InvalidRequest("--server needs --token (or SIGNOFF_TOKEN)")
            from signoff.client import AsyncClient

            async with AsyncClient(url, key) as client:
                yield client
            return
        # no server: the local database, in this process, as the agent; the hook runs in
        # the agent's own workspace, so previews read the files it is about to change
        async with open_service(db, follow=True, read_file=read_text_file) as service:
            yield LocalBackend(service, Principal(name=agent_name, role="agent"))

    return connect


def _process_age() -> float:
    """Seconds since this process started (0 where /proc cannot say): the agent's timeout
    runs from the hook's start, and a loaded machine can take seconds to import signoff."""
    try:
        with open("/proc/self/stat", "rb") as stat, open("/proc/uptime", "rb") as uptime:
            # the fields after the command name (which may hold spaces) start at state
            fields = stat.read().rsplit(b")", 1)[1].split()
            started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
            return max(0.0, float(uptime.read().split()[0]) - started)
    except (OSError, ValueError, IndexError):
        return 0.0


def _event_name(raw: bytes) -> str | None:
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    event = data.get("hook_event_name") if isinstance(data, dict) else None
    return event if isinstance(event, str) else None


async def _answer_until_stopped(
    agent: AgentName, raw: bytes, connect: Connect, wait: float
) -> HookReply:
    """:func:`answer`, denied (with the request withdrawn) if the agent stops the hook."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, task.cancel)
    try:
        return await answer(agent, raw, connect, wait=wait)
    except asyncio.CancelledError:
        stopped = Verdict(
            allow=False, reason="the hook was stopped before a decision", failure=True
        )
        return reply(agent, _event_name(raw), stopped)


def _emit(result: HookReply) -> int:
    sys.stdout.write(json.dumps(result.body, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    if result.stderr:
        sys.stderr.write(result.stderr + "\n")
        sys.stderr.flush()
    return result.exit_code


def _command(agent: AgentName) -> None:
    label = AGENT_LABELS[agent]
    default_wait = DEFAULT_WAIT[agent]

    def hook(
        timeout: Annotated[
            float,
            typer.Option(
                min=1,
                help=f"Stop waiting for a person after this many seconds and deny; keep it "
                f"below {label}'s own hook timeout ({AGENT_TIMEOUT[agent]:g} s by default).",
            ),
        ] = default_wait,
        db: DbOption = None,
        server: ServerOption = None,
        token: TokenOption = None,
        agent_name: Annotated[
            str, typer.Option(help="The requester name, when filing into a local database.")
        ] = agent,
    ) -> None:
        raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        connect = _connector(db, server, token, agent_name)
        wait = max(0.0, timeout - _process_age())
        result = asyncio.run(_answer_until_stopped(agent, raw, connect, wait))
        raise typer.Exit(_emit(result))

    hook.__doc__ = (
        f"Answer {label}'s hook: read its JSON on stdin, file the tool call, wait, reply.\n\n"
        "Prints the agent's own JSON (allow, deny with the reason, edited input) and exits "
        "0; any failure (signoff unreachable, bad input, no decision in time) denies and "
        "exits 2. Without --server/--token it uses the server saved by `signoff hook "
        f"install` ({hook_settings_file()}), else the local database."
    )
    hook_app.command(agent)(hook)


for _agent in AGENTS:
    _command(_agent)

hook_app.command("install")(install_hook)


def register(app: typer.Typer) -> None:
    """Add the ``hook`` group."""
    app.add_typer(hook_app, name="hook")


def run_fail_closed(app: typer.Typer, agent: AgentName) -> int:
    """Run ``signoff hook AGENT ...``: whatever goes wrong, the agent reads a deny and exit 2.

    A usage error (a mistyped option in the agent's settings) would otherwise exit 64, which
    the agent takes for a warning and runs the tool.
    """
    try:
        code = app(standalone_mode=False)
    except Exception as exc:  # Click's usage errors too
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        failed = Verdict(
            allow=False, reason=f"signoff hook could not run ({message}); blocked", failure=True
        )
        return _emit(reply(agent, None, failed))
    if code in (None, 0, 2):
        return code or 0
    # --help exits 0 above; anything else that ended without an answer blocks the call
    failed = Verdict(allow=False, reason=f"signoff hook exited {code}; blocked", failure=True)
    return _emit(reply(agent, None, failed))
