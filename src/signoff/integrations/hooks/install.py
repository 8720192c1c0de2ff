"""``signoff hook install``: signoff's hook merged into a coding agent's own settings file.

The facts relied on, as each agent documents them (November 2026; the hook contracts
themselves are in :mod:`.contracts`):

- **Claude Code** reads ``.claude/settings.json`` (project) and ``~/.claude/settings.json``
  (user): ``{"hooks": {"PreToolUse": [{"matcher": ..., "hooks": [{"type": "command",
  "command": ..., "timeout": seconds}]}]}}``, default timeout 600 s. A matcher holding
  anything but letters, digits, ``_`` and ``|`` is an unanchored JavaScript regex; MCP tools
  are ``mcp__<server>__<tool>``. A hook that times out or cannot start lets the call run
  unless the handler says ``"onFailure": "block"`` (2.1.295+). ``"disableAllHooks": true``
  turns every hook off. (code.claude.com/docs/en/hooks)
- **Codex CLI** reads ``hooks.json`` beside each config layer: ``<repo>/.codex/hooks.json``
  and ``$CODEX_HOME/hooks.json`` (``~/.codex``), in Claude Code's shape (``timeout`` in
  seconds, default 600; ``statusMessage``). Hooks are on by default since 0.124, so no
  feature flag is set: ``[features] hooks = false`` (or the deprecated ``codex_hooks``) in
  ``config.toml`` turns them off, and install warns about it instead of editing that file.
  A new or changed hook runs only once the person trusts it in ``/hooks``; a project's
  ``.codex/`` layer loads only in a trusted project. ``PreToolUse`` sees ``Bash``,
  ``apply_patch`` (file edits, also matched as ``Edit``/``Write``) and MCP tools
  ``mcp__<server>__<tool>``. (developers.openai.com/codex/hooks; codex-rs
  ``hooks/src/engine/discovery.rs``, ``core/src/tools/hook_names.rs``)
- **Gemini CLI** reads ``hooks`` in ``.gemini/settings.json`` / ``~/.gemini/settings.json``:
  ``{"BeforeTool": [{"matcher": regex, "hooks": [{"name", "type": "command", "command",
  "timeout": milliseconds}]}]}``, default 60 000 ms; a hook it kills on timeout lets the
  tool run. The matcher is an unanchored JavaScript regex. Tools that change things are
  ``write_file``, ``replace`` and ``run_shell_command``; MCP tools are ``mcp_<server>_<tool>``.
  ``hooksConfig.enabled`` (default true) and ``hooksConfig.disabled`` (names) switch hooks
  off; project hooks run only in a trusted folder. (geminicli.com/docs/hooks/reference;
  observed with 0.61.0)
- **Cursor** reads ``.cursor/hooks.json`` / ``~/.cursor/hooks.json``: ``{"version": 1,
  "hooks": {"beforeShellExecution": [{"command", "timeout": seconds, "failClosed": bool}],
  "beforeMCPExecution": [...], "preToolUse": [{"matcher", ...}]}}``, flat handlers with no
  groups and no documented default timeout. A hook that crashes or times out lets the
  action through unless ``failClosed`` is true. ``preToolUse`` fires for every tool
  (``Shell``, ``Read``, ``Write``, ``Grep``, ``Delete``, ``Task``, ``MCP:<tool>``). Project
  hooks run only in a trusted workspace. (cursor.com/docs/agent/hooks)

Every agent runs the command through a shell and treats exit 2 as "block" but most other
failures as a warning that lets the tool run. So the command ends in ``|| exit 2``: when the
``signoff`` executable is missing (a teammate's checkout of a committed project file, a
removed virtualenv), the shell's 127 becomes a block, with "not found" as the reason.

The pure part (:func:`settings_file`, :func:`hook_command`, :func:`merge`, :func:`snippet`)
takes parsed settings and returns the merged settings; :func:`install` does the file IO:
atomic replace, a backup of the previous file, and nothing written when the file is not
JSON or its hooks are not the documented shape (:class:`~signoff.errors.AgentSettingsError`).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Literal, TypeAlias

from pydantic import JsonValue

from signoff.errors import AgentSettingsError
from signoff.integrations.hooks.contracts import AgentName

__all__ = [
    "BACKUP_SUFFIX",
    "DEFAULT_HOOK_TIMEOUT",
    "WAIT_MARGIN",
    "HookSpec",
    "Installed",
    "Scope",
    "codex_hooks_off",
    "holds_hook",
    "hook_command",
    "hook_spec",
    "install",
    "merge",
    "notes_for",
    "read_settings",
    "settings_file",
    "snippet",
    "wait_for",
    "warnings_for",
]

Scope: TypeAlias = Literal["project", "user"]
"""Where the hook goes: the current directory's project settings, or the user's."""

DEFAULT_HOOK_TIMEOUT = 600
"""The hook timeout install asks each agent for, in seconds: time for a person to decide."""

WAIT_MARGIN = 10
"""The fewest seconds between signoff giving up on a person and the agent giving up on the
hook, so the hook answers (deny, request canceled) instead of being killed mid-wait."""


def wait_for(timeout: int) -> int:
    """How long the hook waits for a person when the agent allows it ``timeout`` seconds:
    ``WAIT_MARGIN`` less, or a twentieth less for long timeouts (30 s of 600), since a loaded
    machine can take seconds to start the hook and answer; an agent that kills its hook lets
    the call run (Gemini, Cursor without failClosed, Claude Code before onFailure)."""
    return timeout - max(WAIT_MARGIN, timeout // 20)


BACKUP_SUFFIX = ".signoff-backup"
"""Appended to a settings file's name for the copy kept before install changes it."""

