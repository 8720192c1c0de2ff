"""``signoff webhooks``: endpoints that receive every event, and their delivery log."""

from __future__ import annotations

from typing import Annotated, Literal

import typer
from rich.table import Table
from rich.text import Text

from signoff.cli.backend import ServerOption, TokenOption, call_backend
from signoff.cli.context import DbOption, console, err_console

__all__ = ["register"]

webhooks_app = typer.Typer(
    help="Send every event to HTTP endpoints, signed with HMAC-SHA256.", no_args_is_help=True
)


@webhooks_app.command("add")
def add(
    url: Annotated[str, typer.Argument(help="Where events are POSTed (http:// or https://).")],
    secret: Annotated[
        str | None, typer.Option(help="HMAC key shared with the receiver (default: generated).")
    ] = None,
    fmt: Annotated[
        Literal["json", "slack"],
        typer.Option("--format", help="json: the event itself; slack: a Slack message."),
    ] = "json",
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Add an endpoint; prints its id and the signing secret (shown once)."""

    hook = call_backend(
        db, server, token, lambda backend: backend.add_webhook(url, secret=secret, fmt=fmt)
    )
    console.print(f"{hook.id} -> {hook.url} ({hook.format})", markup=False)
    err_console.print("signing secret, shown only once:", markup=False)
    console.print(f"secret: {hook.secret}", markup=False)


@webhooks_app.command("list")
def list_(db: DbOption = None, server: ServerOption = None, token: TokenOption = None) -> None:
    """List endpoints (never their secrets)."""

    hooks = call_backend(db, server, token, lambda backend: backend.list_webhooks())
    table = Table(box=None, pad_edge=False)
    for column in ("id", "url", "format", "active", "by", "created"):
        table.add_column(column)
    for h in hooks:
        table.add_row(
            h.id,
            Text(h.url),
            h.format,
            "yes" if h.active else "no",
            Text(h.created_by),
            f"{h.created_at:%Y-%m-%d %H:%M}",
        )
    console.print(table if hooks else "no webhooks")


@webhooks_app.command("remove")
def remove(
    webhook_id: Annotated[str, typer.Argument(help="The webhook id.")],
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Stop sending events to an endpoint (its delivery log stays)."""

    hook = call_backend(db, server, token, lambda backend: backend.remove_webhook(webhook_id))
    console.print(f"{hook.id}: removed")


@webhooks_app.command("deliveries")
def deliveries(
    status: Annotated[
        Literal["pending", "delivered", "failed"] | None, typer.Option(help="Only this status.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="At most this many.")] = 50,
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """The delivery log, newest first: attempts, last HTTP status and error."""

    found = call_backend(
        db, server, token, lambda backend: backend.list_deliveries(status=status, limit=limit)
    )
    table = Table(box=None, pad_edge=False)
    for column in ("id", "webhook", "event", "request", "status", "tries", "last"):
        table.add_column(column, no_wrap=column in ("id", "request"))
    for d in found:
        last = d.last_error or (str(d.last_status_code) if d.last_status_code else "")
        table.add_row(
            d.id,
            d.webhook_id,
            f"#{d.event_seq} {d.event_type}",
            d.request_id,
            d.status,
            str(d.attempts),
            Text(last),
        )
    console.print(table if found else "no deliveries")


@webhooks_app.command("redeliver")
def redeliver(
    delivery_id: Annotated[str, typer.Argument(help="The delivery id.")],
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Send one delivery again now and print the outcome."""

    delivery = call_backend(db, server, token, lambda backend: backend.redeliver(delivery_id))
    console.print(f"{delivery.id}: {delivery.status}", markup=False)
    if delivery.last_error:
        err_console.print(f"last error: {delivery.last_error}", markup=False)
    if delivery.status != "delivered":
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the ``webhooks`` command group to ``app``."""
    app.add_typer(webhooks_app, name="webhooks")
