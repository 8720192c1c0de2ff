"""A background loop stopped in the same turn of the event loop as something wakes it stops.

Python 3.11's ``asyncio.wait_for`` returns the inner wait's result when the outer task is
cancelled just as that wait completes, so a loop waiting for its wake-up event with a
timeout swallowed the stop's cancel and ran on: ``stop()`` awaited it for ever. Seen as a
PostgreSQL service's ``close()`` hanging in about half the runs, its last commit's NOTIFY
waking the follower as it was stopped (``tests/store/test_postgres_follower.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from signoff.notify.dispatcher import NotifyDispatcher
from signoff.service import Service
from signoff.webhooks import WebhookDispatcher


async def test_the_webhook_dispatcher_stops_when_woken_as_it_stops(service: Service) -> None:
    running = WebhookDispatcher(service, base_url="http://signoff.example", poll=30)
    await running.start()
    await asyncio.sleep(0.1)  # both loops wait: one for events, one for its wake-up
    running._wake.set()  # an event queued a delivery, in the same turn as the stop
    await stops(running.stop, running._tasks)


async def test_the_notify_dispatcher_stops_when_woken_as_it_stops(service: Service) -> None:
    running = NotifyDispatcher(service, [], poll=30)
    await running.start()
    await asyncio.sleep(0.1)
    running._wake.set()  # a notice was queued, in the same turn as the stop
    await stops(running.stop, running._tasks)


async def stops(stop: Callable[[], Awaitable[None]], tasks: list[asyncio.Task[None]]) -> None:
    """Fail unless ``stop()`` returns within 5 s (a hung loop is then cancelled again)."""
    tasks = list(tasks)
    stopping = asyncio.ensure_future(stop())
    await asyncio.wait({stopping}, timeout=5)
    if not stopping.done():
        for task in tasks:  # a second cancel reaches the loop, which waits again
            task.cancel()
        await asyncio.wait({stopping}, timeout=5)
        raise AssertionError("stop() did not return: its loop ran on, woken as it was cancelled")
    await stopping