Settings: TypeAlias = dict[str, JsonValue]


@dataclass(frozen=True, kw_only=True)
class _Layout:
    """Where and how one agent keeps its hooks."""

    folder: str
    """The agent's folder in a project and in the home directory, e.g. ``.claude``."""
    file: str
    events: dict[str, tuple[str | None, ...]]
    """Each event signoff's hook is installed for, with one entry per matcher (None: every
    call of that event)."""
    grouped: bool
    """Handlers sit in ``{"matcher", "hooks": [...]}`` groups; else each handler is flat."""
    milliseconds: bool = False
    """The ``timeout`` field counts milliseconds, not seconds."""
    before: dict[str, JsonValue] = field(default_factory=dict)
    """Fields of signoff's handler written before ``command`` and ``timeout``."""
    after: dict[str, JsonValue] = field(default_factory=dict)
    """Fields of signoff's handler written after them."""


_LAYOUTS: dict[AgentName, _Layout] = {
    "claude-code": _Layout(
        folder=".claude",
        file="settings.json",
        # anchored: unanchored, "Write" would also gate TodoWrite
        events={"PreToolUse": ("^(Bash|Write|Edit|MultiEdit|NotebookEdit|mcp__.*)$",)},
        grouped=True,
        before={"type": "command"},
        # without it a hook that times out or cannot start lets the call run (2.1.295+;
        # earlier versions ignore the key)
        after={"onFailure": "block"},
    ),
    "codex": _Layout(
        folder=".codex",
        file="hooks.json",
        events={"PreToolUse": ("^(Bash|apply_patch|Edit|Write|mcp__.*)$",)},
        grouped=True,
        before={"type": "command"},
        after={"statusMessage": "Waiting for sign-off"},
    ),
    "gemini": _Layout(
        folder=".gemini",
        file="settings.json",
        events={"BeforeTool": ("^(write_file|replace|run_shell_command|mcp_.*)$",)},
        grouped=True,
        milliseconds=True,
        before={"name": "signoff", "type": "command"},
        after={"description": "Waits for a person's sign-off; blocks the call on any failure."},
    ),
    "cursor": _Layout(
        folder=".cursor",
        file="hooks.json",
        # shell commands and MCP tools through their own events; preToolUse only for file
        # changes, so that no call is asked about twice. One plain tool name per entry: it
        # matches whether Cursor reads a matcher as a regex or as an exact name
        events={
            "beforeShellExecution": (None,),
            "beforeMCPExecution": (None,),
            "preToolUse": ("Write", "Edit", "StrReplace", "Delete"),
        },
        grouped=False,
        after={"failClosed": True},
    ),
}


