"""``signoff bridge``: long-running bridges to agents that ask over their own API.

``signoff bridge opencode --url URL`` follows an ``opencode serve`` instance and answers
its permission requests with people's decisions (see :mod:`signoff.integrations.opencode`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Coroutine
from typing import Annotated, Any

import typer

from signoff.backends import Backend
from signoff.cli.backend import ServerOption, TokenOption, open_backend
from signoff.cli.context import DbOption, err_console, fail, run
from signoff.domain.principals import Principal
from signoff.errors import NotAllowed, StoreUnavailable, Unauthenticated
from signoff.store.base import RequestQuery
from signoff.terminal.safe_text import visible

__all__ = ["opencode", "register"]

bridge_app = typer.Typer(
    name="bridge",
    help="Answer an agent's permission requests over its own API with people's decisions.",
    no_args_is_help=True,
)


def _say(message: str) -> None:
    err_console.print(visible(message, multiline=False), markup=False, soft_wrap=True)


@bridge_app.command("opencode")
def opencode(
    url: Annotated[
        str,
        typer.Option(
            "--url",
            envvar="OPENCODE_URL",
            help="The `opencode serve` server to follow.",
        ),
    ] = "http://127.0.0.1:4096",
    username: Annotated[
        str,
        typer.Option(
            "--username",
            envvar="OPENCODE_SERVER_USERNAME",
            help="OpenCode's basic-auth user (with --password).",
        ),
    ] = "opencode",
    password: Annotated[
        str | None,
        typer.Option(
            "--password",
            envvar="OPENCODE_SERVER_PASSWORD",
            help="OpenCode's server password, when it has one.",
            show_default=False,
        ),
    ] = None,
    directory: Annotated[
        str | None,
        typer.Option(
            "--directory",
            help="The project directory on the OpenCode server (default: the server's own).",
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=1,
            max=30 * 24 * 3600,
            help="Seconds a request waits for a person; then OpenCode is told no.",
        ),
    ] = 86_400.0,
    use_always: Annotated[
        bool,
        typer.Option(
            "--always/--no-always",
            help="Answer `always` for standing grants (OpenCode then stops asking for what "
            "the permission covers); --no-always asks signoff for every call.",
        ),
    ] = True,
    agent_name: Annotated[
        str,
        typer.Option("--agent-name", help="On --db: the agent the requests are filed as."),
    ] = "opencode",
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Answer an `opencode serve` instance's permission requests with people's decisions."""
    from signoff.integrations.opencode import OpenCodeApi, OpenCodeBridge, OpenCodeError

    if not url.startswith(("http://", "https://")):
        fail(f"--url must be an http:// or https:// URL, not {url!r}")

    async def go() -> None:
        principal = Principal(name=agent_name, role="agent")
        api = OpenCodeApi(url, username=username, password=password, directory=directory)
        try:
            async with open_backend(db, server, token, principal=principal, follow=True) as back:
                await _check_signoff(back)
                bridge = OpenCodeBridge(api, back, wait=timeout, use_always=use_always, log=_say)
                await _until_stopped(bridge.run())
        except OpenCodeError as exc:
            fail(str(exc))
        finally:
            await api.aclose()

    run(go)


async def _check_signoff(backend: Backend) -> None:
    """Stop at once on a token signoff refuses; only warn while signoff cannot be reached
    (each permission asked meanwhile is rejected, saying so)."""
    try:
        await backend.list_requests(RequestQuery(limit=1))
    except (Unauthenticated, NotAllowed) as exc:
        fail(f"signoff refused the token: {exc.message}")
    except StoreUnavailable as exc:
        _say(f"warning: {exc.message}; permissions are rejected until signoff is back")


async def _until_stopped(work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` until it ends or SIGINT / SIGTERM arrives, then stop it cleanly."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        _say("stopped; permissions still waiting are taken up when the bridge starts again")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)


def register(app: typer.Typer) -> None:
    """Add the ``bridge`` group to ``app``."""
    app.add_typer(bridge_app, name="bridge")
