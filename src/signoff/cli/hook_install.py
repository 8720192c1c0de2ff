"""``signoff hook install AGENT``: put signoff's hook into a coding agent's settings file.

The merge itself is :mod:`signoff.integrations.hooks.install`; this is the command line:
which file, which ``signoff`` executable the hook runs, where the server and token go
(signoff's own 0600 file, never the agent's settings, which may be committed) and what the
person still has to do for the agent to run the hook.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer

from signoff.cli.backend import ServerOption, TokenOption
from signoff.cli.context import console, err_console, fail
from signoff.config import default_db_url
from signoff.errors import AgentSettingsError, SignoffError
from signoff.integrations.hooks.contracts import AGENT_LABELS, AGENTS, AgentName
from signoff.integrations.hooks.credentials import (
    HookSettings,
    hook_settings_file,
    load_hook_settings,
    save_hook_settings,
)
from signoff.integrations.hooks.install import (
    DEFAULT_HOOK_TIMEOUT,
    WAIT_MARGIN,
    HookSpec,
    Scope,
    codex_hooks_off,
    holds_hook,
    hook_spec,
    install,
    notes_for,
    read_settings,
    settings_file,
    snippet,
    warnings_for,
)

__all__ = ["install_hook"]

MIN_TIMEOUT = WAIT_MARGIN + 1
"""The shortest hook timeout install writes: signoff still waits a second for a person."""
MAX_TIMEOUT = 86_400


def _signoff_executable() -> str:
    """The absolute path of the ``signoff`` being run, for the agent to run as its hook.

    Symlinks are not followed: a link such as pipx's ``~/.local/bin/signoff`` survives an
    upgrade that moves what it points to.
    """
    argv0 = Path(sys.argv[0])
    if argv0.name in ("signoff", "signoff.exe") and argv0.is_file():
        return os.path.abspath(argv0)
    found = shutil.which("signoff")
    if found is None:
        fail("cannot find the signoff executable for the hook to run; put it on PATH")
    return os.path.abspath(found)


def _agent(name: str) -> AgentName:
    if name not in AGENTS:
        fail(f"unknown agent {name!r}: choose one of {', '.join(AGENTS)}")
    return name


def _credentials(server: str | None, token: str | None, db: str | None) -> HookSettings | None:
    """The server and token to save, checked; None when none were given."""
    if server is None and token is None:
        return None
    if not server or not token:
        fail("--server and --token go together (or SIGNOFF_URL and SIGNOFF_TOKEN)")
    if db is not None:
        fail("give either --db or --server, not both")
    if not server.startswith(("http://", "https://")):
        fail(f"--server must be an http:// or https:// URL, not {server!r}")
    try:  # the hook would deny every call without it
        import signoff.client  # noqa: F401
    except ImportError:
        fail("a hook with --server needs the HTTP client: pip install 'signoff[server]'")
    return HookSettings(server=server.rstrip("/"), token=token)


def _where_requests_go(credentials: HookSettings | None, db: str | None) -> str:
    """One line saying where the installed hook will file its requests."""
    if db is not None:
        return f"the hook files requests in the database {db}"
    if credentials is not None:
        return f"the hook files requests with {credentials.server}"
    try:
        saved = load_hook_settings()
    except SignoffError as exc:
        return f"warning: {exc.message}; the hook will deny every call until it is fixed"
    if saved is not None:
        return f"the hook files requests with {saved.server} (saved in {hook_settings_file()})"
    if os.environ.get("SIGNOFF_DB"):
        return (
            "the hook files requests in the database SIGNOFF_DB names in the agent's "
            "environment; give --db to write this one into the hook"
        )
    return f"the hook files requests in the local database {default_db_url()}"


def _settings_file(agent: AgentName, scope: Scope) -> Path:
    codex_home = os.environ.get("CODEX_HOME")
    return settings_file(
        agent,
        scope,
        cwd=Path.cwd(),
        home=Path.home(),
        codex_home=Path(codex_home) if codex_home else None,
    )


def _user_codex_config_off(scope: Scope) -> list[str]:
    """A project install of Codex is off too when the user's config.toml turns hooks off."""
    if scope == "user":
        return []
    return codex_hooks_off(_settings_file("codex", "user").parent / "config.toml")


