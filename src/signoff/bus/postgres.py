"""Events across servers sharing one PostgreSQL: LISTEN/NOTIFY as the wake-up, the log as truth.

Every write that appends events also runs ``pg_notify('signoff_events', ...)`` in its
transaction while another process's follower listens, so each such process is woken when
it commits. The payload's first line is the last seq the commit wrote; when they fit, the
events follow it (the schema of the log, the stamp, then a line of type, tab and data per
event). Each follower's listening connection is named :data:`FOLLOWER`; a follower counts
the others on connecting, every poll interval and when one NOTIFYs its :data:`HELLO` on
starting, and tells its store whether any listens: a server alone on its database NOTIFYs
nobody. When the events carried by the NOTIFYs cover every seq from the follower's last
one to the newest notified (those this process published aside), with no hole, it
publishes them on its local bus without a query; otherwise (an event too big to carry, a
reconnect, the interval's poll) it reads the stored event log after the last seq it has
seen, and publishes the ones this process did not write. This process's own commits need
neither: its store tells the follower their seqs (and a NOTIFY of one, from a connection
whose backend pid the store knows, is taken for the same), the service that committed
them publishes them, and the follower reads the log only for one that nobody published.
A follower that starts reads the log once more a moment after its hello
(:data:`_COUNTED`): what the others committed before they counted it, they NOTIFYed to
nobody. A lost connection is noticed, re-established with backoff, and followed by a
catch-up from the log, so nothing is missed; a slow poll covers the rare notification that
never arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from signoff.bus.follower import EventLogFollower
from signoff.bus.local import EventBus
from signoff.domain.events import Event
from signoff.store.base import Store

try:
    import asyncpg
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "the PostgreSQL event bus needs asyncpg: pip install 'signoff[postgres]'"
    ) from exc

__all__ = ["CHANNEL", "FOLLOWER", "HELLO", "PostgresEventFollower"]

CHANNEL = "signoff_events"
"""The NOTIFY channel every commit with events signals on."""

FOLLOWER = "signoff-follower"
"""The ``application_name`` of every follower's listening connection: how a follower counts
the others listening on its database (``pg_stat_activity``)."""

_OTHERS = (
    "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 "
    "AND datname = current_database() AND pid <> pg_backend_pid()"
)
"""How many other followers listen on this database (of any process, this one's too)."""

HELLO = "follower"
"""What a follower NOTIFYs once it listens: the others count the followers at once, so the
commits of a server already running NOTIFY it, with their events, from then on (not a seq:
no follower takes it for a commit)."""

logger = logging.getLogger("signoff.bus.postgres")

_SETTLE = 0.005
"""Seconds between a NOTIFY of this process's own commit and the follower's check that its
service published it. The NOTIFYs of this process's commits in that time are checked at
once, in one turn of the follower, by when their services have long published them: a
check at each NOTIFY woke the follower once per commit and took two or three more turns of
the event loop, as the NOTIFY usually comes before the commit's reply (0.05-0.12 ms of the
client's CPU a pause and resume, bench/RESULTS.md). Another server's NOTIFY wakes the
follower at once."""
_TURNS = 8
"""How many turns of the event loop the check gives a service that has not yet published
its commit, before waiting in steps of a twentieth of :data:`_GRACE`."""
_GRACE = 0.05
"""How long, in seconds, the follower waits for this process's service to publish its commit."""
_COUNTED = 0.25
"""Seconds after its hello when a follower reads the log once more: by then the others have
counted it, and the commits they made before, which NOTIFYed nobody, are in the log (the
interval's poll reaches any later one)."""
_CARRIED = 4096
"""How many carried events the follower holds at most; past it, it forgets them all (the
next NOTIFY then finds a hole and reads the log)."""

EventRow = tuple[int, str, str, str]
"""An event as a NOTIFY carries it: ``seq, type, at, data``, a row of the event log."""


class PostgresEventFollower(EventLogFollower):
    """Publishes other servers' events here, woken by NOTIFY, caught up from the event log."""

    def __init__(
        self,
        dsn: str,
        store: Store,
        bus: EventBus,
        *,
        poll: float = 2.0,
        max_backoff: float = 5.0,
        own_backend: Callable[[int], bool] | None = None,
        parse: Callable[[Sequence[EventRow]], list[Event]] | None = None,
        schema: str | None = None,
        others_follow: Callable[[bool], None] | None = None,
        commits_here: Callable[[Callable[[int | None], None] | None], None] | None = None,
    ) -> None:
        """``own_backend(pid)``: whether a NOTIFY from that backend is a commit of this
        process (the store knows its connections), which then needs no read; without it,
        every NOTIFY is read. ``parse(rows)``: the events that rows carried by NOTIFYs
        hold, as reading them from the log would give them (the store may reuse the ones
        it parsed already, and keep the others for its readers); without it, the events a
        NOTIFY carries are not used and the log is read. ``schema``: the store's
        (None: the search_path's); schemas of one database share the channel, and only
        the events of this one's log are taken from a NOTIFY. ``others_follow(others)``:
        told on connecting, and every ``poll`` seconds after, whether another follower
        listens on the database (the store then NOTIFYs, with the events, only for them);
        one that starts meanwhile reads the log until told. ``commits_here(heard)``:
        registers ``heard`` with the store, called with the last seq of each of its
        commits (None: one that may have committed), and unregisters it (None) on stop;
        without it, this process's commits are known from their NOTIFYs alone."""
        super().__init__(store, bus, interval=poll)
        self._dsn = dsn
        self._own_backend = own_backend
        self._foreign = False
        self._max_backoff = max_backoff
        self._wake = asyncio.Event()
        self._settling: asyncio.TimerHandle | None = None
        self._connection: Any = None
        self._notified_seq = 0
        self._carried: dict[int, tuple[str, str, str]] = {}
        self._parse = parse
        self._schema = schema
        self._others_follow = others_follow
        self._commits_here = commits_here
        self._must_read = False  # the log is read at the next wake-up, whatever was notified
        self._recount: asyncio.TimerHandle | None = None
        self._census_at = 0.0  # when the other followers are counted next
        self._log_schema: str | None = None  # the schema's name as the database reports it
        self._connected_once = False
        self.reconnects = 0
        """How many times the listening connection was re-established (for tests, metrics)."""

    def _notified(self, connection: Any, pid: int, _channel: str, payload: str) -> None:
        if payload == HELLO:  # another follower listens now: count them (ours comes back too)
            if pid != connection.get_server_pid():
                self._census_at = 0.0
                self._wake.set()
            return
        lines = payload.split("\n")
        with contextlib.suppress(ValueError):
            last = int(lines[0])
            self._notified_seq = max(self._notified_seq, last)
            self._carry(last, lines[1:])
        if self._own_backend is None or not self._own_backend(pid):
            self._foreign = True
            self._wake.set()
        else:
            self._own()

    def committed_here(self, seq: int | None) -> None:
        """This process's store committed events up to ``seq``; None: a write that may
        have committed failed or was cancelled, so the log is read."""
        if seq is None:
            self._read_soon()
        else:
            self._notified_seq = max(self._notified_seq, seq)
            self._own()

    def _own(self) -> None:
        """A commit of this process's own: checked a little later, with those that follow."""
        if self._settling is None:
            self._settling = asyncio.get_running_loop().call_later(_SETTLE, self._settled)

    def _read_soon(self) -> None:
        self._must_read = True
        self._wake.set()

    def _settled(self) -> None:
        self._settling = None
        self._wake.set()

    def _carry(self, last: int, lines: list[str]) -> None:
        """Keep the events a payload carries (none when it held the seq alone)."""
        if self._parse is None or len(lines) < 3 or lines[0] != self._log_schema:
            return
        at, rows = lines[1], [line.split("\t", 1) for line in lines[2:]]
        if any(len(row) != 2 for row in rows):
            return  # not what signoff_append sends: the log has them
        if len(self._carried) + len(rows) > _CARRIED:
            self._carried.clear()
        first = last - len(rows) + 1
        for seq, (type_, data) in enumerate(rows, start=first):
            self._carried[seq] = (type_, at, data)

    async def _publish_carried(self) -> bool:
        """Publish the events from the cursor to the newest notified from what the
        NOTIFYs carried, if they carried every one of them that this process's bus has not
        published already (its own commits, which NOTIFY nobody while it is alone); whether
        it did.

        They are the rows a read would return, so the bus gets exactly what a read would
        give it, in order, each seq once.
        """
        carried, published = self._carried, self._bus.already_published
        # empty when a read already reached the notified seq: nothing to publish
        seqs = range(self._cursor + 1, self._notified_seq + 1)
        if not all(seq in carried or published(seq) for seq in seqs):
            return False
        self._foreign = False  # what was notified until now, this reaches
        self._cursor = max(self._cursor, seqs.stop - 1)
        rows = [(seq, *carried.pop(seq)) for seq in seqs if seq in carried]
        fresh = [row for row in rows if not published(row[0])]
        if fresh and self._parse is not None:  # (none carried without a parser)
            await self._bus.publish(self._parse(fresh))
        return True

    async def poll_once(self) -> int:
        """Read the log after the cursor (see the base class); drop what it carried past."""
        published = await super().poll_once()
        if self._carried:
            self._carried = {s: e for s, e in self._carried.items() if s > self._cursor}
        return published

    async def _published_here(self) -> bool:
        """Whether every seq notified since the cursor is this process's and on its bus.

        A commit of this process needs no read: its service publishes it. Only when every
        NOTIFY since the last read came from this process's own connections (the backend
        pid says) can the cursor skip ahead, once those events are on the bus; a commit of
        another server is read at once. The NOTIFY comes on another connection than the
        commit's reply, in either order, so the follower gives the service a little time
        to publish, and reads the log if the events do not come (say, the service's caller
        was cancelled between commit and publish).
        """
        if self._foreign:
            return False
        seqs = range(self._cursor + 1, self._notified_seq + 1)
        deadline = asyncio.get_running_loop().time() + _GRACE
        turns = 0
        while not all(self._bus.already_published(s) for s in seqs):
            if self._foreign or asyncio.get_running_loop().time() > deadline:
                return False
            turns += 1
            await asyncio.sleep(0 if turns < _TURNS else _GRACE / 20)
        self._cursor = max(self._cursor, seqs.stop - 1)
        for seq in seqs:
            self._carried.pop(seq, None)
        return True

    async def _census(self) -> None:
        """Tell the store whether another follower listens on the database, and when to
        count them again."""
        self._census_at = asyncio.get_running_loop().time() + self._interval
        if self._others_follow is None or self._connection is None:
            return
        self._others_follow(bool(await self._connection.fetchval(_OTHERS, FOLLOWER)))

    async def _listen(self) -> None:
        settings = {"application_name": FOLLOWER}
        if self._schema is not None:
            settings["search_path"] = self._schema
        connection = await asyncpg.connect(self._dsn, server_settings=settings)
        # kept before the next await: a stop that cancels us there still closes it
        self._connection = connection
        if self._connected_once:
            self.reconnects += 1
        self._connected_once = True
        # what current_schema() gives the store's connections, whose commits name it
        self._log_schema = await connection.fetchval("SELECT current_schema()")
        await connection.add_listener(CHANNEL, self._notified)
        await connection.execute(f"NOTIFY {CHANNEL}, '{HELLO}'")
        if self._recount is not None:
            self._recount.cancel()
        self._recount = asyncio.get_running_loop().call_later(_COUNTED, self._read_soon)
        self._census_at = 0.0  # counted again at once: others may have come or gone
        connection.add_termination_listener(lambda *_: self._wake.set())

    async def _close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None and not connection.is_closed():
            with contextlib.suppress(Exception):
                await connection.close()

    async def start(self, after_seq: int | None = None) -> None:
        """Hear this process's commits from its store, then follow (see the base class)."""
        if self._commits_here is not None:
            self._commits_here(self.committed_here)
        await super().start(after_seq)

    async def stop(self) -> None:
        """Stop following and close the listening connection."""
        if self._commits_here is not None:
            self._commits_here(None)
        await super().stop()
        for timer in (self._settling, self._recount):
            if timer is not None:
                timer.cancel()
        self._settling = self._recount = None
        await self._close()

    async def _run(self) -> None:
        backoff = 0.1
        woken = False
        while True:
            try:
                connected = self._connection is not None and not self._connection.is_closed()
                if not connected:
                    await self._close()
                    await self._listen()
                    backoff = 0.1
                if asyncio.get_running_loop().time() >= self._census_at:
                    await self._census()
                # after (re)connecting, after a quiet interval, when told to (a write that
                # may have committed unseen, the read after the hello), and on every NOTIFY
                # but those of this process's own commits and those that carried their
                # events with no hole since our seq: read the log from our seq
                self._wake.clear()
                must_read, self._must_read = self._must_read, False
                if must_read or not (
                    connected
                    and woken
                    and (await self._published_here() or await self._publish_carried())
                ):
                    self._foreign = False  # what it notified, this read reaches
                    await self.poll_once()
                woken = False
                # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the
                # event's result when a stop's cancel meets a wake-up, and the loop ran on
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._interval):
                        await self._wake.wait()
                    woken = True
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database went away: keep trying, quietly
                logger.warning("signoff event listener: %s; reconnecting", exc)
                await self._close()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff)
