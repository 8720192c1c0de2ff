"""The PostgreSQL schema, as an ordered list of migrations applied when a store opens.

Migration N takes a schema at version N-1 to version N; the one row of ``schema_version``
says where a database is. Never edit a released migration: add the next one.

Records are kept as the JSON text their model dumps (``data``), with the columns queries
filter and sort on beside it; timestamps that are sorted on are microseconds since the
epoch (``*_us``), timestamps that are hashed or replayed keep their exact ISO text. Ids
sort bytewise (``COLLATE "C"``), as in SQLite and Python, whatever the database's locale,
so keyset pages break ties the same way on every backend.

The tables both stores create alike are written once, in :mod:`signoff.store.ddl`.
"""

from __future__ import annotations

from signoff.store import ddl

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

_KEY = 'TEXT COLLATE "C"'
_BIG = "BIGINT"

_LOG_HEAD_AND_WEBHOOKS = """
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
"""

_INITIAL = ddl.for_dialect(
    ddl.REQUESTS,
    ddl.GRANTS_TOKENS_AUDIT,
    ddl.EVENTS,
    _LOG_HEAD_AND_WEBHOOKS,
    ddl.TASKS,
    key=_KEY,
    big=_BIG,
)
_SESSIONS = ddl.for_dialect(ddl.SESSIONS, key=_KEY, big=_BIG)
_NOTIFY = ddl.for_dialect(ddl.NOTIFY, key=_KEY, big=_BIG)

# The search text of the requests stored before, as signoff.store.search.search_text
# makes it (a NUL, which PostgreSQL's text cannot hold, read as a space), and a pg_trgm
# GIN index over it that serves LIKE '%word%'. pg_trgm is a trusted extension
# (PostgreSQL 13+): a database owner may create it; where it cannot be created, searches
# still work, reading rows in the page's order instead of using the index.
_SEARCH = """
UPDATE requests r SET
    decided_by = s.j -> 'decision' ->> 'decided_by',
    search = lower(CASE r.kind
        WHEN 'approval' THEN r.tool_name || coalesce((
            SELECT string_agg(' ' || a.key || ' ' || coalesce(a.value, 'null'), '')
            FROM json_each_text(s.j -> 'tool_args') a), '')
        WHEN 'choice' THEN (s.j ->> 'prompt') || coalesce((
            SELECT string_agg(' ' || o, '')
            FROM json_array_elements_text(s.j -> 'options') o), '')
        ELSE coalesce(s.j ->> 'prompt', '') || coalesce((
            SELECT string_agg(' ' || (q ->> 'text'), '')
            FROM json_array_elements(s.j -> 'questions') q), '')
    END)
FROM (SELECT id, replace(data, '\\u0000', '\\u0020')::json AS j FROM requests) s
WHERE s.id = r.id;
DO $$
DECLARE
    home TEXT;
BEGIN
    BEGIN
        CREATE EXTENSION IF NOT EXISTS pg_trgm;
    EXCEPTION WHEN OTHERS THEN
        RAISE NOTICE 'pg_trgm is not available: searches read rows unindexed';
    END;
    SELECT n.nspname INTO home FROM pg_extension e
        JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
    IF home IS NOT NULL THEN
        EXECUTE format(
            'CREATE INDEX requests_search ON requests USING gin (search %I.gin_trgm_ops)', home
        );
    END IF;
END $$;
"""
_HISTORY = "".join((ddl.HISTORY_COLUMNS, _SEARCH, ddl.HISTORY_INDEXES))

MIGRATIONS: tuple[str, ...] = (_INITIAL, _SESSIONS, ddl.CALL_PER_REQUESTER, _NOTIFY, _HISTORY)
"""Migration N is ``MIGRATIONS[N - 1]``."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The version this code writes."""
