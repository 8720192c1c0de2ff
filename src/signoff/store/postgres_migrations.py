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

__all__ = ["GRANTS_CHANGED", "MIGRATIONS", "SCHEMA_VERSION"]

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

# Appending to the logs inside the database, so the transaction that holds ``log_head``
# never waits on a client: the lock is taken, the audit entries chained and numbered, the
# events numbered, the rows stored, the head moved and the listeners notified in one call,
# in the same statement (and, for a write that only stores its request, the same implicit
# transaction) as the write's own rows. Each entry's hash is sha256 of the hash before it,
# a newline, ``head || seq || tail`` and nothing else: the client sends the canonical JSON
# header around the seq it cannot know yet (``head`` ends with ``"seq":``, ``tail`` holds the
# keys after it, a newline and the canonical details), exactly what
# signoff.domain.audit.entry_hash hashes, so the chain verifies as before.
_APPEND_IN_DATABASE = """
CREATE FUNCTION signoff_append(
    stamp TEXT,
    genesis TEXT,
    audit_request_ids TEXT[],
    actions TEXT[],
    actors TEXT[],
    from_statuses TEXT[],
    to_statuses TEXT[],
    details TEXT[],
    heads TEXT[],
    tails TEXT[],
    event_types TEXT[],
    event_request_ids TEXT[],
    event_data TEXT[],
    channel TEXT,
    OUT first_audit_seq BIGINT,
    OUT first_prev_hash TEXT,
    OUT first_event_seq BIGINT,
    OUT hashes TEXT[]
) LANGUAGE plpgsql AS $$
DECLARE
    entries INTEGER := coalesce(array_length(actions, 1), 0);
    events INTEGER := coalesce(array_length(event_types, 1), 0);
    head_seq BIGINT;
    head_hash TEXT;
    head_event BIGINT;
    prev TEXT;
    digest TEXT;
BEGIN
    SELECT h.audit_seq, h.audit_hash, h.event_seq INTO head_seq, head_hash, head_event
        FROM log_head h WHERE h.id = 1 FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the log_head row is missing: the schema was damaged';
    END IF;
    first_audit_seq := head_seq + 1;
    first_prev_hash := coalesce(head_hash, genesis);
    first_event_seq := head_event + 1;
    hashes := ARRAY[]::TEXT[];
    prev := first_prev_hash;
    FOR n IN 1 .. entries LOOP
        digest := encode(sha256(convert_to(
            prev || E'\n' || heads[n] || (head_seq + n)::TEXT || tails[n], 'UTF8')), 'hex');
        INSERT INTO audit (seq, request_id, at, action, actor, from_status, to_status,
                           details, prev_hash, hash)
            VALUES (head_seq + n, audit_request_ids[n], stamp, actions[n], actors[n],
                    from_statuses[n], to_statuses[n], details[n], prev, digest);
        hashes := hashes || digest;
        prev := digest;
    END LOOP;
    IF events > 0 THEN
        INSERT INTO events (seq, type, at, request_id, data)
            SELECT head_event + e.n, e.type, stamp, e.request_id, e.data
            FROM unnest(event_types, event_request_ids, event_data)
                WITH ORDINALITY AS e(type, request_id, data, n);
    END IF;
    UPDATE log_head SET audit_seq = head_seq + entries,
        audit_hash = CASE WHEN entries > 0 THEN prev ELSE audit_hash END,
        event_seq = head_event + events
        WHERE id = 1;
    IF events > 0 THEN
        PERFORM pg_notify(channel, (head_event + events)::TEXT);
    END IF;
END
$$;
"""

# The NOTIFY carries the events themselves when they fit, so a server following the others
# publishes their commits without reading each one back: the last seq on the first line
# (what the payload alone held before), the schema the log is in on the second (several
# schemas of one database share the channel: a follower takes only its own log's events),
# the stamp on the third, then one line per event, its type, a tab and its data. The data
# is one line of JSON, whose strings escape every newline and tab. Past 7,900 bytes
# (PostgreSQL refuses a payload of 8,000) the payload is the seq alone and the followers
# read the log. The rest of the function is unchanged: the same rows, the same hashes.
_NOTIFY_SEQ = """    IF events > 0 THEN
        PERFORM pg_notify(channel, (head_event + events)::TEXT);
    END IF;
"""
_NOTIFY_EVENTS = """    IF events > 0 THEN
        payload := (head_event + events)::TEXT || E'\\n' || coalesce(current_schema(), '')
            || E'\\n' || stamp || E'\\n' || array_to_string(
            ARRAY(SELECT e.type || E'\\t' || e.data
                  FROM unnest(event_types, event_data) WITH ORDINALITY AS e(type, data, n)
                  ORDER BY e.n),
            E'\\n');
        IF octet_length(payload) > 7900 THEN
            payload := (head_event + events)::TEXT;
        END IF;
        PERFORM pg_notify(channel, payload);
    END IF;
"""
_CARRY_EVENTS_IN_NOTIFY = (
    _APPEND_IN_DATABASE.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
    .replace("    digest TEXT;\n", "    digest TEXT;\n    payload TEXT;\n", 1)
    .replace(_NOTIFY_SEQ, _NOTIFY_EVENTS, 1)
)

