"""The SQLite store with its writer in a process of its own: what a thread cannot do wrong.

The store suite runs on this store too (``sqlite-process``); these tests cover the process:
many callers at once, the process killed mid-load, the server ending without closing,
signals, a close with writes in flight, another event loop, and a refused file.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from signoff.config import open_store
from signoff.domain.audit import verify_chain
from signoff.errors import InvalidRequest, StoreUnavailable
from signoff.service import Service
from signoff.store.sqlite import SQLiteStore
from signoff.store.sqlite_migrations import SCHEMA_VERSION
from signoff.testing import AGENT, APPROVER
from tests.store.test_store_suite import approval, insert


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie has ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def writers_of(path: Path) -> list[int]:
    """The processes whose command line names ``path`` (a writer process names its file)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(path).encode() in cmdline and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    """An open store whose writer is a process."""
    opened = SQLiteStore(tmp_path / "signoff.db", writer="process")
    await opened.open()
    yield opened
    await opened.close()


async def test_many_callers_at_once_commit_every_write_in_order(store: SQLiteStore) -> None:
    """256 callers run lifecycles together: each ends completed, seqs have no gap, the audit
    chain verifies, and each request's events are in the order its steps happened."""
    service = Service(store, read_file=None)
    await service.open()

    async def lifecycle(n: int) -> str:
        request = (
            await service.submit({"session_id": f"s{n}", "tool_name": "t", "tool_args": {}}, AGENT)
        ).request
        await service.decide(request.id, {"type": "approve"}, APPROVER)
        await service.claim(request.id, {}, AGENT)
        await service.complete(request.id, AGENT, result="ok")
        return request.id

    try:
        ids = await asyncio.gather(*(lifecycle(n) for n in range(256)))
        stored = [await store.get_request(i) for i in ids]
        assert [r.status if r else None for r in stored] == ["completed"] * len(ids)
        events = await store.list_events(limit=10_000)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert len(events) == 4 * 256
        for request_id in ids[:20]:
            mine = [e.request.status for e in events if e.request.id == request_id]
            assert mine == ["pending", "approved", "executing", "completed"]
        audit = await store.list_audit(limit=10_000)
        assert verify_chain(audit, head=await store.audit_head()).ok
    finally:
        await service.close()


async def test_a_killed_writer_fails_what_it_held_and_loses_nothing_acknowledged(
    tmp_path: Path,
) -> None:
    """SIGKILL mid-load: writes in flight fail as maybe committed, later ones at once, reads
    go on; every write acknowledged is in the file, whose chain verifies."""
    path = tmp_path / "signoff.db"
    store = SQLiteStore(path, writer="process")
    await store.open()
    pid = store.writer_pid
    assert pid is not None
    acknowledged: list[str] = []
    failures: list[str] = []
    under_way = asyncio.Event()

    async def submitter() -> None:
        while True:
            request = approval()
            try:
                await store.commit(insert(request))
            except StoreUnavailable as exc:
                failures.append(str(exc))
                return
            acknowledged.append(request.id)
            if len(acknowledged) >= 200:
                under_way.set()

    load = [asyncio.create_task(submitter()) for _ in range(32)]
    await asyncio.wait_for(under_way.wait(), 30)
    os.kill(pid, signal.SIGKILL)
    await asyncio.wait_for(asyncio.gather(*load), 30)
    assert len(failures) == 32
    assert any("may or may not have been committed" in f for f in failures)
    with pytest.raises(StoreUnavailable, match="takes no more writes"):
        await store.commit(insert(approval()))
    assert await store.get_request(acknowledged[0]) is not None  # reads go on
    await asyncio.wait_for(store.close(), 30)
    again = SQLiteStore(path)
    await again.open()
    try:
        for request_id in acknowledged:
            assert await again.get_request(request_id) is not None, request_id
        entries = await again.list_audit(limit=100_000)
        assert verify_chain(entries, head=await again.audit_head()).ok
        assert len(entries) >= len(acknowledged)
    finally:
        await again.close()


