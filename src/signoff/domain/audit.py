"""The audit log: an append-only, hash-chained record of every transition.

Each entry's hash covers its own fields and the previous entry's hash, so editing,
deleting or reordering any entry breaks every hash after it. The store also keeps the
chain's head (last seq and hash) beside the log, so removing entries from the end is
caught too, and :func:`verify_log` checks the log against the rest of the store: every
request has its ``submit`` entry, every event concerns an audited request, and the event
log has no gaps.

What no check of the database alone can catch: someone with write access who rewrites
the log and re-hashes every entry after the change, and the head with it. An
:class:`Anchor` (the seq and hash of an entry, kept outside the database) catches that:
the log must still hold that very entry, so any rewrite at or before it shows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict, JsonValue

from signoff.domain.built import built
from signoff.domain.jsoncanon import canonical_json, sha256_hex

__all__ = [
    "GENESIS_HASH",
    "Anchor",
    "AuditDraft",
    "AuditEntry",
    "ChainReport",
    "LogCoverage",
    "committed_entry",
    "entry_hash",
    "fields_hash",
    "parse_anchor",
    "verify_chain",
    "verify_log",
]

GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of the first entry."""


class AuditDraft(BaseModel):
    """An entry a write wants appended; the store numbers, times and chains it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: str
    """What happened: ``submit``, ``vote``, ``decide``, ``expire``, ``cancel``, ``claim``,
    ``complete``, ``fail``, ``grant.create``, ``grant.revoke``, ``token.create``..."""
    actor: str
    """Who did it (principal name, or ``policy``, ``grant``, ``expiry``)."""
    request_id: str | None = None
    """The request it concerns, if any."""
    from_status: str | None = None
    """Status before."""
    to_status: str | None = None
    """Status after."""
    details: dict[str, JsonValue] = {}
    """What the actor saw and what ran: tool, args, digests, decision, grant, result."""


class AuditEntry(AuditDraft):
    """A committed audit entry."""

    seq: int
    """Position in the chain, from 1 with no gaps."""
    at: datetime
    """When it was appended."""
    prev_hash: str
    """Hash of the entry before (``GENESIS_HASH`` for the first)."""
    hash: str
    """sha256 of ``prev_hash`` and this entry's fields."""


def entry_hash(
    *, prev_hash: str, seq: int, at: datetime, draft: AuditDraft, details_json: str | None = None
) -> str:
    """The hash an entry with these fields must carry.

    ``details_json`` is ``canonical_json(draft.details)``, passed in when the caller has it.
    """
    if details_json is None:
        details_json = canonical_json(draft.details)
    return fields_hash(
        prev_hash,
        seq,
        at.isoformat(),
        (draft.action, draft.actor, draft.request_id, draft.from_status, draft.to_status),
        details_json,
    )


def fields_hash(
    prev_hash: str,
    seq: int,
    at: str,
    fields: tuple[str, str, str | None, str | None, str | None],
    details_json: str,
) -> str:
    """:func:`entry_hash` from plain values: ``at`` in ISO form, ``fields`` the draft's
    action, actor, request id and statuses from and to (what a writer process is handed)."""
    action, actor, request_id, from_status, to_status = fields
    header = {
        "seq": seq,
        "at": at,
        "action": action,
        "actor": actor,
        "request_id": request_id,
        "from_status": from_status,
        "to_status": to_status,
    }
    return sha256_hex(prev_hash + "\n" + canonical_json(header) + "\n" + details_json)


def committed_entry(
    draft: AuditDraft, *, seq: int, at: datetime, prev_hash: str, hash: str
) -> AuditEntry:
    """The entry ``draft`` becomes once numbered and chained (built without re-validating)."""
    return built(
        AuditEntry,
        action=draft.action,
        actor=draft.actor,
        request_id=draft.request_id,
        from_status=draft.from_status,
        to_status=draft.to_status,
        details=draft.details,
        seq=seq,
        at=at,
        prev_hash=prev_hash,
        hash=hash,
    )


class ChainReport(BaseModel):
    """The outcome of verifying the audit chain."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    """Whether every entry checks out."""
    entries: int
    """How many entries were read."""
    first_bad_seq: int | None = None
    """The first entry that fails (for a truncated chain: the first missing one); None
    when what fails is not one entry (a missing head, a request without its entries)."""
    problem: str | None = None
    """What is wrong."""
    anchor: str | None = None
    """The anchor (``SEQ:HASH``) the log was checked against, if one was given."""


def verify_chain(
    entries: Iterable[AuditEntry], *, head: tuple[int, str] | None = None
) -> ChainReport:
    """Check ``entries`` (in stored order) link up, and end at ``head`` (seq, hash) if given."""
    prev = GENESIS_HASH
    expected_seq = 1
    count = 0
    for entry in entries:
        count += 1
        if entry.seq != expected_seq:
            return ChainReport(
                ok=False,
                entries=count,
                first_bad_seq=min(entry.seq, expected_seq),
                problem=f"expected entry {expected_seq} here, found entry {entry.seq}: "
                "entries were deleted or reordered",
            )
        if entry.prev_hash != prev:
            return ChainReport(
                ok=False,
                entries=count,
                first_bad_seq=entry.seq,
                problem="its prev_hash does not match the entry before: the chain was cut",
            )
        if entry_hash(prev_hash=prev, seq=entry.seq, at=entry.at, draft=entry) != entry.hash:
            return ChainReport(
                ok=False,
                entries=count,
                first_bad_seq=entry.seq,
                problem="its content does not match its hash: the entry was edited",
            )
        prev = entry.hash
        expected_seq += 1
    if head is not None:
        head_seq, head_hash = head
        if head_seq != expected_seq - 1 or head_hash != prev:
            return ChainReport(
                ok=False,
                entries=count,
                first_bad_seq=expected_seq if head_seq >= expected_seq else head_seq,
                problem=f"the chain head says {head_seq} entries, the log ends at "
                f"{expected_seq - 1}: entries were removed from the end or the head was edited",
            )
    return ChainReport(ok=True, entries=count)


_ANCHOR = re.compile(r"(0|[1-9][0-9]{0,17}):([0-9a-f]{64})")


class Anchor(BaseModel):
    """An entry's position and hash, written down outside the database to check it later."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int
    """The entry's seq, which is also how many entries the log had (0: the empty log)."""
    hash: str
    """The entry's hash (``GENESIS_HASH`` for the empty log)."""

    def __str__(self) -> str:
        return f"{self.seq}:{self.hash}"


