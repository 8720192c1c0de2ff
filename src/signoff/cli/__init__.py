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

    if len(sys.argv) > 2 and sys.argv[1] == "hook":
        from signoff.cli.hooks import run_fail_closed
        from signoff.integrations.hooks.contracts import AGENTS

        if sys.argv[2] in AGENTS:
            sys.exit(run_fail_closed(app, sys.argv[2]))
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
