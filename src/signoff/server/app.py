"""The ASGI app: the public HTTP contract under ``/api/v1``, over one service."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from signoff.__version__ import __version__
from signoff.hosting import host_agents
from signoff.notify import Sender
from signoff.notify.dispatcher import NotifyDispatcher
from signoff.notify.webhook import WebhookSender
from signoff.preview_root import PreviewRoot
from signoff.server.admin import admin_router
from signoff.server.agui import agui_router
from signoff.server.apidocs import mount_api_docs
from signoff.server.audit import audit_router
from signoff.server.auth import cookie_principal
from signoff.server.deps import API
from signoff.server.edits import edits_router
from signoff.server.errors import install_error_handlers
from signoff.server.events import events_router
from signoff.server.grants import grants_router
from signoff.server.hooks import FailClosedHooks, hooks_router
from signoff.server.hub import Hub
from signoff.server.limits import BodyLimit, NoNulInUrl
from signoff.server.metrics import metrics_router
from signoff.server.notify import notify_router
from signoff.server.observe import AccessLog, Observer
from signoff.server.requests import requests_router
from signoff.server.shutdown import Shutdown
from signoff.server.tasks import tasks_router
from signoff.service import Service
from signoff.web.routes import SecurityHeaders, static_files, web_router
from signoff.webhooks import WebhookDispatcher

if TYPE_CHECKING:
    from signoff.server.slack import SlackInteractivity

__all__ = ["API", "create_app"]


def create_app(
    service: Service,
    *,
    max_body: int = 1_048_576,
    body_timeout: float | None = None,
    sweep: bool = True,
    webhooks: bool = True,
    allow_private_webhooks: bool = False,
    heartbeat: float = 15.0,
    public_url: str | None = None,
    agents: Mapping[str, Any] | None = None,
    preview_root: PreviewRoot | None = None,
    session_key: bytes | None = None,
    secure_cookies: bool = False,
    trust_forwarded_proto: bool = False,
    senders: Sequence[Sender] = (),
    slack: SlackInteractivity | None = None,
    log_args: bool = False,
    metrics_token: str | None = None,
) -> FastAPI:
    """The signoff ASGI app over an open ``service``.

    While it runs (its lifespan) it expires overdue requests (``sweep``) and delivers
    events to webhooks; ``public_url`` is where links in webhook messages point. Webhooks
    go to public addresses only, unless ``allow_private_webhooks`` (loopback, private,
    link-local and the like allowed too).
    ``agents`` (name to pydantic-ai Agent) are hosted as durable tasks (needs pydantic-ai).
    Diff previews read files only inside ``preview_root``; without one, none at all.
    A request body must be whole within ``body_timeout`` seconds (None: no limit).
    Inbox session cookies are signed with ``session_key`` (from the server secret; None:
    a random key, so sessions end with the process); they are Secure with
    ``secure_cookies``, or when a trusted proxy says ``X-Forwarded-Proto: https``
    (``trust_forwarded_proto``).
    Notification routes are sent by ``senders`` (one per channel; the webhook channel's is
    built in, with the webhooks' private-address rule; ``slack``'s sender is added) while
    ``webhooks`` is on.
    With ``slack`` (needs the slack extra), Slack's interactions are taken at
    ``POST /integrations/slack/interactions``.
    Each HTTP request and state change is a log line (argument values only with
    ``log_args``); ``GET /metrics`` answers an admin's token or ``metrics_token``.
    """
    # requests reach this service from agents over HTTP: previews read only inside the
    # operator's preview root, or nothing at all (its in-process default reads anywhere)
    service.confine_previews(preview_root)
    # the agents run through the host an integration registers (signoff.hosting)
    runner = host_agents(service, agents) if agents else None
    # log lines and metrics (server/observe.py): started first, stopped last
    observer = Observer(service, log_args=log_args)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # with several servers on one database, exactly one should send webhooks
        dispatcher = (
            WebhookDispatcher(service, base_url=public_url, allow_private=allow_private_webhooks)
            if webhooks
            else None
        )
        notifier = (
            NotifyDispatcher(
                service,
                [
                    WebhookSender(base_url=public_url, allow_private=allow_private_webhooks),
                    *senders,
                    *([slack.sender] if slack is not None else []),
                ],
            )
            if webhooks
            else None
        )
        await observer.start()
        await hub.start()  # every WebSocket and SSE stream's one reader of the events
        if sweep:
            service.start_sweeper()
        if dispatcher is not None:
            await dispatcher.start()
        if notifier is not None:
            await notifier.start()
        if runner is not None:
            await runner.start()
        try:
            yield
        finally:
            if runner is not None:
                await runner.stop()
            if notifier is not None:
                await notifier.stop()
            if dispatcher is not None:
                await dispatcher.stop()
            await service.stop_sweeper()
            await hub.stop()
            await observer.stop()

    app = FastAPI(
        title="signoff",
        summary="Human sign-off for what AI agents do.",
        version=__version__,
        lifespan=lifespan,
        # FastAPI's pages load from a CDN our CSP blocks: ours serve a local copy
        docs_url=None,
        redoc_url=None,
    )
    app.state.service = service
    install_error_handlers(app)
    app.state.heartbeat = heartbeat
    app.state.hub = hub = Hub(service, heartbeat=heartbeat)
    app.state.shutdown = Shutdown()
    app.state.public_url = public_url
    app.state.allow_private_webhooks = allow_private_webhooks
    app.include_router(requests_router())
    app.include_router(edits_router())
    app.include_router(grants_router())
    app.include_router(audit_router())
    app.include_router(admin_router())
    app.include_router(notify_router())
    app.include_router(events_router())
    app.state.tasks = runner
    app.include_router(tasks_router())
    app.include_router(agui_router())

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        """Liveness: no authentication."""
        return JSONResponse({"ok": True})

    app.state.metrics = observer.metrics
    app.state.metrics_token = metrics_token
    app.include_router(metrics_router())

    app.state.cookie_principal = cookie_principal
    app.state.session_key = session_key if session_key is not None else secrets.token_bytes(32)
    app.state.secure_cookies = secure_cookies
    app.state.trust_forwarded_proto = trust_forwarded_proto
    app.include_router(web_router())
    app.mount("/static", static_files(), name="static")
    mount_api_docs(app)
    app.include_router(hooks_router())
    if slack is not None:
        # imported only when used: it needs slack-sdk, from the slack extra
        from signoff.server.slack import slack_router

        app.state.slack = slack
        app.include_router(slack_router())
    app.add_middleware(BodyLimit, max_body=max_body, body_timeout=body_timeout)
    app.add_middleware(NoNulInUrl)
    app.add_middleware(FailClosedHooks)  # outside every refusal: a hook's is a 200 deny
    app.add_middleware(SecurityHeaders)
    app.add_middleware(AccessLog, observer=observer)  # outermost: sees every answer
    return app
