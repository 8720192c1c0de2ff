"""``signoff serve``: the HTTP API and live events, on the embedded SQLite default."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from signoff.__version__ import __version__
from signoff.anchoring import log_anchors
from signoff.cli.context import DbOption, console, err_console, fail, open_service, run
from signoff.cli.loading import load_object
from signoff.cli.settings import listen_settings
from signoff.config import (
    ENV_SECRET,
    ServerSecret,
    default_db_url,
    exposed_files,
    is_postgres,
    server_secret,
)
from signoff.errors import InvalidRequest
from signoff.notify.email import ENV_SMTP_PASSWORD, EmailSender, SmtpSettings
from signoff.preview_root import PreviewRoot
from signoff.server.logs import FORMATS, LEVELS, configure_logging, log_start
from signoff.service import Service

if TYPE_CHECKING:
    from signoff.server.slack import SlackInteractivity

__all__ = [
    "check_port_free",
    "ensure_admin_token",
    "logs",
    "preview_root_for",
    "register",
]

ADMIN_NAME = "admin"


async def ensure_admin_token(service: Service) -> str | None:
    """On a database with no admin token, create one and return it (shown once); else None."""
    tokens = await service.store.list_tokens()
    if any(t.role == "admin" and t.revoked_at is None for t in tokens):
        return None
    token, _ = await service.create_token(ADMIN_NAME, "admin", created_by="signoff serve")
    return token


def preview_root_for(path: Path, db_url: str) -> PreviewRoot:
    """The preview root at ``path`` for a server on ``db_url``: its own files are refused in it.

    Those are the SQLite database (with its ``-wal``, ``-shm`` and ``.secret`` siblings) and
    the secret kept in the user's data dir; one ``error:`` line if ``path`` cannot be a root.
    """
    import platformdirs

    private = [Path(platformdirs.user_data_dir("signoff")) / "server.secret"]
    if db_url.startswith("sqlite:"):
        from signoff.store.sqlite import sqlite_path_from_url

        private.append(sqlite_path_from_url(db_url))
    try:
        return PreviewRoot(path.expanduser(), private=private)
    except ValueError as exc:
        fail(f"--preview-root: {exc}")


def warn_exposed_files(db_url: str) -> None:
    """A ``warning:`` line on stderr for each of signoff's files that others can read."""
    for path, mode in exposed_files(db_url):
        err_console.print(
            f"warning: {path} can be read by other users (mode {mode:04o}); "
            f"chmod 600 {path} (and 700 its directory)",
            markup=False,
            soft_wrap=True,
        )


def load_secret(db_url: str) -> ServerSecret:
    """The server secret for ``db_url``; one ``error:`` line when it is unusable."""
    try:
        secret = server_secret(db_url)
    except InvalidRequest as exc:
        fail(exc.message)
    if is_postgres(db_url) and not secret.shared:
        err_console.print(
            f"warning: inbox sessions are signed with the secret in {secret.source}; servers "
            f"sharing this database must all be given the same {ENV_SECRET}",
            markup=False,
            soft_wrap=True,
        )
    return secret


def check_port_free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")


def _agents(specs: list[str]) -> dict[str, Any]:
    """NAME=MODULE:ATTRIBUTE specs as registered agents; one error line when one is wrong."""
    agents: dict[str, Any] = {}
    for spec in specs:
        name, sep, target = spec.partition("=")
        if not sep or not name.strip() or not target:
            fail(f"--agent takes NAME=MODULE:ATTRIBUTE, not {spec!r}")
        if name in agents:
            fail(f"--agent {name!r} is given twice")
        try:
            from pydantic_ai import Agent
        except ImportError:
            fail("hosted agents need pydantic-ai: pip install 'signoff[pydantic-ai]'")
        found = load_object(target, "--agent")
        if not isinstance(found, Agent):
            fail(f"{target} is a {type(found).__name__}, not a pydantic-ai Agent")
        agents[name.strip()] = found
    return agents


def _slack(
    token: str | None, secret: str | None, api_url: str | None, base: str
) -> SlackInteractivity | None:
    """The Slack sender and interactions route, when both its token and secret are given."""
    if token is None and secret is None:
        return None
    if not token or not secret:
        fail("Slack needs both --slack-bot-token and --slack-signing-secret")
    try:
        from signoff.notify.slack import SlackSender
        from signoff.server.slack import SlackInteractivity
    except ImportError:
        fail("Slack needs its extra: pip install 'signoff[slack]'")
    sender = SlackSender(token=token, base_url=api_url, public_url=base)
    return SlackInteractivity(sender=sender, signing_secret=secret)


SMTP_TLS = ("starttls", "tls", "none")


