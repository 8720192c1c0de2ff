"""Fixtures shared by the whole suite: a fake clock, every store backend, a service on each."""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx._transports.default
import pytest

from signoff.bus.local import LocalBus
from signoff.service import Service
from signoff.store.base import Store
from signoff.store.memory import MemoryStore
from signoff.store.sqlite import SQLiteStore
from signoff.testing import FakeClock
from tests.serving import Receiver, Server, free_port, run_receiver, start_server

pytest_plugins = ("tests.hooks.hook_people",)
"""The admin, agent and person tokens of the hook tests (module fixtures on ``server``)."""

_create_ssl_context = httpx.create_ssl_context


@functools.cache
def _default_ssl_context(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    return _create_ssl_context()


def _shared_default_ssl_context(
    verify: Any = True, cert: Any = None, trust_env: bool = True
) -> ssl.SSLContext:
    """httpx's SSL context for a client with the default settings, made once per process
    (and per CA file or directory the environment names).

    Every ``httpx.Client()`` (and every ``httpx.get``) loads the CA bundle into a new
    context, 30 ms of CPU each on the project's machine: a tenth of what the workers spend
    in the security tests, for clients that speak plain HTTP to 127.0.0.1. Any other
    settings (an own context, ``verify=False``, a certificate) get httpx's own.
    """
    if verify is True and cert is None and trust_env:
        return _default_ssl_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    return _create_ssl_context(verify=verify, cert=cert, trust_env=trust_env)


httpx._transports.default.create_ssl_context = _shared_default_ssl_context  # type: ignore[attr-defined]

BACKENDS = ["memory", "sqlite", "postgres"]

WRITER_PROCESS_SUITES = (
    "tests/store/test_store_suite.py",
    "tests/store/test_history_suite.py",
    "tests/store/test_notify_suite.py",
    "tests/test_service.py",
)
"""Where the ``store`` fixture is also ``sqlite-process``: the SQLite store with its writer in
a process of its own (each start costs about 0.3 s, so not every test that takes a store)."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each test taking a ``store`` (or a ``service`` on one) runs once per backend."""
    defs = metafunc._arg2fixturedefs.get("store")  # the one a test gets is the last
    if defs and defs[-1].baseid == "tests":  # this file's, not a module's own
        backends = list(BACKENDS)
        if str(metafunc.definition.path).endswith(WRITER_PROCESS_SUITES):
            backends.insert(2, "sqlite-process")
        metafunc.parametrize("store", backends, indirect=True)


PG_DSN = os.environ.get("SIGNOFF_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
"""The PostgreSQL the postgres backend's tests use; each test gets a schema of its own."""

_pg_problem: list[str | None] = []  # the probe's outcome, once per session


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
    if backend == "sqlite-process":
        return SQLiteStore(tmp_path / "signoff.db", writer="process")
    raise AssertionError(backend)


async def postgres_dsn() -> str:
    """:data:`PG_DSN` if it answers; else skip, or fail when ``CI=true`` (CI must test it)."""
    if not _pg_problem:
        _pg_problem.append(await _probe_postgres())
    problem = _pg_problem[0]
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    return PG_DSN


async def _probe_postgres() -> str | None:
    try:
        import asyncpg
    except ImportError:
        return "asyncpg is not installed: pip install 'signoff[postgres]'"
    try:
        connection = await asyncpg.connect(PG_DSN, timeout=5)
    except Exception as exc:
        return f"PostgreSQL at {PG_DSN} is not reachable ({exc}); set SIGNOFF_TEST_PG"
    try:
        # Where no schema holds pg_trgm, a store's migration creates it in its own schema
        # (the first on its search_path) and every other schema's search index refers to
        # it there: a test dropping its schema then dropped the extension under the other
        # workers' migrations (deadlocks, "operator class was concurrently dropped").
        # In public, no test's schema owns it.
        with contextlib.suppress(asyncpg.PostgresError):  # a worker beside us made it first
            await connection.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
    finally:
        await connection.close()
    return None


def new_schema() -> str:
    """A schema name no other test uses."""
    return f"t_{secrets.token_hex(6)}"


async def pg_execute(sql: str, dsn: str = PG_DSN) -> None:
    """Run one statement on its own connection (schemas and databases come and go so)."""
    import asyncpg

    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


async def pg_fetchval(sql: str, dsn: str, *args: object) -> object:
    """The first value of one query, on its own connection."""
    import asyncpg

    connection = await asyncpg.connect(dsn)
    try:
        return await connection.fetchval(sql, *args)
    finally:
        await connection.close()


async def drop_schema(dsn: str, schema: str) -> None:
    """Drop a test's schema and everything in it."""
    await pg_execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE", dsn)


@pytest.fixture
async def pg_database() -> AsyncIterator[str]:
    """A fresh PostgreSQL database of the test's own (servers, NOTIFY); its URL, dropped after.

    Skipped without PostgreSQL, and failed instead when ``CI=true``.
    """
    dsn, name = await postgres_dsn(), new_schema()
    await pg_execute(f"CREATE DATABASE {name}", dsn)
    try:
        yield dsn.rsplit("/", 1)[0] + f"/{name}"
    finally:
        await pg_execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", dsn)


@pytest.fixture
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """An open store, once per backend (on PostgreSQL: in a fresh schema, dropped after)."""
    schema: str | None = None
    if request.param == "postgres":
        from signoff.store.postgres import PostgresStore

        dsn, schema = await postgres_dsn(), new_schema()
        backend: Store = PostgresStore(dsn, schema=schema)
    else:
        backend = make_store(request.param, tmp_path)
    await backend.open()
    try:
        yield backend
    finally:
        await backend.close()
        if schema is not None:
            await drop_schema(PG_DSN, schema)


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
