"""``signoff notify``: notification routes; ``signoff people``: who a Slack id or address is."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import typer
from rich.table import Table
from rich.text import Text

from signoff.cli.backend import ServerOption, TokenOption, call_backend
from signoff.cli.context import DbOption, console, fail
from signoff.domain.notify import Route

__all__ = ["register"]

notify_app = typer.Typer(
    help="Routes that send requests to Slack, email or a webhook, with escalation.",
    no_args_is_help=True,
)
people_app = typer.Typer(
    help="Link Slack user ids and email addresses to signoff people.", no_args_is_help=True
)

Seconds = Annotated[int | None, typer.Option(min=1, metavar="SECONDS")]


def _channel(
    slack: str | None, mention: list[str], email: list[str], webhook: str | None
) -> dict[str, Any]:
    given = [c for c in (slack, email or None, webhook) if c]
    if len(given) != 1:
        fail("give exactly one channel: --slack, --email (repeatable) or --webhook")
    if slack:
        return {"type": "slack", "channel": slack, "mention": mention}
    if email:
        return {"type": "email", "to": email}
    return {"type": "webhook", "url": webhook}


def _where(route: Route) -> str:
    channel = route.channel
    if channel.type == "slack":
        mentions = " ".join(f"@{m}" for m in channel.mention)
        return f"slack {channel.channel} {mentions}".rstrip()
    if channel.type == "email":
        return "email " + ", ".join(channel.to)
    return f"webhook {channel.url}"


def _matches(route: Route) -> str:
    parts = [f"tool={route.tool}"]
    parts += [
        f"{k}={v}"
        for k, v in (("kind", route.kind), ("agent", route.agent), ("session", route.session))
        if v
    ]
    return " ".join(parts)


def _timing(route: Route) -> str:
    parts = []
    if route.escalate_after:
        parts.append(f"escalate {route.escalate_after}s -> {route.escalate_to}")
    if route.warn_before_expiry:
        parts.append(f"warn {route.warn_before_expiry}s before expiry")
    if route.digest:
        parts.append(f"digest {route.digest}s")
    return ", ".join(parts)


@notify_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="The route's name (a-z, 0-9, - and _).")],
    slack: Annotated[
        str | None, typer.Option(help="A Slack channel (#name or C…) or user (U…) to post to.")
    ] = None,
    mention: Annotated[
        list[str] | None, typer.Option(help="A Slack user id to mention (repeatable).")
    ] = None,
    email: Annotated[
        list[str] | None, typer.Option(help="An address to mail (repeatable).")
    ] = None,
    webhook: Annotated[str | None, typer.Option(help="A URL to POST each notice to.")] = None,
    tool: Annotated[str, typer.Option(help="Glob on the tool name.")] = "*",
    kind: Annotated[
        Literal["approval", "choice", "questions"] | None, typer.Option(help="Only this kind.")
    ] = None,
    agent: Annotated[str | None, typer.Option(help="Glob on the requesting agent.")] = None,
    session: Annotated[str | None, typer.Option(help="Glob on the session id.")] = None,
    escalate_after: Seconds = None,
    escalate_to: Annotated[
        str | None, typer.Option(help="The route an undecided request escalates to (once).")
    ] = None,
    warn_before_expiry: Seconds = None,
    digest: Seconds = None,
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Add a route: which requests (globs) go where; escalation, expiry warning, digest."""
    spec: dict[str, Any] = {
        "name": name,
        "tool": tool,
        "kind": kind,
        "agent": agent,
        "session": session,
        "channel": _channel(slack, mention or [], email or [], webhook),
        "escalate_after": escalate_after,
        "escalate_to": escalate_to,
        "warn_before_expiry": warn_before_expiry,
        "digest": digest,
    }
    route = call_backend(db, server, token, lambda backend: backend.add_route(spec))
    console.print(f"{route.name}: {_where(route)} ({_matches(route)})", markup=False)


@notify_app.command("list")
def list_(db: DbOption = None, server: ServerOption = None, token: TokenOption = None) -> None:
    """List routes: what they match, where they send, their last send and any failure."""
    found = call_backend(db, server, token, lambda backend: backend.list_routes())
    table = Table(box=None, pad_edge=False)
    for column in ("name", "matches", "channel", "timing", "source", "last sent", "status"):
        table.add_column(column)
    for s in found:
        r = s.route
        status = Text(f"FAILING: {s.last_error}", style="bold red") if s.failing else Text("ok")
        last = f"{s.last_sent_at:%Y-%m-%d %H:%M:%S}" if s.last_sent_at else "never"
        table.add_row(
            r.name, Text(_matches(r)), Text(_where(r)), _timing(r), r.source, last, status
        )
    console.print(table if found else "no notification routes")
    if any(s.failing for s in found):
        raise typer.Exit(1)


@notify_app.command("remove")
def remove(
    name: Annotated[str, typer.Argument(help="The route's name.")],
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Remove a route (tools.toml's routes are edited in the file)."""
    route = call_backend(db, server, token, lambda backend: backend.remove_route(name))
    console.print(f"{route.name}: removed", markup=False)


LinkKindOption = Annotated[
    Literal["slack", "email"] | None,
    typer.Option("--kind", help="slack or email (default: email when it has an @)."),
]


def _kind(external_id: str, kind: str | None) -> str:
    return kind or ("email" if "@" in external_id else "slack")


@people_app.command("link")
def link(
    external_id: Annotated[str, typer.Argument(help="A Slack user id (U…) or an email address.")],
    name: Annotated[str, typer.Argument(help="The signoff person (their token's name).")],
    kind: LinkKindOption = None,
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Make a Slack user or an address stand for a person who holds a decider token."""
    found = call_backend(
        db,
        server,
        token,
        lambda backend: backend.link_person(_kind(external_id, kind), external_id, name),
    )
    console.print(f"{found.kind} {found.external_id} -> {found.name}", markup=False)


@people_app.command("unlink")
def unlink(
    external_id: Annotated[str, typer.Argument(help="A Slack user id or an email address.")],
    kind: LinkKindOption = None,
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Remove a link: that Slack user or address decides nothing any more."""
    found = call_backend(
        db,
        server,
        token,
        lambda backend: backend.unlink_person(_kind(external_id, kind), external_id),
    )
    console.print(f"{found.kind} {found.external_id}: unlinked", markup=False)


@people_app.command("list")
def list_people(
    db: DbOption = None, server: ServerOption = None, token: TokenOption = None
) -> None:
    """List links: Slack user ids and addresses, and whom they stand for."""
    found = call_backend(db, server, token, lambda backend: backend.list_links())
    table = Table(box=None, pad_edge=False)
    for column in ("kind", "id", "person", "by", "linked"):
        table.add_column(column)
    for p in found:
        table.add_row(
            p.kind,
            Text(p.external_id),
            Text(p.name),
            Text(p.created_by),
            f"{p.created_at:%Y-%m-%d %H:%M}",
        )
    console.print(table if found else "no people linked")


def register(app: typer.Typer) -> None:
    """Add the ``notify`` and ``people`` command groups to ``app``."""
    app.add_typer(notify_app, name="notify")
    app.add_typer(people_app, name="people")
