"""Where a command's operations go: the database in this process, or a server over HTTP.

Every command runs unchanged against ``--db`` or ``--server URL --token T``: both give a
:class:`signoff.backends.Backend`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, TypeVar

import typer

from signoff.backends import Backend, LocalBackend
from signoff.cli.context import fail, local_principal, open_service, run_for_result
from signoff.domain.principals import Principal
from signoff.service import read_text_file

__all__ = ["ServerOption", "TokenOption", "call_backend", "open_backend"]

T = TypeVar("T")

ServerOption = Annotated[
    str | None,
    typer.Option(
        "--server",
        envvar="SIGNOFF_URL",
        help="A signoff server's URL, instead of a database (with --token).",
        show_default=False,
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="SIGNOFF_TOKEN",
        help="Bearer token for --server.",
        show_default=False,
    ),
]


@asynccontextmanager
async def open_backend(
    db: str | None,
    server: str | None,
    token: str | None,
    *,
    principal: Principal,
    follow: bool = False,
) -> AsyncIterator[Backend]:
    """``--server`` with ``--token`` (HTTP), else ``--db`` (in this process, as ``principal``)."""
    if server is None:
        # a command filing requests here is the agent itself, in its own workspace
        async with open_service(db, follow=follow, read_file=read_text_file) as service:
            yield LocalBackend(service, principal)
        return
    if db is not None:
        fail("give either --db or --server, not both")
    if not token:
        fail("--server needs --token (or SIGNOFF_TOKEN)")
    try:
        from signoff.client import AsyncClient
    except ImportError:
        fail("--server needs the HTTP client: pip install 'signoff[server]'")
    async with AsyncClient(server, token) as client:
        yield client


def call_backend(
    db: str | None,
    server: str | None,
    token: str | None,
    operation: Callable[[Backend], Awaitable[T]],
) -> T:
    """One operation on the backend ``--db`` or ``--server`` names, as the person here.

    For a command that makes one call and then prints what it got: the backend is closed
    before this returns, and a signoff error is one ``error:`` line and its exit code.
    """

    async def go() -> T:
        async with open_backend(db, server, token, principal=local_principal()) as backend:
            return await operation(backend)

    return run_for_result(go)