def parse_anchor(text: str) -> Anchor:
    """Read an anchor written as ``SEQ:HASH``; ValueError names the form otherwise."""
    match = _ANCHOR.fullmatch(text.strip())
    if match is None:
        raise ValueError(
            f"not an audit anchor: {text[:80]!r}; expected SEQ:HASH, as signoff audit anchor "
            "prints it (a number, a colon, 64 lowercase hex digits)"
        )
    seq, digest = int(match.group(1)), match.group(2)
    if seq == 0 and digest != GENESIS_HASH:
        raise ValueError(f"the anchor of the empty log is 0:{GENESIS_HASH}")
    return Anchor(seq=seq, hash=digest)


class LogCoverage(BaseModel):
    """What the rest of the store holds that the audit log must account for.

    Id and seq lists are samples (the store returns the first few), enough to name them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests: int
    """How many requests the store holds."""
    unaudited_requests: tuple[str, ...] = ()
    """Requests the store holds whose ``submit`` entry is not in the audit log."""
    unknown_requests: tuple[str, ...] = ()
    """Requests the audit log records as submitted that the store no longer holds."""
    events: int
    """How many events the event log holds."""
    first_event_seq: int | None = None
    """The lowest event seq (None: no events)."""
    last_event_seq: int | None = None
    """The highest event seq (None: no events)."""
    event_head: int | None = None
    """The last event seq the store says it handed out, where it keeps one beside the log."""
    orphan_events: tuple[int, ...] = ()
    """Events whose request has no ``submit`` entry in the audit log."""
    unannounced_requests: tuple[str, ...] = ()
    """Requests with no event carrying their stored version: every write to a request
    appends an event with the new version, so their newest events were deleted."""


def verify_log(
    entries: Sequence[AuditEntry],
    *,
    head: tuple[int, str] | None,
    coverage: LogCoverage,
    anchor: Anchor | None = None,
) -> ChainReport:
    """Check the whole log: the chain, its head, an anchor if given, and its coverage.

    ``entries`` is the whole log in stored order; ``head`` the (seq, hash) kept beside it,
    None when the store has none.
    """
    named = str(anchor) if anchor is not None else None
    count = len(entries)

    def broken(problem: str, seq: int | None = None) -> ChainReport:
        return ChainReport(
            ok=False, entries=count, first_bad_seq=seq, problem=problem, anchor=named
        )

    if head is None and count:
        return broken(
            f"the log has {count} entries but the chain head kept beside it is missing: "
            "the head was deleted, so entries removed from the end would not show"
        )
    report = verify_chain(entries, head=head)
    if not report.ok:
        return report.model_copy(update={"anchor": named})
    if anchor is not None:
        if anchor.seq > count:
            return broken(
                f"the anchor names entry {anchor.seq} but the log has only {count} entries: "
                "entries were removed and the log re-hashed",
                count + 1,
            )
        found = entries[anchor.seq - 1].hash if anchor.seq else GENESIS_HASH
        if found != anchor.hash:
            return broken(
                f"entry {anchor.seq} no longer has the anchored hash: the log was rewritten "
                f"at or before entry {anchor.seq} and re-hashed",
                anchor.seq,
            )
    if coverage.unaudited_requests:
        return broken(
            f"request {coverage.unaudited_requests[0]} has no submit entry in the audit log "
            f"({count} entries for {coverage.requests} requests): its entries were deleted"
        )
    if coverage.unknown_requests:
        return broken(
            f"the audit log records request {coverage.unknown_requests[0]} being submitted, "
            "but the store no longer holds it: the request was deleted"
        )
    if coverage.orphan_events:
        return broken(
            f"event {coverage.orphan_events[0]} concerns a request with no submit entry in "
            "the audit log: audit entries were deleted"
        )
    first, last = coverage.first_event_seq, coverage.last_event_seq
    if coverage.events and (first != 1 or last is None or last - first + 1 != coverage.events):
        return broken(
            f"the event log holds {coverage.events} events numbered {first} to {last}: "
            "events were deleted"
        )
    if coverage.event_head is not None and coverage.event_head != (last or 0):
        return broken(
            f"the event head says {coverage.event_head} events were written, the event log "
            f"ends at {last or 0}: events were removed from the end"
        )
    if coverage.unannounced_requests:
        return broken(
            f"request {coverage.unannounced_requests[0]} has no event with its current "
            "version: its newest events were deleted"
        )
    return ChainReport(ok=True, entries=count, anchor=named)
