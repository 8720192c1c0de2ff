"""The PostgreSQL schema, as an ordered list of migrations applied when a store opens.

Migration N takes a schema at version N-1 to version N; the one row of ``schema_version``
says where a database is. Never edit a released migration: add the next one.

Records are kept as the JSON text their model dumps (``data``), with the columns queries
filter and sort on beside it; timestamps that are sorted on are microseconds since the
epoch (``*_us``), timestamps that are hashed or replayed keep their exact ISO text. Ids
sort bytewise (``COLLATE "C"``), as in SQLite and Python, whatever the database's locale,
so keyset pages break ties the same way on every backend.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

_INITIAL = """
CREATE TABLE requests (
    id TEXT COLLATE "C" PRIMARY KEY,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    session_id TEXT NOT NULL,
    tool_name TEXT,
    tool_call_id TEXT,
    requested_by TEXT NOT NULL,
    idempotency_key TEXT,
    created_us BIGINT NOT NULL,
    expires_us BIGINT,
    version INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE UNIQUE INDEX requests_call ON requests (session_id, tool_call_id)
    WHERE tool_call_id IS NOT NULL;
CREATE UNIQUE INDEX requests_idem ON requests (requested_by, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX requests_session_status ON requests (session_id, status, created_us DESC, id DESC);
CREATE INDEX requests_status ON requests (status, created_us DESC, id DESC);
CREATE INDEX requests_created ON requests (created_us DESC, id DESC);
CREATE INDEX requests_requester ON requests (requested_by, created_us DESC, id DESC);
CREATE INDEX requests_due ON requests (expires_us)
    WHERE status = 'pending' AND expires_us IS NOT NULL;

CREATE TABLE grants (
    id TEXT COLLATE "C" PRIMARY KEY,
    tool_name TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    created_us BIGINT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX grants_tool ON grants (tool_name, requested_by);

CREATE TABLE tokens (
    id TEXT COLLATE "C" PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    created_us BIGINT NOT NULL,
    data TEXT NOT NULL
);

CREATE TABLE audit (
    seq BIGINT PRIMARY KEY,
    request_id TEXT,
    at TEXT NOT NULL,
    action TEXT NOT NULL,
    actor TEXT NOT NULL,
    from_status TEXT,
    to_status TEXT,
    details TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX audit_request ON audit (request_id, seq);

CREATE TABLE events (
    seq BIGINT PRIMARY KEY,
    type TEXT NOT NULL,
    at TEXT NOT NULL,
    request_id TEXT NOT NULL,
    data TEXT NOT NULL
);

-- The one row every write that appends to the audit chain or the event log locks
-- (SELECT ... FOR UPDATE) and advances: writers on every server queue on it, so seqs are
-- gap-free, commit in order, and the chain links in the order entries became visible.
CREATE TABLE log_head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    audit_seq BIGINT NOT NULL,
    audit_hash TEXT,
    event_seq BIGINT NOT NULL
);
INSERT INTO log_head (id, audit_seq, audit_hash, event_seq) VALUES (1, 0, NULL, 0);

CREATE TABLE webhooks (
    id TEXT COLLATE "C" PRIMARY KEY,
    created_us BIGINT NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE deliveries (
    id TEXT COLLATE "C" PRIMARY KEY,
    status TEXT NOT NULL,
    next_attempt_us BIGINT NOT NULL,
    created_us BIGINT NOT NULL,
    event_seq BIGINT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_us, event_seq, id)
    WHERE status = 'pending';
CREATE INDEX deliveries_status ON deliveries (status, created_us DESC, event_seq DESC, id DESC);
CREATE INDEX deliveries_created ON deliveries (created_us DESC, event_seq DESC, id DESC);

CREATE TABLE tasks (
    id TEXT COLLATE "C" PRIMARY KEY,
    status TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_us BIGINT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX tasks_created ON tasks (created_us DESC, id DESC);
CREATE INDEX tasks_status ON tasks (status, created_us DESC, id DESC);
CREATE TABLE task_requests (
    request_id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL
);
"""

_SESSIONS = """
CREATE TABLE sessions (
    id TEXT COLLATE "C" PRIMARY KEY,
    token_id TEXT NOT NULL,
    expires_us BIGINT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX sessions_token ON sessions (token_id);
"""

# A tool_call_id is unique per requester: with (session_id, tool_call_id) alone, another
# agent's submit of the same ids collided with (and was handed) the first agent's request.
# The new index is finer than the old one, so every existing database satisfies it.
_CALL_PER_REQUESTER = """
DROP INDEX requests_call;
CREATE UNIQUE INDEX requests_call ON requests (session_id, tool_call_id, requested_by)
    WHERE tool_call_id IS NOT NULL;
"""

MIGRATIONS: tuple[str, ...] = (_INITIAL, _SESSIONS, _CALL_PER_REQUESTER)
"""Migration N is ``MIGRATIONS[N - 1]``."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The version this code writes."""
