"""Commands for the audit chain, API tokens and standing grants."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from signoff.cli.backend import ServerOption, TokenOption, call_backend
from signoff.cli.context import EXIT_CALLER, DbOption, console, err_console
from signoff.domain.principals import Role
from signoff.terminal.render import audit_table
from signoff.terminal.safe_text import visible

__all__ = ["register"]

audit_app = typer.Typer(help="Inspect and verify the hash-chained audit log.", no_args_is_help=True)
token_app = typer.Typer(help="Create, list and revoke API tokens.", no_args_is_help=True)
grants_app = typer.Typer(help="List and revoke standing grants.", no_args_is_help=True)


@audit_app.command("verify")
def audit_verify(
    anchor: Annotated[
        str | None,
        typer.Option(
            "--anchor",
            help="SEQ:HASH printed earlier by 'signoff audit anchor': also prove the log still "
            "holds that entry, so a rewrite at or before it fails even if re-hashed.",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Check the audit log; exit non-zero and say what is wrong if tampered with.

    Checks every entry's hash and link, the head kept beside the log, that every request
    has its submit entry and every event an audited request, and no event is missing.
    """

    report = call_backend(db, server, token, lambda backend: backend.verify_audit(anchor))
    if report.ok:
        extends = f"; it extends anchor {report.anchor}" if report.anchor else ""
        console.print(f"audit chain ok: {report.entries} entries{extends}", markup=False)
        return
    where = (
        f"audit chain broken at entry {report.first_bad_seq}"
        if report.first_bad_seq is not None
        else "audit log fails verification"
    )
    err_console.print(f"error: {where}: {report.problem}", markup=False, soft_wrap=True)
    raise typer.Exit(EXIT_CALLER)


@audit_app.command("anchor")
def audit_anchor(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print seq, hash, anchor and time as JSON.")
    ] = False,
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Print the chain head as SEQ:HASH; keep it outside the database for verify --anchor."""

    anchor = call_backend(db, server, token, lambda backend: backend.audit_anchor())
    if as_json:
        body = {
            **anchor.model_dump(mode="json"),
            "anchor": str(anchor),
            "at": datetime.now(UTC).isoformat(),
        }
        console.print(json.dumps(body), markup=False, soft_wrap=True)
    else:
        console.print(str(anchor), markup=False, soft_wrap=True)


@audit_app.command("log")
def audit_log(
    request_id: Annotated[str | None, typer.Option("--request", help="Only this request.")] = None,
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Print audit entries in chain order."""

    entries = call_backend(db, server, token, lambda backend: backend.audit(request_id))
    console.print(audit_table(entries) if entries else "no audit entries")


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Argument(help="The principal the token authenticates as.")],
    role: Annotated[
        Role, typer.Option(help="agent submits and runs; approver decides; admin both.")
    ],
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Create a token and print it once; only its hash is stored."""

    secret, record = call_backend(
        db, server, token, lambda backend: backend.create_token(name, role)
    )
    err_console.print(
        f"token {record.id} for {record.name} ({record.role}); it is shown only once:",
        markup=False,
    )
    console.print(secret, markup=False)


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (tok_...), from token list.")],
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Revoke a token: it stops working at once, and so do inbox sign-ins made with it."""

    revoked = call_backend(db, server, token, lambda backend: backend.revoke_token(token_id))
    console.print(f"revoked token {revoked.id} ({revoked.name}, {revoked.role})", markup=False)


@token_app.command("list")
def token_list(db: DbOption = None, server: ServerOption = None, token: TokenOption = None) -> None:
    """List tokens (ids, names and roles; never the tokens)."""

    tokens = call_backend(db, server, token, lambda backend: backend.list_tokens())
    table = Table(box=None, pad_edge=False)
    for column in ("id", "name", "role", "created", "revoked"):
        table.add_column(column)
    for t in tokens:
        table.add_row(
            t.id,
            Text(t.name),
            t.role,
            f"{t.created_at:%Y-%m-%d %H:%M}",
            f"{t.revoked_at:%Y-%m-%d %H:%M}" if t.revoked_at else "",
        )
    console.print(table if tokens else "no tokens")


@grants_app.command("list")
def grants_list(
    all_grants: Annotated[bool, typer.Option("--all", help="Include expired and revoked.")] = False,
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """List standing grants."""

    grants = call_backend(
        db, server, token, lambda backend: backend.list_grants(live_only=not all_grants)
    )
    table = Table(box=None, pad_edge=False)
    for column in (
        "id",
        "scope",
        "tool",
        "requester",
        "session",
        "args",
        "by",
        "expires",
        "revoked",
    ):
        table.add_column(column)
    for g in grants:
        table.add_row(
            g.id,
            g.scope,
            Text(visible(g.tool_name, multiline=False)),
            Text(visible(g.requested_by, multiline=False)),
            Text(visible(g.session_id or "", multiline=False)),
            Text(visible(str(g.args_pattern or "any"), multiline=False)),
            Text(g.created_by),
            f"{g.expires_at:%Y-%m-%d %H:%M}",
            f"{g.revoked_at:%Y-%m-%d %H:%M}" if g.revoked_at else "",
        )
    console.print(table if grants else "no standing grants")


@grants_app.command("revoke")
def grants_revoke(
    grant_id: Annotated[str, typer.Argument(help="The grant id.")],
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Revoke a standing grant: it approves nothing more."""

    grant = call_backend(db, server, token, lambda backend: backend.revoke_grant(grant_id))
    console.print(f"{grant.id}: revoked")


def register(app: typer.Typer) -> None:
    """Add the audit, token and grants command groups to ``app``."""
    app.add_typer(audit_app, name="audit")
    app.add_typer(token_app, name="token")
    app.add_typer(grants_app, name="grants")