@dataclass(frozen=True, kw_only=True)
class HookSpec:
    """signoff's hook for one agent: the command it runs and how long the agent waits."""

    agent: AgentName
    command: str
    """The shell command line, e.g. ``'/venv/bin/signoff' hook gemini --timeout 590 || exit 2``."""
    timeout: int
    """Seconds the agent lets the hook run (written in the agent's own unit)."""


@dataclass(frozen=True, kw_only=True)
class Installed:
    """What :func:`install` did."""

    path: Path
    """The settings file written (or already up to date)."""
    changed: bool
    """False when the file already held exactly this hook: nothing was written."""
    backup: Path | None
    """The copy of the previous file, when there was one and it changed."""


# -- pure: where, what, merged ---------------------------------------------------------------


def settings_file(
    agent: AgentName, scope: Scope, *, cwd: Path, home: Path, codex_home: Path | None = None
) -> Path:
    """The agent's settings file that holds hooks, for the project in ``cwd`` or the user.

    ``codex_home`` is ``$CODEX_HOME`` when set: Codex keeps its user files there instead of
    ``~/.codex``.
    """
    layout = _LAYOUTS[agent]
    if scope == "project":
        return cwd / layout.folder / layout.file
    if agent == "codex" and codex_home is not None:
        return codex_home / layout.file
    return home / layout.folder / layout.file


def hook_command(agent: AgentName, *, executable: str, wait: int, db: str | None = None) -> str:
    """The shell command an agent runs: ``signoff hook AGENT --timeout WAIT || exit 2``.

    ``|| exit 2`` turns "signoff not found" (exit 127, a mere warning to every agent) into
    a block; signoff's own exits (0 decided, 2 failed) pass through unchanged.
    """
    argv = [executable, "hook", agent, "--timeout", str(wait)]
    if db is not None:
        argv += ["--db", db]
    return " ".join(shlex.quote(part) for part in argv) + " || exit 2"


def hook_spec(
    agent: AgentName,
    *,
    executable: str,
    timeout: int = DEFAULT_HOOK_TIMEOUT,
    db: str | None = None,
) -> HookSpec:
    """The hook for ``agent``: the agent waits ``timeout`` s, signoff ``WAIT_MARGIN`` less."""
    if timeout <= WAIT_MARGIN:
        raise ValueError(f"timeout must be more than {WAIT_MARGIN} seconds")
    command = hook_command(agent, executable=executable, wait=wait_for(timeout), db=db)
    return HookSpec(agent=agent, command=command, timeout=timeout)


def _is_ours(agent: AgentName, handler: dict[str, JsonValue]) -> bool:
    """A handler that runs ``signoff hook AGENT``, wherever that signoff is installed."""
    command = handler.get("command")
    if not isinstance(command, str):
        return False
    try:
        argv = shlex.split(command)
    except ValueError:  # someone else's command with unbalanced quotes
        return False
    return (
        len(argv) >= 3
        and PurePath(argv[0]).name in ("signoff", "signoff.exe")
        and argv[1:3] == ["hook", agent]
    )


def _handler(spec: HookSpec, matcher: str | None) -> dict[str, JsonValue]:
    layout = _LAYOUTS[spec.agent]
    timeout = spec.timeout * 1000 if layout.milliseconds else spec.timeout
    head: dict[str, JsonValue] = dict(layout.before)
    if not layout.grouped and matcher is not None:  # Cursor: the matcher is the handler's
        head["matcher"] = matcher
    return {**head, "command": spec.command, "timeout": timeout, **layout.after}


def _entry(spec: HookSpec, matcher: str | None) -> dict[str, JsonValue]:
    """What is appended to an event's list: a group (matcher + handlers) or a flat handler."""
    handler = _handler(spec, matcher)
    if not _LAYOUTS[spec.agent].grouped:
        return handler
    group: dict[str, JsonValue] = {}
    if matcher is not None:
        group["matcher"] = matcher
    group["hooks"] = [handler]
    return group


def _kind(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else "null")