def _smtp(
    host: str | None, port: int | None, tls: str, user: str | None, sender: str | None
) -> SmtpSettings | None:
    """The SMTP settings email routes send with, when ``--smtp-host`` is given; the password
    from the environment only (a command line is visible to other users)."""
    if host is None:
        if port is not None or user is not None or sender is not None:
            fail("--smtp-port, --smtp-user and --smtp-from need --smtp-host")
        return None
    if tls not in SMTP_TLS:
        fail(f"--smtp-tls is one of {', '.join(SMTP_TLS)}, not {tls!r}")
    password = os.environ.get(ENV_SMTP_PASSWORD) or None
    if user is not None and password is None:
        fail(f"--smtp-user needs the password in ${ENV_SMTP_PASSWORD}")
    return SmtpSettings(
        host=host,
        port=port or {"starttls": 587, "tls": 465}.get(tls, 25),
        tls="starttls" if tls == "starttls" else "tls" if tls == "tls" else "none",
        user=user,
        password=password,
        sender=sender or f"signoff@{socket.getfqdn()}",
    )


def logs(level: str, fmt: str, metrics_token: str | None) -> None:
    """Check the logging and metrics options, then send log lines to stderr; one
    ``error:`` line when one is wrong."""
    if level.lower() not in LEVELS:
        fail(f"--log-level is one of {', '.join(LEVELS)}, not {level!r}")
    if fmt.lower() not in FORMATS:
        fail(f"--log-format is one of {', '.join(FORMATS)}, not {fmt!r}")
    if metrics_token is not None and len(metrics_token.strip()) < 16:
        fail("--metrics-token must be at least 16 characters")
    configure_logging(level.lower(), "json" if fmt.lower() == "json" else "console")


