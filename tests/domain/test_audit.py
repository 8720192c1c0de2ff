"""The audit chain: honest logs verify; edits, deletions, reordering and truncation do not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from signoff.domain.audit import (
    GENESIS_HASH,
    AuditDraft,
    AuditEntry,
    committed_entry,
    entry_hash,
    verify_chain,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def chain(n: int) -> list[AuditEntry]:
    """An honest chain of ``n`` entries."""
    entries, prev = [], GENESIS_HASH
    for seq in range(1, n + 1):
        draft = AuditDraft(
            action="decide", actor=f"user{seq}", request_id=f"req_{seq}", details={"n": seq}
        )
        at = T0 + timedelta(seconds=seq)
        digest = entry_hash(prev_hash=prev, seq=seq, at=at, draft=draft)
        entries.append(committed_entry(draft, seq=seq, at=at, prev_hash=prev, hash=digest))
        prev = digest
    return entries


def head(entries: list[AuditEntry]) -> tuple[int, str]:
    """The head a store would keep for these entries."""
    return entries[-1].seq, entries[-1].hash


def test_honest_chain_verifies() -> None:
    """An untouched chain verifies, with and without its head."""
    entries = chain(5)
    assert verify_chain(entries, head=head(entries)).ok
    assert verify_chain([]).ok


def test_edited_entry_is_named() -> None:
    """Changing any field of an entry fails verification at that entry."""
    entries = chain(5)
    entries[2] = entries[2].model_copy(update={"actor": "mallory"})
    report = verify_chain(entries, head=head(chain(5)))
    assert not report.ok and report.first_bad_seq == 3 and "edited" in (report.problem or "")
    details = chain(5)
    details[1] = details[1].model_copy(update={"details": {"n": 99}})
    assert verify_chain(details).first_bad_seq == 2


def test_deleted_entry_is_named() -> None:
    """Removing an entry from the middle fails at the gap."""
    entries = chain(5)
    del entries[1]
    report = verify_chain(entries)
    assert not report.ok and report.first_bad_seq == 2


def test_reordered_entries_are_caught() -> None:
    """Swapping two entries fails verification."""
    entries = chain(5)
    entries[1], entries[2] = entries[2], entries[1]
    report = verify_chain(entries)
    assert not report.ok and report.first_bad_seq == 2


def test_rewritten_tail_with_recomputed_hashes_is_caught_by_the_head() -> None:
    """Truncating the tail is caught by the head kept beside the log."""
    entries = chain(5)
    report = verify_chain(entries[:3], head=head(entries))
    assert not report.ok and report.first_bad_seq == 4


def test_relinked_forgery_breaks_at_the_first_changed_entry() -> None:
    """Even re-hashing a changed entry breaks the link to the next one."""
    entries = chain(4)
    forged_draft = AuditDraft(action="decide", actor="mallory", request_id="req_2", details={})
    forged_hash = entry_hash(prev_hash=entries[0].hash, seq=2, at=entries[1].at, draft=forged_draft)
    entries[1] = committed_entry(
        forged_draft, seq=2, at=entries[1].at, prev_hash=entries[0].hash, hash=forged_hash
    )
    report = verify_chain(entries)
    assert not report.ok and report.first_bad_seq == 3
