"""The SQLite schema, as an ordered list of migrations applied on first use.

Migration N takes a database at version N-1 to version N; ``PRAGMA user_version`` says
where a file is. Never edit a released migration: add the next one.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

_INITIAL = """
CREATE TABLE requests (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    session_id TEXT NOT NULL,
    tool_name TEXT,
    tool_call_id TEXT,
    requested_by TEXT NOT NULL,
    idempotency_key TEXT,
    created_us INTEGER NOT NULL,
    expires_us INTEGER,
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
    id TEXT PRIMARY KEY,
    tool_name TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX grants_tool ON grants (tool_name, requested_by);

CREATE TABLE tokens (
    id TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    created_us INTEGER NOT NULL,
    data TEXT NOT NULL
);

CREATE TABLE audit (
    seq INTEGER PRIMARY KEY,
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

CREATE TABLE audit_head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL,
    hash TEXT NOT NULL
);

CREATE TABLE events (
    seq INTEGER PRIMARY KEY,
    type TEXT NOT NULL,
    at TEXT NOT NULL,
    request_id TEXT NOT NULL,
    data TEXT NOT NULL
);
"""

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

_TASKS = """
CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_us INTEGER NOT NULL,
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
    id TEXT PRIMARY KEY,
    token_id TEXT NOT NULL,
    expires_us INTEGER NOT NULL,
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

MIGRATIONS: tuple[str, ...] = (_INITIAL, _WEBHOOKS, _TASKS, _SESSIONS, _CALL_PER_REQUESTER)
"""Migration N is ``MIGRATIONS[N - 1]``."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The version this code writes."""
