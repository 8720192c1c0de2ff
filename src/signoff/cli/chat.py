"""``signoff chat``: a coding agent in the terminal whose risky tool calls wait for you."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from signoff.cli.backend import TokenOption
from signoff.cli.context import DbOption, console, fail, local_principal, open_service, run
from signoff.cli.serve import preview_root_for
from signoff.config import default_db_url

__all__ = ["chat", "model_problem", "register"]

_NO_KEY = "or run without --model for the scripted demo model"
_SETTING = re.compile(r"`([A-Z][A-Z0-9_]*)`")
_INSTALL = re.compile(r"`(pip install [^`]+)`")


def model_problem(model: str, exc: Exception) -> str:
    """One line saying what ``model`` lacks (from its provider's error) and the no-key way."""
    text = str(exc)
    if isinstance(exc, ImportError):
        install = _INSTALL.search(text)
        need = install.group(1) if install else "its provider's package"
        return f"{model} needs {need}; install it, {_NO_KEY}"
    settings = _SETTING.findall(text)
    if settings:
        return f"{model} needs {' or '.join(dict.fromkeys(settings))}; set it, {_NO_KEY}"
    if text.startswith("Unknown model"):
        return f"unknown model {model}; name one as provider:model, e.g. openai:gpt-5, {_NO_KEY}"
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return f"{model}: {first}; {_NO_KEY}"


def chat(
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Any pydantic-ai model string, e.g. openai:gpt-5 (default: the scripted demo).",
            show_default=False,
        ),
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option("--resume", help="Continue the chat session with this id.", metavar="ID"),
    ] = None,
    remote: Annotated[
        str | None,
        typer.Option(
            "--remote",
            help="Send approvals to this signoff server (with --token), to decide in its inbox.",
            metavar="URL",
            show_default=False,
        ),
    ] = None,
    token: TokenOption = None,
    agent_token: Annotated[
        str | None,
        typer.Option(
            "--agent-token",
            help="With --remote: the agent token the chat files requests with, so that you "
            "(--token) may approve them from here too (default: --token, and then only "
            "others can approve).",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Chat with a coding agent here; tools.toml says which of its calls wait for you."""
    try:
        from pydantic_ai.exceptions import UserError

        from signoff.backends import Backend, LocalBackend
        from signoff.chat import CHAT_PRINCIPAL, ChatSession, build_agent, model_label
        from signoff.chat.demo import resolve_model
        from signoff.domain.policies import Policy
        from signoff.service import Service
        from signoff.tui.chat import ChatApp
    except ImportError:
        fail("signoff chat needs its extras: pip install 'signoff[tui,pydantic-ai]'")
    if remote is not None and not token:
        fail("--remote needs --token (or SIGNOFF_TOKEN)")

    demo = model is None or model.strip().lower() in ("", "demo")
    try:
        # a provider without its key or package fails here, before anything is opened
        agent = build_agent(model, Path.cwd())
    except (UserError, ImportError) as exc:
        fail(model_problem(model or "demo", exc))

    async def session_app(backend: Backend, decider: Backend, mode: str, service: Service) -> None:
        policy = Policy.load()
        if resume is not None:
            session = await ChatSession.restore(
                resume, agent, backend, service.store, policy=policy
            )
        else:
            session = await ChatSession.start(
                agent, backend, service.store, user=local_principal().name, policy=policy
            )
        label = model_label(resolve_model(model))
        app = ChatApp(session, decider, model_name=label, mode=mode, demo=demo)
        await app.run_async()
        console.print(
            f"session {session.id}; resume with: signoff chat --resume {session.id}",
            markup=False,
            soft_wrap=True,
        )

    async def go() -> None:
        # sessions are kept in --db even when approvals go to a server
        # previews read only the working directory the chat agent's tools are confined to
        root = preview_root_for(Path.cwd(), db or default_db_url())
        async with open_service(db, follow=True, read_file=root) as service:
            if remote is None:
                await session_app(
                    LocalBackend(service, CHAT_PRINCIPAL),
                    LocalBackend(service, local_principal()),
                    "local",
                    service,
                )
                return
            try:
                from signoff.client import AsyncClient
            except ImportError:
                fail("--remote needs the HTTP client: pip install 'signoff[server]'")
            async with (
                AsyncClient(remote, agent_token or token or "") as filer,
                AsyncClient(remote, token or "") as person,
            ):
                await session_app(filer, person, f"remote {remote}", service)

    run(go)


def register(app: typer.Typer) -> None:
    """Add ``chat`` to ``app``."""
    app.command()(chat)