def _handlers_of(entry: object, where: str) -> list[dict[str, JsonValue]]:
    """The handlers of one group, checked to be objects."""
    if not isinstance(entry, dict):
        raise AgentSettingsError(f"{where} is {_kind(entry)}, not an object")
    handlers = entry.get("hooks")
    if not isinstance(handlers, list):
        raise AgentSettingsError(f'{where} has no "hooks" list')
    checked: list[dict[str, JsonValue]] = []
    for j, handler in enumerate(handlers):
        if not isinstance(handler, dict):
            raise AgentSettingsError(f"{where}.hooks[{j}] is {_kind(handler)}, not an object")
        checked.append(handler)
    return checked


def _without_ours(agent: AgentName, entries: list[JsonValue], where: str) -> list[JsonValue]:
    """``entries`` with signoff's handlers for ``agent`` taken out; others' left in order.

    A group left empty by that is dropped; a group that also holds others' handlers stays
    with just theirs.
    """
    kept: list[JsonValue] = []
    for i, entry in enumerate(entries):
        if not _LAYOUTS[agent].grouped:
            if not isinstance(entry, dict):
                raise AgentSettingsError(f"{where}[{i}] is {_kind(entry)}, not an object")
            if not _is_ours(agent, entry):
                kept.append(entry)
            continue
        handlers = _handlers_of(entry, f"{where}[{i}]")
        theirs = [h for h in handlers if not _is_ours(agent, h)]
        if len(theirs) == len(handlers):
            kept.append(entry)
        elif theirs:
            assert isinstance(entry, dict)
            kept.append({**entry, "hooks": list(theirs)})
    return kept


def merge(spec: HookSpec, settings: object, *, name: str = "the settings") -> Settings:
    """``settings`` with signoff's hook in place: others' hooks and every other key kept.

    An earlier signoff hook for the same agent is replaced, so merging twice gives what
    merging once gives. ``name`` names the file in errors. Raises
    :class:`~signoff.errors.AgentSettingsError` when ``settings`` is not an object or its
    ``hooks`` are not that agent's documented shape.
    """
    if not isinstance(settings, dict):
        raise AgentSettingsError(f"{name} holds {_kind(settings)}, not a JSON object")
    merged: Settings = dict(settings)
    if spec.agent == "cursor":
        version = merged.get("version", 1)
        if version != 1 or isinstance(version, bool):
            raise AgentSettingsError(
                f'{name} has "version": {json.dumps(version)}; signoff knows version 1'
            )
        merged = {"version": 1, **merged}
    hooks = merged.get("hooks", {})
    if not isinstance(hooks, dict):
        raise AgentSettingsError(f'"hooks" in {name} is {_kind(hooks)}, not an object')
    hooks = dict(hooks)
    for event, matchers in _LAYOUTS[spec.agent].events.items():
        entries = hooks.get(event, [])
        if not isinstance(entries, list):
            raise AgentSettingsError(f'"hooks.{event}" in {name} is {_kind(entries)}, not a list')
        kept = _without_ours(spec.agent, entries, f'"hooks.{event}" in {name}')
        hooks[event] = [*kept, *(_entry(spec, matcher) for matcher in matchers)]
    merged["hooks"] = hooks
    return merged


def holds_hook(agent: AgentName, settings: object) -> bool:
    """Whether ``settings`` already run ``signoff hook AGENT`` on one of its events."""
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    if not isinstance(hooks, dict):
        return False
    for event in _LAYOUTS[agent].events:
        entries = hooks.get(event)
        if not isinstance(entries, list):
            continue
        try:
            if _without_ours(agent, entries, event) != entries:
                return True
        except AgentSettingsError:  # a shape merge would refuse: not signoff's doing
            continue
    return False


def snippet(spec: HookSpec) -> Settings:
    """The settings to add by hand: signoff's hook alone, in the agent's file shape."""
    return merge(spec, {})


def _disabled(agent: AgentName, settings: Settings) -> str | None:
    """The setting in ``settings`` that keeps every hook from running, if any."""
    if agent == "claude-code" and settings.get("disableAllHooks") is True:
        return '"disableAllHooks": true'
    if agent == "gemini":
        section = settings.get("hooksConfig")
        if isinstance(section, dict) and section.get("enabled") is False:
            return '"hooksConfig": {"enabled": false}'
        disabled = section.get("disabled") if isinstance(section, dict) else None
        if isinstance(disabled, list) and "signoff" in disabled:
            return '"signoff" in "hooksConfig.disabled"'
    return None