def _also_elsewhere(agent: AgentName, scope: Scope) -> list[str]:
    """A warning when the other scope's file runs signoff's hook too: every call twice."""
    here = _settings_file(agent, scope)
    other = _settings_file(agent, "project" if scope == "user" else "user")
    if other.resolve() == here.resolve():  # run in the home directory: one file
        return []
    try:
        settings = read_settings(other)
    except AgentSettingsError:
        return []
    if not holds_hook(agent, settings):
        return []
    return [
        f"signoff's hook is also in {other}: {AGENT_LABELS[agent]} runs both, so every call "
        "would be asked about twice; take it out of one of them"
    ]


def _describe(spec: HookSpec) -> str:
    unit = "ms" if spec.agent == "gemini" else "s"
    timeout = spec.timeout * 1000 if spec.agent == "gemini" else spec.timeout
    return f"{AGENT_LABELS[spec.agent]} waits {timeout} {unit} for it"


def install_hook(
    agent: Annotated[
        str,
        typer.Argument(
            metavar="AGENT",
            help="The agent: claude-code, codex, gemini or cursor.",
            show_default=False,
        ),
    ],
    user: Annotated[
        bool,
        typer.Option(
            "--user/--project",
            help="The user's settings in the home directory, or the project's in the current "
            "directory.",
        ),
    ] = False,
    print_only: Annotated[
        bool,
        typer.Option("--print", help="Print the settings to add and the file, and write nothing."),
    ] = False,
    timeout: Annotated[
        int,
        typer.Option(
            help=f"Seconds the agent lets the hook run ({MIN_TIMEOUT} to {MAX_TIMEOUT}); signoff "
            f"stops waiting for a person {WAIT_MARGIN} s (a twentieth, past 200 s) before that and "
            "denies.",
        ),
    ] = DEFAULT_HOOK_TIMEOUT,
    server: ServerOption = None,
    token: TokenOption = None,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="A database URL for the hook to use instead of the default one (no server).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Install signoff as AGENT's hook: writes, edits, shell and MCP calls wait for a person.

    Keeps the rest of the agent's settings file, and the previous file as *.signoff-backup.
    Run it again to update signoff's entry; the server and token go to signoff's own file.
    """
    name = _agent(agent)
    if not MIN_TIMEOUT <= timeout <= MAX_TIMEOUT:
        fail(f"--timeout must be {MIN_TIMEOUT} to {MAX_TIMEOUT} seconds, not {timeout}")
    scope: Scope = "user" if user else "project"
    credentials = _credentials(server, token, db)
    path = _settings_file(name, scope)
    spec = hook_spec(name, executable=_signoff_executable(), timeout=timeout, db=db)
    if print_only:
        err_console.print(f"add this to {path}:", markup=False, soft_wrap=True)
        sys.stdout.write(json.dumps(snippet(spec), indent=2, ensure_ascii=False) + "\n")
        if credentials is not None:
            err_console.print(
                f"(without --print, the server and token go to {hook_settings_file()})",
                markup=False,
                soft_wrap=True,
            )
        return
    try:
        current = read_settings(path)  # refuse a broken file before saving anything
        if credentials is not None:
            saved_to = save_hook_settings(credentials)
        done = install(spec, path)
    except AgentSettingsError as exc:
        fail(exc.message)
    except OSError as exc:
        fail(f"cannot save the server and token: {exc.strerror}")
    state = "installed in" if done.changed else "already in"
    console.print(f"signoff's hook {state} {path}; {_describe(spec)}", markup=False, soft_wrap=True)
    if done.backup is not None:
        console.print(f"previous file kept as {done.backup}", markup=False, soft_wrap=True)
    if credentials is not None:
        console.print(
            f"server and token saved in {saved_to} (readable by you only)",
            markup=False,
            soft_wrap=True,
        )
    console.print(_where_requests_go(credentials, db), markup=False, soft_wrap=True)
    warnings = [*warnings_for(name, current or {}, path), *_also_elsewhere(name, scope)]
    if name == "codex":
        warnings += _user_codex_config_off(scope)
    for warning in warnings:
        err_console.print(f"warning: {warning}", markup=False, soft_wrap=True)
    if done.changed:
        for note in notes_for(name, scope):
            err_console.print(f"note: {note}", markup=False, soft_wrap=True)
