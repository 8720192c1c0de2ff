"""Periodic audit anchors: the chain head, written where a rewrite of the database cannot reach.

Without an anchor, someone with write access to the database can rewrite the audit log and
re-hash every entry after the change; ``signoff audit verify`` cannot tell. An anchor
(``SEQ:HASH``) kept anywhere else (a log collector, a ticket, a printout) pins the log as
it was: ``signoff audit verify --anchor SEQ:HASH`` fails once that entry is gone or changed.
``signoff serve --anchor-every SECONDS`` writes one with :func:`log_anchors`.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import TextIO

from signoff.errors import SignoffError
from signoff.service import Service

__all__ = ["anchor_line", "log_anchors"]

logger = logging.getLogger("signoff.anchoring")


async def anchor_line(service: Service) -> str:
    """One log line with the anchor of the log as it is now, or why there is none."""
    at = service.clock().isoformat()
    try:
        anchor = await service.audit_anchor()
    except SignoffError as exc:
        return f"signoff: audit anchor unavailable at {at}: {exc.message}"
    return f"signoff: audit anchor {anchor} ({anchor.seq} entries) at {at}"


async def log_anchors(service: Service, every: float, out: TextIO | None = None) -> None:
    """Write :func:`anchor_line` to ``out`` (stderr) now and every ``every`` seconds, until
    cancelled; a store outage is logged and tried again at the next tick."""
    while True:
        line = await anchor_line(service)
        try:
            print(line, file=out or sys.stderr, flush=True)
        except OSError as exc:  # a closed stderr must not stop the server
            logger.warning("cannot write the audit anchor: %s", exc)
        await asyncio.sleep(every)