def test_the_writer_ends_when_its_server_does_without_closing(tmp_path: Path) -> None:
    """A server that exits without closing its store (os._exit, or kill -9) leaves no writer
    behind: the writer reads the end of its socket and exits; what was acknowledged is there."""
    path = tmp_path / "signoff.db"
    script = textwrap.dedent(
        f"""
        import asyncio, os
        from signoff.store.sqlite import SQLiteStore
        from tests.store.test_store_suite import approval, insert

        async def main():
            store = SQLiteStore({str(path)!r}, writer="process")
            await store.open()
            request = approval()
            await store.commit(insert(request))
            print(store.writer_pid, request.id, flush=True)
            os._exit(0)

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).parents[2],
    )
    pid_text, request_id = done.stdout.split()
    deadline = time.monotonic() + 20
    while alive(int(pid_text)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(int(pid_text)), "the writer process outlived its server"
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM requests WHERE id = ?", (request_id,)).fetchone()
    db.close()


async def test_ctrl_c_and_sigterm_reach_the_server_not_the_writer(store: SQLiteStore) -> None:
    """The writer ignores SIGINT and SIGTERM (the server stops it once its writes are done)."""
    pid = store.writer_pid
    assert pid is not None
    os.kill(pid, signal.SIGINT)
    os.kill(pid, signal.SIGTERM)
    await asyncio.sleep(0.2)
    assert alive(pid)
    request = approval()
    await store.commit(insert(request))
    assert await store.get_request(request.id) == request


async def test_close_finishes_every_write_handed_over_then_the_writer_exits(
    tmp_path: Path,
) -> None:
    """Writes queued when close begins all commit; a write after it is refused; no writer
    is left."""
    path = tmp_path / "signoff.db"
    store = SQLiteStore(path, writer="process")
    await store.open()
    pid = store.writer_pid
    assert pid is not None
    requests = [approval() for _ in range(300)]
    writes = [asyncio.create_task(store.commit(insert(r))) for r in requests]
    await asyncio.sleep(0)  # the writes are queued
    closing = asyncio.create_task(store.close())
    await asyncio.sleep(0)
    with pytest.raises(StoreUnavailable):
        await store.commit(insert(approval()))
    await asyncio.gather(*writes)
    await closing
    assert not alive(pid)
    again = SQLiteStore(path)
    await again.open()
    try:
        for request in requests:
            assert await again.get_request(request.id) == request
    finally:
        await again.close()


async def test_writes_from_another_event_loop(store: SQLiteStore) -> None:
    """A caller on another thread's event loop is answered on its own loop."""
    request = approval()
    errors: list[BaseException] = []

    def other() -> None:
        try:
            asyncio.run(store.commit(insert(request)))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=other)
    thread.start()
    await asyncio.to_thread(thread.join, 30)
    assert errors == []
    assert await store.get_request(request.id) == request


async def test_a_file_it_cannot_use_is_refused_and_leaves_no_process(tmp_path: Path) -> None:
    """A newer schema: open fails with the reason, and no writer process is left running."""
    path = tmp_path / "signoff.db"
    first = SQLiteStore(path, writer="process")
    await first.open()
    await first.close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    refused = SQLiteStore(path, writer="process")
    with pytest.raises(StoreUnavailable, match="upgrade signoff"):
        await refused.open()
    assert refused.writer_pid is None
    assert writers_of(path) == []


def test_a_writer_is_a_thread_or_a_process(tmp_path: Path) -> None:
    """Anything else is refused, and a writer applies only to SQLite."""
    with pytest.raises(InvalidRequest, match="thread or a process"):
        SQLiteStore(tmp_path / "x.db", writer="fork")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="thread or a process"):
        open_store(f"sqlite:///{tmp_path / 'x.db'}", writer="fork")
    with pytest.raises(InvalidRequest, match="SQLite database only"):
        open_store("postgresql://127.0.0.1/x", writer="process")
    assert open_store(f"sqlite:///{tmp_path / 'x.db'}", writer="process").writer == "process"  # type: ignore[attr-defined]
