"""The ``signoff`` command: one Typer app, a module per group of commands."""

from __future__ import annotations

import typer

from signoff.cli import (
    admin,
    bridge,
    chat,
    demo,
    hooks,
    inbox,
    mcp,
    notify,
    policy,
    requests,
    serve,
    version,
    webhooks,
    worker,
)

__all__ = ["app"]

app = typer.Typer(
    name="signoff",
    help="Human sign-off for what AI agents do.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

version.register(app)
serve.register(app)
requests.register(app)
admin.register(app)
policy.register(app)
webhooks.register(app)
notify.register(app)
demo.register(app)
worker.register(app)
chat.register(app)
inbox.register(app)
mcp.register(app)
bridge.register(app)
hooks.register(app)
