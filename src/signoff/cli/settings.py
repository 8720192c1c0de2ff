"""Where ``signoff serve`` listens and the address its links use, from flags or environment.

``--host``, ``--port`` and ``--public-url`` win; without them ``SIGNOFF_HOST``,
``SIGNOFF_PORT`` and ``SIGNOFF_PUBLIC_URL`` (an empty variable counts as unset), then the
defaults. A bad value is one ``error:`` line naming where it came from, and exit 3, as any
other bad value ``signoff serve`` is given.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from signoff.cli.context import fail

__all__ = [
    "ENV_HOST",
    "ENV_PORT",
    "ENV_PUBLIC_URL",
    "Listen",
    "checked_public_url",
    "listen_settings",
]

ENV_HOST = "SIGNOFF_HOST"
ENV_PORT = "SIGNOFF_PORT"
ENV_PUBLIC_URL = "SIGNOFF_PUBLIC_URL"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


@dataclass(frozen=True)
class Listen:
    """The interface and port to listen on, and the address every link points at."""

    host: str
    port: int
    page_base: str
    """``--public-url`` (no trailing slash), else :attr:`address`."""

    @property
    def address(self) -> str:
        """``http://HOST:PORT``, where the server listens."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def _given(flag: str | None, option: str, env: str) -> tuple[str | None, str]:
    """The flag's value, else the environment's (None for neither); and where it came from."""
    if flag is not None:
        return flag, option
    return os.environ.get(env) or None, env


def _host(raw: str | None, source: str) -> str:
    if raw is None:
        return DEFAULT_HOST
    host = raw.strip()
    if not host or any(c.isspace() or not c.isprintable() or c in "/[]" for c in host):
        fail(f"{source} must be an interface's name or address (e.g. 0.0.0.0), not {raw!r}")
    return host


def _port(raw: str | None, source: str) -> int:
    if raw is None:
        return DEFAULT_PORT
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 65535:
        fail(f"{source} must be a port number from 1 to 65535, not {raw!r}")
    return int(text)


def checked_public_url(raw: str, source: str) -> str:
    """``raw`` as an http(s) address without credentials, query or fragment, or one error."""
    parts = urlsplit(raw.strip())
    try:
        parts.port  # noqa: B018 (it raises on a port that is not a number)
    except ValueError:
        parts = parts._replace(scheme="")
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None
        or parts.query
        or parts.fragment
        or not raw.isprintable()
    ):
        fail(
            f"{source} must be an http(s) URL without credentials, query or fragment "
            f"(e.g. https://signoff.example.com), not {raw!r}"
        )
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def listen_settings(host: str | None, port: int | None, public_url: str | None) -> Listen:
    """The settings from the flags given (None: not given) and the environment."""
    listen_host = _host(*_given(host, "--host", ENV_HOST))
    listen_port = port if port is not None else _port(*_given(None, "--port", ENV_PORT))
    listen = Listen(host=listen_host, port=listen_port, page_base="")
    raw_url, source = _given(public_url, "--public-url", ENV_PUBLIC_URL)
    base = checked_public_url(raw_url, source) if raw_url is not None else listen.address
    return dataclasses.replace(listen, page_base=base)
