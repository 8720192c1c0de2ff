"""The DDL both SQL stores' migrations share, written once for either dialect.

Each fragment is a template with two blanks the dialect fills: ``{key}``, the type of a
text id that keyset pages sort on (PostgreSQL adds ``COLLATE "C"`` so ids sort bytewise
there too), and ``{big}``, a 64-bit integer (``BIGINT``; SQLite's ``INTEGER`` is already
64-bit). :func:`for_dialect` fills them.

These fragments are parts of released migrations: never edit one (that would edit a
released migration of both stores); add the next migration to each dialect instead.
"""

from __future__ import annotations

__all__ = [
    "CALL_PER_REQUESTER",
    "EVENTS",
    "GRANTS_TOKENS_AUDIT",
    "HISTORY_COLUMNS",
    "HISTORY_INDEXES",
    "NOTIFY",
    "REQUESTS",
    "SESSIONS",
    "TASKS",
    "for_dialect",
]

REQUESTS = """
CREATE TABLE requests (
    id {key} PRIMARY KEY,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    session_id TEXT NOT NULL,
    tool_name TEXT,
    tool_call_id TEXT,
    requested_by TEXT NOT NULL,
    idempotency_key TEXT,
    created_us {big} NOT NULL,
    expires_us {big},
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
"""
"""The requests table and its indexes (the initial migration)."""

GRANTS_TOKENS_AUDIT = """
CREATE TABLE grants (
    id {key} PRIMARY KEY,
    tool_name TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    created_us {big} NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX grants_tool ON grants (tool_name, requested_by);

CREATE TABLE tokens (
    id {key} PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    created_us {big} NOT NULL,
    data TEXT NOT NULL
);

CREATE TABLE audit (
    seq {big} PRIMARY KEY,
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
"""
"""The grants, tokens and audit tables (the initial migration)."""

EVENTS = """
CREATE TABLE events (
    seq {big} PRIMARY KEY,
    type TEXT NOT NULL,
    at TEXT NOT NULL,
    request_id TEXT NOT NULL,
    data TEXT NOT NULL
);
"""
"""The event log (the initial migration)."""

TASKS = """
CREATE TABLE tasks (
    id {key} PRIMARY KEY,
    status TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_us {big} NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX tasks_created ON tasks (created_us DESC, id DESC);
CREATE INDEX tasks_status ON tasks (status, created_us DESC, id DESC);
CREATE TABLE task_requests (
    request_id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL
);
"""
"""Durable tasks and which task filed each request."""

SESSIONS = """
CREATE TABLE sessions (
    id {key} PRIMARY KEY,
    token_id TEXT NOT NULL,
    expires_us {big} NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX sessions_token ON sessions (token_id);
"""
"""Inbox sign-in sessions."""

# A tool_call_id is unique per requester: with (session_id, tool_call_id) alone, another
# agent's submit of the same ids collided with (and was handed) the first agent's request.
# The new index is finer than the old one, so every existing database satisfies it.
CALL_PER_REQUESTER = """
DROP INDEX requests_call;
CREATE UNIQUE INDEX requests_call ON requests (session_id, tool_call_id, requested_by)
    WHERE tool_call_id IS NOT NULL;
"""
"""One tool_call_id per session and requester, not per session."""

NOTIFY = """
CREATE TABLE notify_routes (
    id {key} PRIMARY KEY,
    name TEXT NOT NULL,
    created_us {big} NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE notices (
    id {key} PRIMARY KEY,
    route_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    purpose TEXT NOT NULL,
    status TEXT NOT NULL,
    next_attempt_us {big} NOT NULL,
    created_us {big} NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX notices_due ON notices (next_attempt_us, id) WHERE status = 'pending';
CREATE INDEX notices_request ON notices (request_id, created_us);
CREATE INDEX notices_route ON notices (route_id, created_us DESC, id DESC);
CREATE TABLE person_links (
    id {key} PRIMARY KEY,
    name TEXT NOT NULL,
    created_us {big} NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE nonces (
    key {key} PRIMARY KEY,
    until_us {big} NOT NULL
);
CREATE INDEX nonces_until ON nonces (until_us);
"""
"""Notification routes, the notices sent on them, people's Slack and email links, and the
keys used once (replayed Slack payloads, single-use email links)."""

# History's filters and search. Each filter has an index in the page's order, so a page
# reads about as many rows as it shows, however many requests there are. The search text is
# lower-cased; each store indexes it its own way (SQLite FTS5, PostgreSQL pg_trgm).
HISTORY_COLUMNS = """
ALTER TABLE requests ADD COLUMN decided_by TEXT;
ALTER TABLE requests ADD COLUMN search TEXT;
"""
"""Who decided each request, and the text a search looks in (filled by each dialect)."""

HISTORY_INDEXES = """
CREATE INDEX requests_decider ON requests (decided_by, created_us DESC, id DESC);
CREATE INDEX requests_tool ON requests (tool_name, created_us DESC, id DESC);
CREATE INDEX requests_ended ON requests (created_us DESC, id DESC) WHERE status <> 'pending';
"""
"""The filters' indexes: by person, by tool, and every request that is no longer pending."""


def for_dialect(*fragments: str, key: str, big: str) -> str:
    """``fragments`` joined into one migration, with the dialect's id and integer types."""
    return "".join(fragments).format(key=key, big=big)
