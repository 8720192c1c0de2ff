"""``signoff inbox``: the terminal inbox, on a database or against a server."""

from __future__ import annotations

import typer

from signoff.cli.backend import ServerOption, TokenOption, open_backend
from signoff.cli.context import DbOption, fail, local_principal, run

__all__ = ["inbox", "register"]


def inbox(
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Open the terminal inbox: pending requests live, decided by keyboard (? for help)."""
    try:
        from signoff.tui.inbox import InboxApp
    except ImportError as exc:
        fail(str(exc))

    async def go() -> None:
        async with open_backend(db, server, token, principal=local_principal()) as backend:
            await InboxApp(backend).run_async()

    run(go)


def register(app: typer.Typer) -> None:
    """Add ``inbox`` to ``app``."""
    app.command()(inbox)
