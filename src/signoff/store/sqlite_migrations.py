"""The SQLite schema, as an ordered list of migrations applied on first use.

Migration N takes a database at version N-1 to version N; ``PRAGMA user_version`` says
where a file is. Never edit a released migration: add the next one.

The tables both stores create alike are written once, in :mod:`signoff.store.ddl`.
"""

from __future__ import annotations

from signoff.store import ddl

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

_KEY = "TEXT"
_BIG = "INTEGER"

_AUDIT_HEAD = """
CREATE TABLE audit_head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL,
    hash TEXT NOT NULL
);
"""

_INITIAL = ddl.for_dialect(
    ddl.REQUESTS, ddl.GRANTS_TOKENS_AUDIT, _AUDIT_HEAD, ddl.EVENTS, key=_KEY, big=_BIG
)

_WEBHOOKS = """
CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    created_us INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE deliveries (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    next_attempt_us INTEGER NOT NULL,
    created_us INTEGER NOT NULL,
    event_seq INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_us) WHERE status = 'pending';
CREATE INDEX deliveries_status ON deliveries (status, created_us DESC, event_seq DESC);
CREATE INDEX deliveries_created ON deliveries (created_us DESC, event_seq DESC);
"""

_TASKS = ddl.for_dialect(ddl.TASKS, key=_KEY, big=_BIG)
_SESSIONS = ddl.for_dialect(ddl.SESSIONS, key=_KEY, big=_BIG)

_NOTIFY = ddl.for_dialect(ddl.NOTIFY, key=_KEY, big=_BIG)

MIGRATIONS: tuple[str, ...] = (
    _INITIAL,
    _WEBHOOKS,
    _TASKS,
    _SESSIONS,
    ddl.CALL_PER_REQUESTER,
    _NOTIFY,
)
"""Migration N is ``MIGRATIONS[N - 1]``."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The version this code writes."""
