"""Fixtures shared by the whole suite: a fake clock, every store backend, a service on each."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from signoff.bus.local import LocalBus
from signoff.service import Service
from signoff.store.base import Store
from signoff.store.memory import MemoryStore
from signoff.store.sqlite import SQLiteStore
from signoff.testing import FakeClock
from tests.serving import Receiver, Server, free_port, run_receiver, start_server

BACKENDS = ["memory", "sqlite"]


@pytest.fixture
def clock() -> FakeClock:
    """A clock that moves only when a test says so."""
    return FakeClock()


def make_store(backend: str, tmp_path: Path) -> Store:
    """A fresh, unopened store of the named backend."""
    if backend == "memory":
        return MemoryStore()
    if backend == "sqlite":
        return SQLiteStore(tmp_path / "signoff.db")
    raise AssertionError(backend)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """An open store, once per backend."""
    backend = make_store(request.param, tmp_path)
    await backend.open()
    try:
        yield backend
    finally:
        await backend.close()


@pytest.fixture
async def service(store: Store, clock: FakeClock) -> AsyncIterator[Service]:
    """A service on each backend, with the fake clock and no file previews."""
    svc = Service(store, bus=LocalBus(), clock=clock, read_file=None)
    yield svc
    await svc.stop_sweeper()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A fresh server on its own database."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200"}
    running = start_server(f"sqlite:///{tmp_path / 'serve.db'}", free_port(), env)
    yield running
    if running.process.poll() is None:
        running.stop()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A real webhook receiver on a free port."""
    async with run_receiver() as running:
        yield running