def serve(
    host: Annotated[
        str | None,
        typer.Option(
            help="Interface to listen on (default 127.0.0.1, or $SIGNOFF_HOST).",
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=65535,
            help="Port to listen on (default 8000, or $SIGNOFF_PORT).",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
    db_pool: Annotated[
        int | None,
        typer.Option(
            "--db-pool",
            envvar="SIGNOFF_DB_POOL",
            min=1,
            max=1000,
            help="PostgreSQL: the most database connections this server opens for requests "
            "(default 10; one more listens for other servers' events). With many servers, "
            "size them so that all of them together stay under the database's "
            "max_connections (docs/deployment.md).",
            show_default=False,
        ),
    ] = None,
    sqlite_writer: Annotated[
        str | None,
        typer.Option(
            "--sqlite-writer",
            envvar="SIGNOFF_SQLITE_WRITER",
            help="SQLite: what runs the writes, thread (the server's own, the default) or process "
            "of its own, which commits beside a busy server instead of taking turns with it "
            "(faster with many agents at once; it costs a process and about 0.3 s at start).",
            show_default=False,
        ),
    ] = None,
    header_timeout: Annotated[
        float,
        typer.Option(
            min=0.1,
            help="Seconds a connection has to send each request head (from opening, or from "
            "the previous response); slower ones are closed.",
        ),
    ] = 10.0,
    body_timeout: Annotated[
        float,
        typer.Option(
            min=0.1,
            help="Seconds a request body has to arrive whole once its head is in; slower ones "
            "get 408. Long-poll waits and event streams are not affected.",
        ),
    ] = 30.0,
    max_connections: Annotated[
        int,
        typer.Option(
            min=1,
            help="Open connections (WebSockets and event streams included) past which a new "
            "connection is answered 503 and closed.",
        ),
    ] = 1000,
    webhooks: Annotated[
        bool,
        typer.Option(
            "--webhooks/--no-webhooks",
            help="Send webhook deliveries and notifications from this server (with several "
            "servers on one database, leave it on for exactly one).",
        ),
    ] = True,
    allow_private_webhooks: Annotated[
        bool,
        typer.Option(
            "--allow-private-webhooks",
            help="Let webhooks target loopback, private, link-local and other non-public "
            "addresses (refused by default: an admin token could reach internal services).",
        ),
    ] = False,
    agent: Annotated[
        list[str] | None,
        typer.Option(
            "--agent",
            help="Host a pydantic-ai agent as NAME=MODULE:ATTRIBUTE (repeatable); runs pause "
            "for approval and resume by request id.",
            show_default=False,
        ),
    ] = None,
    anchor_every: Annotated[
        float | None,
        typer.Option(
            "--anchor-every",
            min=0.1,
            help="Write the audit anchor (SEQ:HASH, entry count, time) to stderr every SECONDS, "
            "for a log collector to keep outside the database; signoff audit verify --anchor "
            "checks the log against it.",
            show_default=False,
        ),
    ] = None,
    preview_root: Annotated[
        Path | None,
        typer.Option(
            "--preview-root",
            help="Directory whose UTF-8 text files diff previews may read (a call's relative "
            "path resolves here); without it the server reads no file for a preview and shows "
            "only what the agent sent.",
            show_default=False,
        ),
    ] = None,
    secure_cookies: Annotated[
        bool,
        typer.Option(
            "--secure-cookies",
            help="Mark the inbox's session cookie Secure (sent over HTTPS only): use it when "
            "browsers reach this server over TLS, e.g. behind a TLS-terminating proxy.",
        ),
    ] = False,
    trust_forwarded_proto: Annotated[
        bool,
        typer.Option(
            "--trust-forwarded-proto",
            help="Believe the X-Forwarded-Proto header: 'https' there marks the session cookie "
            "Secure. Only behind a proxy that sets it and strips it from clients.",
        ),
    ] = False,
    shutdown_timeout: Annotated[
        float,
        typer.Option(
            "--shutdown-timeout",
            min=1,
            max=3600,
            help="On SIGTERM or Ctrl+C, exit within SECONDS: WebSockets close with 1001, event "
            "streams end, long polls get a retryable 503, and requests still running after "
            "that are cut; what was written is committed first.",
            metavar="SECONDS",
        ),
    ] = 5.0,
    slack_bot_token: Annotated[
        str | None,
        typer.Option(
            "--slack-bot-token",
            envvar="SIGNOFF_SLACK_BOT_TOKEN",
            help="The Slack app's bot token (xoxb-..., scope chat:write): Slack routes post "
            "interactive messages with it. Prefer the environment variable.",
            show_default=False,
        ),
    ] = None,
    slack_signing_secret: Annotated[
        str | None,
        typer.Option(
            "--slack-signing-secret",
            envvar="SIGNOFF_SLACK_SIGNING_SECRET",
            help="The Slack app's signing secret: clicks are taken at "
            "/integrations/slack/interactions only when signed with it. Prefer the "
            "environment variable.",
            show_default=False,
        ),
    ] = None,
    smtp_host: Annotated[
        str | None,
        typer.Option(
            "--smtp-host",
            help="The SMTP server email routes send through; its password, if any, from "
            "$SIGNOFF_SMTP_PASSWORD only.",
            show_default=False,
        ),
    ] = None,
    smtp_port: Annotated[
        int | None,
        typer.Option(
            "--smtp-port",
            min=1,
            max=65535,
            help="Its port (default 587 with starttls, 465 with tls, 25 with none).",
            show_default=False,
        ),
    ] = None,
    smtp_tls: Annotated[
        str,
        typer.Option(
            "--smtp-tls",
            help="starttls (upgrade after connecting), tls (from the start) or none (a local "
            "relay only: the password and the links would cross the network in clear).",
        ),
    ] = "starttls",
    smtp_user: Annotated[
        str | None,
        typer.Option("--smtp-user", help="The SMTP login name.", show_default=False),
    ] = None,
    smtp_from: Annotated[
        str | None,
        typer.Option(
            "--smtp-from",
            help="The From address of signoff's mail (default signoff@ this host's name).",
            show_default=False,
        ),
    ] = None,
    public_url: Annotated[
        str | None,
        typer.Option(
            "--public-url",
            help="Where people's browsers reach this server (e.g. https://signoff.example.com "
            "behind a proxy): every link it hands out (messages, emails, webhooks, task views) "
            "points there. Default $SIGNOFF_PUBLIC_URL, else http://HOST:PORT.",
            show_default=False,
        ),
    ] = None,
    slack_api_url: Annotated[
        str | None,
        typer.Option(
            "--slack-api-url",
            help="Slack's Web API base URL (default https://slack.com/api/; tests point it "
            "at a stand-in).",
            show_default=False,
        ),
    ] = None,
    log_level: Annotated[
        str,
        typer.Option(
            "--log-level",
            envvar="SIGNOFF_LOG_LEVEL",
            help="debug, info (a line per HTTP request and state change), warning, error.",
        ),
    ] = "info",
    log_format: Annotated[
        str,
        typer.Option(
            "--log-format",
            envvar="SIGNOFF_LOG_FORMAT",
            help="console (readable lines) or json (one object a line, for a log collector).",
        ),
    ] = "console",
    log_args: Annotated[
        bool,
        typer.Option(
            "--log-args",
            help="Put tool calls' argument values in the log lines (off: their names only; "
            "values may hold secrets).",
        ),
    ] = False,
    metrics_token: Annotated[
        str | None,
        typer.Option(
            "--metrics-token",
            envvar="SIGNOFF_METRICS_TOKEN",
            help="A token (16+ characters) that may read GET /metrics, besides admin tokens, "
            "for a Prometheus scraper. Prefer the environment variable.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run the signoff server: the web inbox, the HTTP API under /api/v1 and live events."""
    try:
        import uvicorn

        from signoff.server.app import create_app
        from signoff.server.shutdown import prompt_server
        from signoff.server.sockets import guarded_protocol
        from signoff.server.wsprotocol import HubWebSocketProtocol
    except ImportError:
        fail("the server needs its extra: pip install 'signoff[server]'")
    listen = listen_settings(host, port, public_url)
    logs(log_level, log_format, metrics_token)  # first: a wrong option changes nothing
    agents = _agents(agent or [])
    root = preview_root_for(preview_root, db or default_db_url()) if preview_root else None
    db_url = db or default_db_url()
    if db_pool is not None and not is_postgres(db_url):
        fail("--db-pool applies to a PostgreSQL database only (--db postgresql://...)")
    if sqlite_writer is not None and sqlite_writer not in ("thread", "process"):
        fail(f"--sqlite-writer is thread or process, not {sqlite_writer!r}")
    if sqlite_writer is not None and not db_url.startswith("sqlite:"):
        fail("--sqlite-writer applies to a SQLite database only (--db sqlite:///...)")
    # before the store opens: files it creates are private, existing ones keep their modes
    warn_exposed_files(db_url)
    secret = load_secret(db_url)
    check_port_free(listen.host, listen.port)
    base = listen.address
    smtp = _smtp(smtp_host, smtp_port, smtp_tls, smtp_user, smtp_from)
    page_base = listen.page_base
    slack = _slack(slack_bot_token, slack_signing_secret, slack_api_url, page_base)

    async def go() -> None:
        async with open_service(db, follow=True, pool=db_pool, writer=sqlite_writer) as service:
            token = await ensure_admin_token(service)
            email = (
                EmailSender(smtp, service=service, public_url=page_base, key=secret.key)
                if smtp is not None
                else None
            )
            app = create_app(
                service,
                agents=agents,
                preview_root=root,
                public_url=page_base,
                webhooks=webhooks,
                allow_private_webhooks=allow_private_webhooks,
                body_timeout=body_timeout,
                session_key=secret.key,
                secure_cookies=secure_cookies,
                trust_forwarded_proto=trust_forwarded_proto,
                slack=slack,
                senders=[email] if email is not None else [],
                log_args=log_args,
                metrics_token=metrics_token,
            )
            http = guarded_protocol(header_timeout=header_timeout, max_connections=max_connections)
            drain = min(1.0, shutdown_timeout / 4)  # streams close themselves within it
            # events are small JSON sent to many sockets at once: compressing each copy for
            # each socket costs more CPU than it saves bytes
            config = uvicorn.Config(
                app,
                host=listen.host,
                port=listen.port,
                log_level="debug" if log_level.lower() == "debug" else "warning",
                # our formatter on uvicorn's lines (logs.configure_logging), ours for access
                log_config=None,
                access_log=False,
                ws_per_message_deflate=False,
                http=http,
                # the hub writes each event's one frame to every socket (server/hub.py)
                ws=HubWebSocketProtocol,
                # after streams close themselves, what is left of the budget for requests
                timeout_graceful_shutdown=max(int(shutdown_timeout - drain - 0.5), 1),
            )
            server = prompt_server(config, app.state.shutdown, drain=drain)
            console.print(
                f"signoff serving on {base} (database {db or default_db_url()})", soft_wrap=True
            )
            if token is not None:
                console.print("admin token, shown only this once (only its hash is stored):")
                console.print(f"admin token: {token}", markup=False)
                console.print(
                    "open the inbox (the link asks once to confirm, then signs you in):",
                    markup=False,
                )
                console.print(f"    {page_base}/login?token={token}", markup=False, soft_wrap=True)
                console.print(
                    f'API: curl -H "Authorization: Bearer {token}" {page_base}/api/v1/requests',
                    markup=False,
                    soft_wrap=True,
                )
            else:
                db_flag = f" --db {db}" if db else ""
                console.print(
                    f"inbox: {page_base}/ (sign in with an approver or admin token; the admin "
                    "token was printed on first start)",
                    markup=False,
                    soft_wrap=True,
                )
                console.print(
                    f"a new sign-in token: signoff token create NAME --role approver{db_flag}, "
                    f"then open {page_base}/login?token=TOKEN",
                    markup=False,
                    soft_wrap=True,
                )
            console.print("Ctrl+C stops.")
            log_start(base, db_url, __version__)
            anchoring = (
                asyncio.create_task(log_anchors(service, anchor_every))
                if anchor_every is not None
                else None
            )
            try:
                await server.serve()
            finally:
                if anchoring is not None:
                    anchoring.cancel()

    try:
        run(go)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


def register(app: typer.Typer) -> None:
    """Add ``serve`` to ``app``."""
    app.command()(serve)
