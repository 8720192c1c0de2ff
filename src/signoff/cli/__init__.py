"""Command-line interface; ``main`` is the ``signoff`` console script."""

from __future__ import annotations

import sys

__all__ = ["main"]

EXIT_USAGE = 64


def main() -> None:
    """Run the CLI; usage errors exit 64 so they are never mistaken for a decision."""
    # Typer (>= 0.29) vendors Click; its exception classes live here.
    from typer._click.exceptions import ClickException, UsageError

    from signoff.cli.app import app

    try:
        code = app(standalone_mode=False)
    except UsageError as exc:
        exc.show()
        sys.exit(EXIT_USAGE)
    except ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
