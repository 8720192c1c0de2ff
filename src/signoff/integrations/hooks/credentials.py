"""Where a hook finds its signoff server: a file of signoff's own, never the agent's settings.

An agent's project settings file (``.claude/settings.json``, ``.gemini/settings.json``...)
is often committed, so the token a hook needs lives in ``$XDG_CONFIG_HOME/signoff/hook.json``
(0600), written by ``signoff hook install --server URL --token T``.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from signoff.errors import InvalidRequest

__all__ = ["HookSettings", "hook_settings_file", "load_hook_settings", "save_hook_settings"]


@dataclass(frozen=True)
class HookSettings:
    """The server a hook files requests with, and the agent token it presents."""

    server: str
    token: str


def hook_settings_file() -> Path:
    """``hook.json`` in the user's signoff config dir (``~/.config/signoff`` on Linux)."""
    return Path(platformdirs.user_config_dir("signoff")) / "hook.json"


def load_hook_settings(path: Path | None = None) -> HookSettings | None:
    """The saved server and token, or None when nothing is saved.

    A file that exists but cannot be read as such is an error, not "no server": a hook that
    silently fell back to another database would gate calls nobody is watching.
    """
    path = path or hook_settings_file()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InvalidRequest(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
        server, token = data["server"], data["token"]
    except (ValueError, KeyError, TypeError):
        raise InvalidRequest(f"{path} is not a signoff hook settings file") from None
    if not isinstance(server, str) or not isinstance(token, str) or not server or not token:
        raise InvalidRequest(f"{path} must hold a server URL and a token")
    return HookSettings(server=server, token=token)


def save_hook_settings(settings: HookSettings, path: Path | None = None) -> Path:
    """Write ``settings`` atomically, readable by this user only; returns the file."""
    path = path or hook_settings_file()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    body = json.dumps({"server": settings.server, "token": settings.token}, indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".hook.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(body)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
