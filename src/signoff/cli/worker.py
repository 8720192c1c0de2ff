"""``signoff worker``: run approved tool calls from the queue with your own tool functions.

``--tools module:attribute`` names a :class:`signoff.executor.ToolRegistry`; the module is
imported from the current directory too. The worker claims each approved call of those
tools, runs it with the approved arguments and reports completed or failed.

Who the worker acts as decides what it can run, because an agent sees and claims only the
requests it submitted: on a database it is the agent named by ``--requester`` (default
``cli-agent``, the name ``signoff submit`` asks as); with ``--server`` it is the token's
principal, so use the submitting agent's token, or an admin token to run every agent's calls.
"""

from __future__ import annotations

from typing import Annotated

import typer

from signoff.cli.backend import ServerOption, TokenOption, open_backend
from signoff.cli.context import DbOption, console, err_console, fail, run
from signoff.cli.loading import load_object
from signoff.domain.principals import Principal
from signoff.domain.requests import ApprovalRequest, Request
from signoff.executor import Executor, ToolRegistry
from signoff.terminal.safe_text import visible

__all__ = ["load_registry", "register", "worker"]


def load_registry(spec: str) -> ToolRegistry:
    """The ToolRegistry ``module:attribute`` names, or one ``error:`` line and exit 3."""
    registry = load_object(spec, "--tools")
    if not isinstance(registry, ToolRegistry):
        fail(f"{spec} is a {type(registry).__name__}, not a signoff ToolRegistry")
    if not len(registry):
        fail(f"{spec} has no tools registered")
    return registry


def _line(request: Request) -> str:
    tool = request.tool_name if isinstance(request, ApprovalRequest) else request.kind
    tool = visible(tool, multiline=False)  # the agent named it
    return f"{request.id} {tool} {request.status}"


def worker(
    tools: Annotated[
        str,
        typer.Option(
            "--tools",
            help="MODULE:ATTRIBUTE of a signoff ToolRegistry, e.g. tools:registry.",
            show_default=False,
        ),
    ],
    session: Annotated[str | None, typer.Option(help="Only this agent session.")] = None,
    once: Annotated[
        bool, typer.Option("--once", help="Run what is approved now, then exit.")
    ] = False,
    poll: Annotated[
        float, typer.Option(min=0.05, help="Also look for approved calls every this many seconds.")
    ] = 1.0,
    requester: Annotated[
        str,
        typer.Option(
            envvar="SIGNOFF_AGENT",
            help="On a database: the agent whose requests to run (agents run only their own).",
        ),
    ] = "cli-agent",
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Run approved tool calls with your tool functions; print `ID TOOL completed|failed`.

    Each approved call runs exactly once, even with several workers: the claim is the lock.
    """
    registry = load_registry(tools)

    def report(request: Request) -> None:
        console.print(_line(request), markup=False, soft_wrap=True)

    async def go() -> None:
        principal = Principal(name=requester, role="agent")
        async with open_backend(db, server, token, principal=principal) as backend:
            executor = Executor(
                backend, registry, session_id=session, poll=poll, on_finished=report
            )
            if once:
                await executor.run_once()
                return
            names = ", ".join(sorted(registry.names))
            err_console.print(f"worker: running {names}; Ctrl+C stops", markup=False)
            await executor.run()

    try:
        run(go)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


def register(app: typer.Typer) -> None:
    """Add ``signoff worker`` to ``app``."""
    app.command()(worker)
