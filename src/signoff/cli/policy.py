"""``signoff policy check``: what tools.toml says of a call, and which file and rule said it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from signoff.cli.context import console, fail, parse_json_object
from signoff.domain.policies import Policy
from signoff.domain.requests import ALLOWED_DECISIONS
from signoff.errors import PolicyError

__all__ = ["register"]

policy_app = typer.Typer(help="Inspect the tools.toml policy.", no_args_is_help=True)

_EXIT_CODES = {"allow": 0, "deny": 1, "ask": 2}


@policy_app.command("check")
def check(
    tool: Annotated[str, typer.Argument(help="The tool name.")],
    args: Annotated[
        str, typer.Option("--args", help="The call's arguments, a JSON object.")
    ] = "{}",
    project_dir: Annotated[
        Path | None,
        typer.Option(help="Look for .signoff/tools.toml from here (default: the current dir)."),
    ] = None,
    exit_code: Annotated[
        bool,
        typer.Option("--exit-code", help="Exit 0 for allow, 1 for deny, 2 for ask."),
    ] = False,
) -> None:
    """Print the verdict (allow, deny or ask) on a call, and the file and rule that gave it."""
    parsed = parse_json_object(args)
    try:
        policy = Policy.load(project_dir)
        decision = policy.evaluate(tool, parsed)
    except PolicyError as exc:
        fail(exc.message)
    console.print(Text(decision.explain()))
    for line in policy.explain_rules(tool, parsed):
        console.print(Text(f"  {line}"))
    if decision.verdict == "ask":
        g = decision.governance
        console.print(
            Text(
                f"approvers: {', '.join(g.approvers) or 'any approver or admin'}; "
                f"quorum: {g.quorum}; self-approval: {'allowed' if g.allow_self_approval else 'no'}"
            )
        )
        t = decision.terms if decision.terms is not None else policy.terms()
        expiry = f"after {t.expires_in:g} s, then {t.on_expire}" if t.expires_in else "never"
        decisions = ", ".join(t.allowed_decisions or ALLOWED_DECISIONS["approval"])
        console.print(Text(f"expires: {expiry} (set by {t.set_by}); decisions: {decisions}"))
    if exit_code:
        raise typer.Exit(_EXIT_CODES[decision.verdict])


def register(app: typer.Typer) -> None:
    """Add the ``policy`` command group to ``app``."""
    app.add_typer(policy_app, name="policy")
