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

# The search text of the requests stored before, as signoff.store.search.search_text
# makes it (lower() folds ASCII only here; a NUL read as a space), and the trigram index
# over it: a contentless FTS5 table whose rowids number the requests in the order they
# were stored (request_search), so a search's newest matches come first without sorting
# them all.
_SEARCH = """
UPDATE requests SET
    decided_by = json_extract(data, '$.decision.decided_by'),
    search = lower(CASE kind
        WHEN 'approval' THEN tool_name || (
            SELECT coalesce(group_concat(' ' || key || ' ' || CASE type
                WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'null' THEN 'null'
                ELSE value END, ''), '')
            FROM json_each(replace(data, '\\u0000', '\\u0020'), '$.tool_args'))
        WHEN 'choice' THEN json_extract(replace(data, '\\u0000', '\\u0020'), '$.prompt') || (
            SELECT coalesce(group_concat(' ' || value, ''), '')
            FROM json_each(replace(data, '\\u0000', '\\u0020'), '$.options'))
        ELSE coalesce(json_extract(replace(data, '\\u0000', '\\u0020'), '$.prompt'), '') || (
            SELECT coalesce(group_concat(' ' || json_extract(value, '$.text'), ''), '')
            FROM json_each(replace(data, '\\u0000', '\\u0020'), '$.questions'))
    END);
CREATE TABLE request_search (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE
);
CREATE VIRTUAL TABLE requests_fts USING fts5(search, content='', tokenize='trigram');
INSERT INTO request_search (id) SELECT id FROM requests ORDER BY created_us, id;
INSERT INTO requests_fts (rowid, search)
    SELECT s.seq, r.search FROM request_search s JOIN requests r ON r.id = s.id;
"""
_HISTORY = "".join((ddl.HISTORY_COLUMNS, _SEARCH, ddl.HISTORY_INDEXES))

# The grants version: every write that stores a grant moves it on, and a new request decided
# against grants read at one version is stored only while it still holds (Write's
# grants_version), so the grants a server keeps read are never used once one changed.
_GRANTS_VERSION = """
CREATE TABLE grants_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO grants_version (id, version) VALUES (1, 0);
"""

MIGRATIONS: tuple[str, ...] = (
    _INITIAL,
    _WEBHOOKS,
    _TASKS,
    _SESSIONS,
    ddl.CALL_PER_REQUESTER,
    _NOTIFY,
    _HISTORY,
    _GRANTS_VERSION,
)
"""Migration N is ``MIGRATIONS[N - 1]``."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The version this code writes."""
