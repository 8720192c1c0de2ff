"""Command-line interface; ``main`` is the ``signoff`` console script."""

from __future__ import annotations

import sys

__all__ = ["main"]

EXIT_USAGE = 64
EXIT_HOOK_BLOCKED = 2
"""A usage error under ``signoff hook`` (e.g. a mistyped agent name in an agent's settings):
the code every coding agent reads as "block", where 64 would be a warning that runs the tool."""


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
        sys.exit(EXIT_HOOK_BLOCKED if sys.argv[1:2] == ["hook"] else EXIT_USAGE)
    except ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
