"""Keeping claims alive: renew their leases while the calls they cover run.

A claim holds for its lease (``DEFAULT_LEASE`` seconds unless asked otherwise); a call
that is neither reported nor renewed by then is failed by the server and never run again.
Whatever runs a claimed call that may take longer wraps it in :func:`holding`, which
renews every third of the lease until the call is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence

from signoff.backends import Backend
from signoff.domain.transitions import DEFAULT_LEASE
from signoff.errors import InvalidTransition, RequestNotFound, SignoffError

__all__ = ["holding"]

logger = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def holding(
    backend: Backend, request_ids: Sequence[str], *, lease: float = DEFAULT_LEASE
) -> AsyncIterator[None]:
    """Renew the leases of ``request_ids`` (claimed through ``backend``) while the block runs.

    A renewal the server refuses because the call is over or its lease ended stops renewing
    that call; any other failure (a server restarting) is logged and tried again later.
    """
    if not request_ids:
        yield
        return
    renewing = [
        asyncio.create_task(_renew(backend, rid, lease), name=f"signoff-lease-{rid}")
        for rid in dict.fromkeys(request_ids)
    ]
    try:
        yield
    finally:
        for task in renewing:
            task.cancel()
        await asyncio.gather(*renewing, return_exceptions=True)


async def _renew(backend: Backend, request_id: str, lease: float) -> None:
    while True:
        await asyncio.sleep(lease / 3)
        try:
            await backend.renew(request_id, lease=lease)
        except (InvalidTransition, RequestNotFound) as exc:
            # the call is over, or its lease ended and the server failed it
            logger.warning("signoff: lease of %s: %s", request_id, exc.message)
            return
        except SignoffError as exc:
            logger.warning("signoff: lease of %s not renewed yet: %s", request_id, exc.message)
