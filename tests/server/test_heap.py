"""What ``signoff serve`` does to its heap once started (server/heap.py): start-up's garbage is
collected, and what is left is frozen out of the cycle collector's full passes."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from signoff.server import heap
from signoff.server.shutdown import Shutdown, prompt_server
from tests.serving import free_port, until_listening


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    """Each test starts and ends with nothing frozen and Python's own thresholds (the test
    process's heap is shared)."""
    thresholds = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


class Node:
    """An object that can sit in a reference cycle."""

    other: Node | None = None


def test_settle_collects_start_up_garbage_before_it_freezes() -> None:
    garbage, kept = Node(), Node()
    garbage.other, kept.other = garbage, kept  # two cycles; only ``kept`` stays referenced
    gone, alive = weakref.ref(garbage), weakref.ref(kept)
    del garbage
    gc.disable()  # no automatic pass may collect it first
    try:
        heap.settle()
    finally:
        gc.enable()
    assert gone() is None  # collected, not frozen (a frozen cycle would never be)
    assert alive() is kept
    assert gc.get_freeze_count() > 0
    assert not any(o is kept for o in gc.get_objects())  # out of the collector's passes
    assert gc.get_threshold()[0] == heap.YOUNG  # young collections far fewer than 700's


def test_settle_leaves_a_young_cycle_to_the_next_young_collection() -> None:
    """At YOUNG, cyclic garbage made after settling is still collected, by a young pass."""
    heap.settle()
    node = Node()
    node.other = node
    gone = weakref.ref(node)
    del node
    held = [Node() for _ in range(heap.YOUNG + 1_000)]  # kept: a young collection is due
    assert gone() is None
    assert len(held) > heap.YOUNG


async def test_serve_settles_the_heap_once_started() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        return None

    config = uvicorn.Config(app, port=free_port(), log_level="warning", lifespan="off")
    server = prompt_server(config, Shutdown(), drain=0.1)
    assert gc.get_freeze_count() == 0
    task = asyncio.create_task(server.serve())
    try:
        await until_listening(server)
        # every module this process imported, the app and the server are frozen
        assert gc.get_freeze_count() > 10_000
        assert not any(o is server for o in gc.get_objects())
        assert gc.get_threshold()[0] == heap.YOUNG
    finally:
        server.should_exit = True
        await task
