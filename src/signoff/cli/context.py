"""What every command shares: the --db option, the open service, and error handling.

Exit codes: 0 success (or approved), 1 rejected or canceled, 2 expired or timed out,
3 a caller error (unknown id, invalid decision, bad JSON...), 4 signoff could not do it
(store unavailable), 64 a usage error (unknown option, missing argument).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from pydantic import JsonValue
from rich.console import Console

from signoff.config import default_db_url, local_user, open_store
from signoff.domain.policies import Policy
from signoff.domain.previews import FileReader
from signoff.domain.principals import Principal
from signoff.errors import CallerError, SignoffError
from signoff.service import Service
from signoff.terminal.safe_text import visible

__all__ = [
    "EXIT_CALLER",
    "EXIT_RUNTIME",
    "DbOption",
    "console",
    "fail",
    "local_principal",
    "open_service",
    "parse_json_object",
    "run",
    "run_for_result",
]

T = TypeVar("T")

EXIT_CALLER = 3
EXIT_RUNTIME = 4

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="SIGNOFF_DB",
        help="Database URL: sqlite:///path (default: a file under your user data dir).",
        show_default=False,
    ),
]


def fail(message: str, code: int = EXIT_CALLER) -> NoReturn:
    """Print one ``error:`` line to stderr and exit with ``code``."""
    # messages can quote agent text (a tool name, an option): its controls are escaped
    err_console.print(f"error: {visible(message, multiline=False)}", markup=False, soft_wrap=True)
    raise typer.Exit(code)


def run(coro_fn: Callable[[], Coroutine[Any, Any, int | None]]) -> None:
    """Run a command's coroutine; signoff errors become one line and an exit code."""
    code = run_for_result(coro_fn)
    if code:
        raise typer.Exit(code)


def run_for_result(coro_fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine and return its result; signoff errors become one line and an exit code."""
    try:
        return asyncio.run(coro_fn())
    except SignoffError as exc:
        fail(exc.message, EXIT_CALLER if isinstance(exc, CallerError) else EXIT_RUNTIME)


def local_principal() -> Principal:
    """The person at this terminal: an admin named by ``$SIGNOFF_USER`` or the login name."""
    return Principal(name=local_user(), role="admin")


@asynccontextmanager
async def open_service(
    db: str | None,
    *,
    follow: bool = False,
    policy: Policy | None = None,
    read_file: FileReader | None = None,
    pool: int | None = None,
    writer: str | None = None,
) -> AsyncIterator[Service]:
    """The service on ``--db`` with ``policy`` (default: the tools.toml files).

    ``follow`` also publishes events other processes write (the service's own follower);
    a one-shot command leaves it off. ``pool``: a PostgreSQL store's most connections;
    ``writer``: a SQLite store's writer, ``thread`` or ``process``.
    Diff previews read files only through ``read_file`` (default: none are read, as a
    server must; a command filing its own requests in this process may pass a reader).
    """
    chosen = policy if policy is not None else Policy.load()
    store = open_store(db or default_db_url(), pool=pool, writer=writer)
    service = Service(store, policy=chosen, read_file=read_file, follow=follow)
    await service.open()
    try:
        await service.expire_due()
        yield service
    finally:
        await service.close()


def parse_json_object(text: str, what: str = "--args") -> dict[str, JsonValue]:
    """Parse a JSON object given on the command line, or fail with one line."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    if not isinstance(value, dict):
        fail(f"{what} must be a JSON object, not {type(value).__name__}")
    return value
