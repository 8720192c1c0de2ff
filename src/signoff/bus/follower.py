"""Brings events written by other processes onto this process's bus.

Several processes may share one SQLite file (a server, CLI commands, an agent holding a
``Service`` in process) or one PostgreSQL database. Each publishes its own commits on its
own bus; a follower reads the shared event log for what others wrote, so ``wait`` and
``watch`` here wake up for decisions made elsewhere. A :class:`~signoff.service.Service`
on a shared store starts one itself (:func:`signoff.config.follower_for` chooses it).
"""

from __future__ import annotations

import asyncio
import contextlib

from signoff.bus.local import EventBus
from signoff.store.base import Store

__all__ = ["PAGE", "EventLogFollower"]

PAGE = 500
"""Events read from the log at a time."""


class EventLogFollower:
    """Tails the store's event log and publishes events this process did not write."""

    def __init__(self, store: Store, bus: EventBus, *, interval: float = 0.2) -> None:
        self._store = store
        self._bus = bus
        self._interval = interval
        self._cursor = 0
        self._task: asyncio.Task[None] | None = None

    async def start(self, after_seq: int | None = None) -> None:
        """Publish events after ``after_seq`` (default: the current end of the log), then follow."""
        self._cursor = await self._store.last_event_seq() if after_seq is None else after_seq
        self._task = asyncio.create_task(self._run(), name="signoff-event-follower")

    async def stop(self) -> None:
        """Stop following."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def poll_once(self) -> int:
        """Publish what arrived since the last poll; how many events were new here.

        It reads pages of :data:`PAGE` events, after those this process published, until one
        is short: a short page is the end of the log as of that read, so it does not ask
        again (a second, empty read per poll would double the queries a server makes
        following the others). What is committed after that read, the next poll reaches:
        the PostgreSQL follower is woken by its NOTIFY, others poll every ``interval``.
        """
        published = 0
        while True:
            # what this process published already (its own commits, as they were made) is
            # not read back: the log's seqs have no gaps, so those are exactly the events a
            # read would bring and drop
            while self._bus.already_published(self._cursor + 1):
                self._cursor += 1
            events = await self._store.list_events(after_seq=self._cursor, limit=PAGE)
            if not events:
                return published
            self._cursor = events[-1].seq
            foreign = [e for e in events if not self._bus.already_published(e.seq)]
            await self._bus.publish(foreign)
            published += len(foreign)
            if len(events) < PAGE:
                return published

    async def _run(self) -> None:
        while True:
            await self.poll_once()
            await asyncio.sleep(self._interval)