# The grants version, on the head row every write that appends locks: every write that
# stores a grant moves it on, and a new request decided against grants read at one version
# is stored only while it still holds (Write's grants_version). Its insert reads the version
# through the head's lock, so it sees the last committed one even after waiting for a
# write that moved it; on a mismatch it raises GRANTS_CHANGED (signoff_grants_changed).
GRANTS_CHANGED = "SGN01"
"""The SQLSTATE a stale grants version fails a request's insert with."""

_GRANTS_VERSION = f"""
ALTER TABLE log_head ADD COLUMN grants_version BIGINT NOT NULL DEFAULT 0;
CREATE FUNCTION signoff_grants_changed() RETURNS TEXT LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the standing grants changed since they were read'
        USING ERRCODE = '{GRANTS_CHANGED}';
END
$$;
"""

# The events ride in the NOTIFY only for other processes' followers: a server alone on its
# database (its own follower needs the seq alone: its service publishes its own commits)
# sent every commit's events to nobody, 3-4% of a pause and resume. ``carry`` says whether
# any other follower listens, as the writer's follower last counted them
# (signoff.bus.postgres); a follower that finds the events missing reads the log, as
# before, so it decides only the cost.
_NOTIFY_CARRIED = """    IF events > 0 THEN
        payload := (head_event + events)::TEXT;
        IF carry THEN
            payload := payload || E'\\n' || coalesce(current_schema(), '')
                || E'\\n' || stamp || E'\\n' || array_to_string(
                ARRAY(SELECT e.type || E'\\t' || e.data
                      FROM unnest(event_types, event_data) WITH ORDINALITY AS e(type, data, n)
                      ORDER BY e.n),
                E'\\n');
            IF octet_length(payload) > 7900 THEN
                payload := (head_event + events)::TEXT;
            END IF;
        END IF;
        PERFORM pg_notify(channel, payload);
    END IF;
"""
_CARRY_ONLY_FOR_OTHERS = (
    "DROP FUNCTION signoff_append(TEXT, TEXT, "
    + "TEXT[], " * 11
    + "TEXT);\n"
    + _CARRY_EVENTS_IN_NOTIFY.replace("CREATE OR REPLACE FUNCTION", "CREATE FUNCTION", 1)
    .replace("    channel TEXT,\n", "    channel TEXT,\n    carry BOOLEAN,\n", 1)
    .replace(_NOTIFY_EVENTS, _NOTIFY_CARRIED, 1)
)

# A server alone on its database NOTIFYs nobody: its own follower learns of its commits
# from its store, in the process (PostgresStore.tell_commits). A NOTIFY whose only listener
# was that follower cost PostgreSQL a signal, a wake-up and a message at every commit, and
# the server a read of it: one agent through a server ran 3-4% more lifecycles a second
# without them, on 8% less of PostgreSQL's CPU (bench/RESULTS.md). ``carry`` now says
# whether to NOTIFY at all (another process's follower listens, or the writer has no
# follower to count them); the payload is as before. A follower that starts reads the log
# once more after the others have had time to count it, and every poll interval, so the
# commits a server made before it counted the newcomer reach it all the same.
_NOTIFY_FOR_OTHERS = _NOTIFY_EVENTS.replace("IF events > 0 THEN", "IF events > 0 AND carry THEN", 1)
_NOTIFY_ONLY_FOR_OTHERS = (
    _CARRY_ONLY_FOR_OTHERS.split(";\n", 1)[1]
    .replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
    .replace(_NOTIFY_CARRIED, _NOTIFY_FOR_OTHERS, 1)
)

MIGRATIONS: tuple[str, ...] = (
    _INITIAL,
    _SESSIONS,
    ddl.CALL_PER_REQUESTER,
    _NOTIFY,
    _HISTORY,
    _APPEND_IN_DATABASE,
    _CARRY_EVENTS_IN_NOTIFY,
    _GRANTS_VERSION,
    _CARRY_ONLY_FOR_OTHERS,
    _NOTIFY_ONLY_FOR_OTHERS,
)
"""Migration N is ``MIGRATIONS[N - 1]``."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The version this code writes."""
