"""What time it is: the one place signoff asks, so tests can move time by hand."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["Clock", "system_clock"]

Clock = Callable[[], datetime]
"""A zero-argument callable returning an aware UTC datetime."""


def system_clock() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)
