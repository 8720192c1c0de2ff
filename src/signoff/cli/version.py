"""``signoff --version``: the installed package's version, for bug reports and upgrades."""

from __future__ import annotations

from typing import Annotated

import typer

from signoff.__version__ import __version__

__all__ = ["register"]


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"signoff {__version__}")
        raise typer.Exit(0)


def register(app: typer.Typer) -> None:
    """Give ``app`` a ``--version`` option (before any command)."""

    @app.callback()
    def signoff(
        version: Annotated[
            bool,
            typer.Option(
                "--version",
                callback=_print_version,
                is_eager=True,
                help="Print signoff's version and exit.",
            ),
        ] = False,
    ) -> None:
        """Human sign-off for what AI agents do."""