def codex_hooks_off(config: Path) -> list[str]:
    """``[features] hooks = false`` (or ``codex_hooks``) in Codex's ``config.toml``."""
    try:
        features = tomllib.loads(config.read_text(encoding="utf-8")).get("features")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return [f"could not read {config} to check that it leaves hooks on"]
    if not isinstance(features, dict):
        return []
    return [
        f"{config} has [features] {key} = false: Codex runs no hook until that line goes"
        for key in ("hooks", "codex_hooks")
        if features.get(key) is False
    ]


def warnings_for(agent: AgentName, settings: Settings, path: Path) -> list[str]:
    """Settings beside the hook that keep the agent from running it (hooks switched off)."""
    off = _disabled(agent, settings)
    found = [] if off is None else [f"{path} has {off}: the agent will not run signoff's hook"]
    if agent == "codex":
        found += codex_hooks_off(path.parent / "config.toml")
    return found


def notes_for(agent: AgentName, scope: Scope) -> list[str]:
    """The steps left to the person before the agent runs a newly installed hook."""
    if agent == "codex":
        notes = [
            "Codex runs a new or changed hook only once you trust it: open /hooks in Codex "
            "and trust signoff's (Codex 0.124 or later runs hooks by default)"
        ]
        if scope == "project":
            notes.append("Codex loads a project's .codex/ hooks only in a trusted project")
        return notes
    if agent == "gemini" and scope == "project":
        return ["Gemini CLI runs a project's hooks only in a trusted folder"]
    if agent == "cursor":
        notes = ["restart Cursor to load the hook (its Hooks tab in Cursor Settings shows it)"]
        if scope == "project":
            notes.append("Cursor runs a project's hooks only in a trusted workspace")
        return notes
    return []


# -- IO: read, back up, replace atomically ---------------------------------------------------


def read_settings(path: Path) -> Settings | None:
    """The parsed settings file, None when there is none; a blank file reads as ``{}``.

    Raises :class:`~signoff.errors.AgentSettingsError` for a file that cannot be read or is
    not JSON (an agent that allows comments in it, as Gemini CLI does, is no exception:
    signoff would lose them, so it refuses and ``--print`` gives the lines to add by hand).
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AgentSettingsError(f"cannot read {path}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise AgentSettingsError(f"{path} is not UTF-8 text; it is left as it is") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AgentSettingsError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            "it is left as it is"
        ) from None
    if not isinstance(data, dict):
        raise AgentSettingsError(f"{path} holds {_kind(data)}, not a JSON object")
    return data


def _render(settings: Settings) -> str:
    return json.dumps(settings, indent=2, ensure_ascii=False) + "\n"


def _new_file_mode() -> int:
    """0o666 less this process's umask: the mode ``open()`` would give a new file."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def _replace_atomically(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` through a temporary file and a rename (same mode)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = _new_file_mode()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def install(spec: HookSpec, path: Path) -> Installed:
    """Merge signoff's hook into the settings file at ``path``, keeping a backup.

    Nothing is written when the file already holds exactly this hook, and nothing at all
    when it cannot be merged (:class:`~signoff.errors.AgentSettingsError`). A symlinked
    settings file (a dotfiles checkout) is written through the link.
    """
    target = path.resolve() if path.is_symlink() else path
    current = read_settings(target)
    merged = merge(spec, current if current is not None else {}, name=str(path))
    if current is not None and merged == current:
        return Installed(path=path, changed=False, backup=None)
    backup = None
    if current is not None:
        backup = target.with_name(target.name + BACKUP_SUFFIX)
        try:
            shutil.copy2(target, backup)
        except OSError as exc:
            raise AgentSettingsError(
                f"cannot keep a backup of {path} at {backup}: {exc.strerror}; nothing changed"
            ) from None
    try:
        _replace_atomically(target, _render(merged))
    except OSError as exc:
        raise AgentSettingsError(f"cannot write {path}: {exc.strerror}") from None
    return Installed(path=path, changed=True, backup=backup)
