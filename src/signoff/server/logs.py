"""The server's log lines and how they are written: JSON or readable text, on stderr.

Every line is a record on a ``signoff.*`` logger (``signoff.http`` for each HTTP request,
``signoff.requests`` for each state change, ``signoff.webhooks``, ``signoff.notify``,
``signoff.server`` for start and stop) whose data travels in ``extra=fields(...)``, never
formatted into the message: the JSON formatter makes them keys of one object a line, the
console one ``key=value`` pairs after the message, quoted when they hold anything but plain
characters, so text an agent wrote cannot forge a line. What goes in a line is decided
where it is made (server/observe.py): never a token, a cookie, an Authorization header or
a query string, and argument values only with ``--log-args``.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any, Literal, TextIO, TypeAlias

__all__ = [
    "FORMATS",
    "LEVELS",
    "ConsoleFormatter",
    "JsonFormatter",
    "LogFormat",
    "configure_logging",
    "fields",
    "plain",
]

LogFormat: TypeAlias = Literal["console", "json"]
LEVELS = ("debug", "info", "warning", "error")
FORMATS: tuple[LogFormat, ...] = ("console", "json")

_FIELDS = "signoff_fields"
_PLAIN = re.compile(r"[A-Za-z0-9_.:/@+\-,\[\]]+")
_IN_MESSAGE = ("method", "path", "status")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def fields(**values: Any) -> dict[str, Any]:
    """``extra=`` for a log call: the line's data (None values are left out)."""
    return {_FIELDS: {k: v for k, v in values.items() if v is not None}}


def _data(record: logging.LogRecord) -> dict[str, Any]:
    found = getattr(record, _FIELDS, None)
    return found if isinstance(found, dict) else {}


def _when(record: logging.LogRecord) -> str:
    at = datetime.fromtimestamp(record.created, UTC)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, then the line's fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _when(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in _data(record).items():
            line.setdefault(key, value)
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def _visible(text: str) -> str:
    """``text`` with control characters (newlines included) shown as escapes."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def plain(value: Any) -> str:
    """A field's value as a console token: plain text bare, anything else as JSON."""
    if isinstance(value, str) and _PLAIN.fullmatch(value):
        return value
    return _visible(json.dumps(value, ensure_ascii=False, default=str))


class ConsoleFormatter(logging.Formatter):
    """``TIME LOGGER LEVEL message key=value ...``: for a person reading a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        # an HTTP line's message is already "METHOD PATH STATUS"
        shown = _IN_MESSAGE if record.name == "signoff.http" else ()
        parts = [
            _when(record),
            record.name,
            record.levelname,
            _visible(record.getMessage()),
            *(f"{key}={plain(value)}" for key, value in _data(record).items() if key not in shown),
        ]
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logging(level: str, fmt: LogFormat, stream: TextIO | None = None) -> None:
    """Write signoff's and uvicorn's log lines to ``stream`` (stderr) at ``level``.

    uvicorn's access log is off (``signoff.http`` replaces it); its other lines go through
    the same formatter, at WARNING or above unless ``level`` is debug.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else ConsoleFormatter())
    numeric = logging.getLevelName(level.upper())
    for name, at in (("signoff", numeric), ("uvicorn", max(numeric, logging.WARNING))):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.setLevel(logging.DEBUG if numeric == logging.DEBUG else at)
        logger.propagate = False
    for name in ("uvicorn.error", "uvicorn.asgi"):
        logging.getLogger(name).handlers = []
        logging.getLogger(name).propagate = True
    access = logging.getLogger("uvicorn.access")
    access.handlers = []
    access.propagate = False
    access.disabled = True
    # signoff.notify had its own handler before: one handler for every line now
    notify = logging.getLogger("signoff.notify")
    notify.handlers = []
    notify.propagate = True
    notify.setLevel(logging.NOTSET)


def log_start(address: str, db_url: str, version: str) -> None:
    """The server's first line: where it listens, its store's kind (never the database
    URL, which may hold a password) and its version."""
    kind = db_url.partition(":")[0].removesuffix("ql").replace("postgres", "postgresql")
    logging.getLogger("signoff.server").info(
        "signoff started", extra=fields(address=address, store=kind, version=version)
    )
