"""``signoff serve --db-pool N``: the most PostgreSQL connections a server opens for requests.

Several servers on one database share what it can run at once: each is given its part
(docs/deployment.md). Anything but PostgreSQL has no pool, and the option is refused there
before anything is created.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from signoff.config import open_store
from signoff.errors import InvalidRequest
from tests.conftest import pg_fetchval
from tests.serving import agent_token, bearer, free_port, start_server

pytest.importorskip("asyncpg", reason="needs the postgres extra")


async def connections(url: str) -> int:
    """How many connections the servers' stores hold to the database ``url`` names."""
    count = await pg_fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'signoff'",
        url,
        url.rsplit("/", 1)[1],
    )
    assert isinstance(count, int)
    return count


@pytest.mark.parametrize(("pool", "most"), [("2", 2), (None, 10)])
async def test_a_servers_pool_holds_at_most_db_pool_connections(
    pg_database: str, tmp_path: Path, pool: str | None, most: int
) -> None:
    """Forty submits at once on a server with --db-pool 2 are all answered over at most two
    connections; without it the pool grows past two (up to its default of ten)."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    extra = ("--db-pool", pool) if pool is not None else ()
    server = start_server(pg_database, free_port(), env, *extra)
    try:
        agent = agent_token(server)
        async with httpx.AsyncClient(base_url=server.base, headers=bearer(agent)) as client:

            async def submit(n: int) -> int:
                body = {"session_id": f"s{n}", "tool_name": "shell", "tool_args": {"n": n}}
                return (await client.post("/api/v1/requests", json=body, timeout=30)).status_code

            codes = await asyncio.gather(*(submit(n) for n in range(40)))
        assert codes == [201] * 40
        held = await connections(pg_database)
        assert 1 <= held <= most
        if pool is None:
            assert held > 2  # the cap above is the option's doing
    finally:
        server.stop()


def test_db_pool_is_refused_for_sqlite_before_anything_is_made(tmp_path: Path) -> None:
    """A SQLite file has no pool: one error line, exit 3, and no file created; 0 is out of
    range (a usage error: exit 64)."""
    db = tmp_path / "serve.db"
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    run = [sys.executable, "-m", "signoff", "serve", "--port", str(free_port())]
    refused = subprocess.run(
        [*run, "--db", f"sqlite:///{db}", "--db-pool", "4"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert refused.returncode == 3, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "error: --db-pool applies to a PostgreSQL database only (--db postgresql://...)"
    ]
    assert not db.exists() and not (tmp_path / "serve.db.secret").exists()
    zero = subprocess.run(
        [*run, "--db", "postgresql://127.0.0.1/none", "--db-pool", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert zero.returncode == 64 and "--db-pool" in zero.stderr


def test_open_store_takes_a_pool_for_postgresql_only(tmp_path: Path) -> None:
    """The same rule where a store is opened from a URL in Python."""
    from signoff.store.postgres import PostgresStore

    store = open_store("postgresql://127.0.0.1/x", pool=3)
    assert isinstance(store, PostgresStore) and store._max_size == 3
    with pytest.raises(InvalidRequest, match="PostgreSQL database only"):
        open_store(f"sqlite:///{tmp_path / 'x.db'}", pool=3)
    with pytest.raises(InvalidRequest, match="at least 1"):
        open_store("postgresql://127.0.0.1/x", pool=0)
