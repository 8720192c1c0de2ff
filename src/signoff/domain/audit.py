"""The audit log: an append-only, hash-chained record of every transition.

Each entry's hash covers its own fields and the previous entry's hash, so editing,
deleting or reordering any entry breaks every hash after it. The store also keeps the
chain's head (last seq and hash) beside the log, so removing entries from the end is
caught too.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel, ConfigDict, JsonValue

from signoff.domain.jsoncanon import canonical_json, sha256_hex

__all__ = [
    "GENESIS_HASH",
    "AuditDraft",
    "AuditEntry",
    "ChainReport",
    "committed_entry",
    "entry_hash",
    "verify_chain",
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
    header = {
        "seq": seq,
        "at": at.isoformat(),
        "action": draft.action,
        "actor": draft.actor,
        "request_id": draft.request_id,
        "from_status": draft.from_status,
        "to_status": draft.to_status,
    }
    if details_json is None:
        details_json = canonical_json(draft.details)
    return sha256_hex(prev_hash + "\n" + canonical_json(header) + "\n" + details_json)


def committed_entry(
    draft: AuditDraft, *, seq: int, at: datetime, prev_hash: str, hash: str
) -> AuditEntry:
    """The entry ``draft`` becomes once numbered and chained (built without re-validating)."""
    return AuditEntry.model_construct(
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
    """The first entry that fails (for a truncated chain: the first missing one)."""
    problem: str | None = None
    """What is wrong with it."""


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
