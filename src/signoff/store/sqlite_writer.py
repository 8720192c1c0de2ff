"""The SQLite store's writer as a process of its own (``SQLiteStore(path, writer="process")``).

With a writer thread, the thread and the event loop take turns: each statement the
``sqlite3`` module runs releases the GIL around SQLite's work and must take it back to
return, and while the loop thread runs Python it keeps the GIL for its switch interval, so
with the loop busy the writer runs about one statement per interval (bench/RESULTS.md, "A
writer thread beside the event loop"). A process has a GIL of its own: the loop makes the
next writes while the process runs and syncs the last ones.

The loop hands the process :mod:`~signoff.store.sqlite_writes` jobs (plans of plain values
and nonce checks), pickled, through a socket pair only the two ends hold, in batches: once
the turn of the loop in which writes were made has run, at most :data:`MAX_BATCH` jobs a
batch and :data:`DEPTH` batches in flight, so the process always has the next batch while
the loop makes the one after. The process runs each batch with :func:`run_batch` in one
transaction, as the thread does, and answers each job's outcome. A frame is its length
(8 bytes, little-endian) and a pickle; an empty frame asks the process to stop.

What can fail, and what callers see:
- the process cannot open the file, or finds a newer schema: ``open`` fails with its reason;
- the process ends while writes are in flight (killed, out of memory): each of those writes
  fails with StoreUnavailable saying it may or may not have been committed, and every later
  write fails at once (nothing is written behind the callers' backs; reads go on);
- the server ends without closing the store: the process reads the end of its socket after
  the batch it is running (which it commits) and exits.

The process ignores SIGINT and SIGTERM: a Ctrl-C or a service manager's stop reaches the
server, which finishes the writes queued and then stops the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from signoff.errors import DuplicateRequest, GrantsChanged, StoreUnavailable, VersionConflict
from signoff.store.sqlite_writes import Job, Outcome, Plan, UseNonce, open_for_writing, run_batch

__all__ = ["DEPTH", "MAX_BATCH", "WriterProcess", "main"]

log = logging.getLogger(__name__)

MAX_BATCH = 32
"""Jobs in one batch at most: with many callers, a batch runs while the loop makes the next."""
DEPTH = 2
"""Batches handed to the process and not yet answered, at most."""
STARTUP_TIMEOUT = 60.0
"""Seconds the process may take to start, open the file and migrate it."""
STOP_TIMEOUT = 60.0
"""Seconds the process may take to finish and exit once asked to stop."""
_BUFFER = 16 * 1024 * 1024
"""The socket buffers asked for: a batch is up to a few MB (the system may grant less)."""

_SIZE = 8
_MAIN = "import sys; from signoff.store.sqlite_writer import main; sys.exit(main())"
"""What the process runs (``-m`` would import this module twice: the package imports it)."""
_PACKAGE_DIR = str(Path(__file__).resolve().parents[2])
"""The directory holding the signoff package, for the process to import it from."""


def _frame(value: object) -> bytes:
    body = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return len(body).to_bytes(_SIZE, "little") + body


# -- the process ---------------------------------------------------------------------------


def _encode(outcome: Outcome) -> tuple[str, object]:
    """An outcome as plain values (the store's errors rebuilt on the other side)."""
    answer, error = outcome
    if error is None:
        return "ok", answer
    if isinstance(error, DuplicateRequest):
        return "duplicate", error.existing_id
    if isinstance(error, VersionConflict):
        return "conflict", error.request_id
    if isinstance(error, GrantsChanged):
        return "grants", None
    if isinstance(error, StoreUnavailable):
        return "unavailable", str(error)
    return "failed", f"{type(error).__name__}: {error}"


def _read_exactly(stream: Any, size: int) -> bytes | None:
    data = stream.read(size)
    return data if data is not None and len(data) == size else None


def serve(sock: socket.socket, path: Path) -> None:
    """Open ``path`` for writing, say whether it opened, then run each batch read from
    ``sock`` and answer it, until an empty frame or the end of the socket."""
    try:
        conn = open_for_writing(path)
    except StoreUnavailable as exc:
        sock.sendall(_frame(("failed", str(exc))))
        return
    stream = sock.makefile("rb")
    try:
        sock.sendall(_frame(("ready", None)))
        while True:
            head = _read_exactly(stream, _SIZE)
            if head is None:
                return  # the store's process ended without stopping us
            size = int.from_bytes(head, "little")
            if size == 0:
                return
            body = _read_exactly(stream, size)
            if body is None:
                return
            sent: list[tuple[bool, tuple[Any, ...]]] = pickle.loads(body)  # noqa: S301 - from our parent, the socket pair's other end
            jobs = [UseNonce(*values) if nonce else Plan(*values) for nonce, values in sent]
            outcomes = run_batch(conn, path, jobs)
            sock.sendall(_frame([_encode(outcome) for outcome in outcomes]))
    except (BrokenPipeError, ConnectionResetError):
        return
    finally:
        stream.close()
        conn.close()


def main(argv: list[str] | None = None) -> int:
    """The process's entry, with its arguments ``FD PATH``: serve the socket ``FD``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not args[0].isdigit():
        print("usage: <signoff's SQLite writer process> FD PATH", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with socket.socket(fileno=int(args[0])) as sock:
        serve(sock, Path(args[1]))
    return 0


# -- the store's end -----------------------------------------------------------------------


@dataclass
class _Sent:
    job: Job
    future: asyncio.Future[Any]
    done: Callable[[Any], None] | None
    """Called with the answer once committed, before the caller hears of it."""


def _decoded(outcome: tuple[str, object]) -> tuple[object, BaseException | None]:
    kind, value = outcome
    if kind == "ok":
        return value, None
    if kind == "duplicate":
        return None, DuplicateRequest(str(value))
    if kind == "conflict":
        return None, VersionConflict(str(value))
    if kind == "grants":
        return None, GrantsChanged()
    if kind == "unavailable":
        return None, StoreUnavailable(str(value))
    return None, RuntimeError(f"the SQLite writer process failed a write: {value}")


def _socket_pair() -> tuple[socket.socket, socket.socket]:
    ours, theirs = socket.socketpair()
    for sock in (ours, theirs):
        for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, option, _BUFFER)
    return ours, theirs


class WriterProcess:
    """The store's end of a writer process: hands it jobs, settles the callers' futures."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._process: asyncio.subprocess.Process | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._answers: asyncio.Task[None] | None = None
        self._pending: list[_Sent] = []
        self._in_flight: deque[list[_Sent]] = deque()
        self._send_due = False
        self._broken: StoreUnavailable | None = None
        self._closing = False
        self._idle: asyncio.Event | None = None

    @property
    def pid(self) -> int | None:
        """The process's id, while it runs."""
        return self._process.pid if self._process is not None else None

    async def start(self) -> None:
        """Start the process; return once it has opened (and migrated) the file."""
        ours, theirs = _socket_pair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_DIR, *filter(None, [env.get("PYTHONPATH")])])
        try:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                _MAIN,
                str(theirs.fileno()),
                str(self.path),
                pass_fds=(theirs.fileno(),),
                env=env,
                stdin=subprocess.DEVNULL,
            )
        except OSError as exc:
            ours.close()
            why = f"cannot start a writer process for {self.path}: {exc}"
            raise StoreUnavailable(why) from None
        finally:
            theirs.close()
        self._loop = asyncio.get_running_loop()
        self._reader, self._writer = await asyncio.open_connection(sock=ours)
        try:
            kind, reason = await asyncio.wait_for(self._read_frame(), STARTUP_TIMEOUT)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError) as exc:
            await self._end()
            why = "took too long to start" if isinstance(exc, TimeoutError) else "ended"
            raise StoreUnavailable(f"the writer process for {self.path} {why}") from None
        if kind != "ready":
            await self._end()
            raise StoreUnavailable(str(reason))
        self._idle = asyncio.Event()
        self._idle.set()
        self._answers = asyncio.create_task(self._read_answers(), name="signoff-sqlite-answers")

    async def stop(self) -> None:
        """Wait for every write handed over, then stop the process."""
        if self._process is None:
            return
        self._closing = True
        if self._idle is not None:
            await self._idle.wait()
        await self._stop_reading()  # nothing in flight: the process's end is no loss
        if self._writer is not None and self._broken is None:
            with contextlib.suppress(ConnectionError):
                self._writer.write(bytes(_SIZE))
                await self._writer.drain()
        await self._end()

    async def _stop_reading(self) -> None:
        if self._answers is not None:
            self._answers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._answers
            self._answers = None

    async def _end(self) -> None:
        """Close our end, and wait for the process to exit (killing it if it will not)."""
        await self._stop_reading()
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ConnectionError):
                await self._writer.wait_closed()
            self._writer = None
        process, self._process = self._process, None
        if process is None:
            return
        try:
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
        except TimeoutError:
            log.error("the SQLite writer process for %s did not stop; killing it", self.path)
            process.kill()
            await process.wait()

    async def run(self, job: Job, done: Callable[[Any], None] | None = None) -> Any:
        """Hand ``job`` to the process; its answer once committed (``done`` called with it
        first), or the error it failed with."""
        owner = self._loop
        if owner is None:
            raise StoreUnavailable("the store is not open")
        if asyncio.get_running_loop() is not owner:
            handed = asyncio.run_coroutine_threadsafe(self.run(job, done), owner)
            return await asyncio.wrap_future(handed)
        if self._broken is not None:
            raise self._broken
        if self._closing:
            raise StoreUnavailable("the store is closing")
        future: asyncio.Future[Any] = owner.create_future()
        self._pending.append(_Sent(job, future, done))
        assert self._idle is not None
        self._idle.clear()
        if not self._send_due:
            self._send_due = True
            owner.call_soon(self._send)
        return await future

    def _send(self) -> None:
        """Hand the process what is pending, as far as batches in flight allow."""
        self._send_due = False
        if self._writer is None or self._broken is not None:
            return
        while self._pending and len(self._in_flight) < DEPTH:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            try:
                # plain tuples: a NamedTuple pickles with a call per instance, 2-3 times slower
                frame = _frame([(isinstance(s.job, UseNonce), tuple(s.job)) for s in batch])
            except Exception as exc:  # a value pickle cannot carry: a bug, failed alone
                for sent in batch:
                    if not sent.future.done():
                        sent.future.set_exception(
                            StoreUnavailable(f"cannot hand a write to the writer process: {exc}")
                        )
                continue
            self._in_flight.append(batch)
            self._writer.write(frame)
        if not self._pending and not self._in_flight and self._idle is not None:
            self._idle.set()

    async def _read_frame(self) -> Any:
        assert self._reader is not None
        size = int.from_bytes(await self._reader.readexactly(_SIZE), "little")
        return pickle.loads(await self._reader.readexactly(size))  # noqa: S301 - from our own child

    async def _read_answers(self) -> None:
        try:
            while True:
                answers: list[tuple[str, object]] = await self._read_frame()
                batch = self._in_flight.popleft()
                self._send()
                for sent, encoded in zip(batch, answers, strict=True):
                    answer, error = _decoded(encoded)
                    if error is None and sent.done is not None:
                        sent.done(answer)
                    if sent.future.done():
                        continue
                    if error is not None:
                        sent.future.set_exception(error)
                    else:
                        sent.future.set_result(answer)
                if not self._pending and not self._in_flight:
                    assert self._idle is not None
                    self._idle.set()
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            self._lost(exc)

    def _lost(self, exc: BaseException) -> None:
        """The process ended: fail what it held and everything after."""
        code = self._process.returncode if self._process is not None else None
        unknown = sum(len(batch) for batch in self._in_flight)
        self._broken = StoreUnavailable(
            f"the SQLite writer process for {self.path} ended (exit code {code}); "
            "the store takes no more writes until it is opened again (a server: restart it)"
        )
        log.error(
            "%s: %s writes in flight may or may not be committed (%r)", self._broken, unknown, exc
        )
        in_flight = StoreUnavailable(
            f"the SQLite writer process for {self.path} ended (exit code {code}) while this "
            "write was in flight: it may or may not have been committed"
        )
        for batch in self._in_flight:
            for sent in batch:
                if not sent.future.done():
                    sent.future.set_exception(in_flight)
        for sent in self._pending:
            if not sent.future.done():
                sent.future.set_exception(self._broken)
        self._in_flight.clear()
        self._pending.clear()
        if self._idle is not None:
            self._idle.set()
