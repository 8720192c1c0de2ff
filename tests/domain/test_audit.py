"""The audit chain: honest logs verify; edits, deletions, reordering and truncation do not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from signoff.domain.audit import (
    GENESIS_HASH,
    Anchor,
    AuditDraft,
    AuditEntry,
    LogCoverage,
    committed_entry,
    entry_hash,
    parse_anchor,
    verify_chain,
    verify_log,
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


def covered(entries: list[AuditEntry], **over: object) -> LogCoverage:
    """The coverage of a store whose requests and events all have their entries."""
    fields: dict[str, object] = {
        "requests": len(entries),
        "events": len(entries),
        "first_event_seq": 1 if entries else None,
        "last_event_seq": len(entries) or None,
    }
    return LogCoverage.model_validate({**fields, **over})


def test_whole_log_verifies_with_and_without_an_anchor() -> None:
    """An honest log verifies, against an anchor taken at any earlier point too."""
    entries = chain(5)
    assert verify_log(entries, head=head(entries), coverage=covered(entries)).ok
    assert verify_log([], head=None, coverage=covered([])).ok
    for anchor in (Anchor(seq=0, hash=GENESIS_HASH), Anchor(seq=3, hash=entries[2].hash)):
        report = verify_log(entries, head=head(entries), coverage=covered(entries), anchor=anchor)
        assert report.ok and report.anchor == str(anchor)


def test_missing_head_with_entries_fails() -> None:
    """A log with entries and no head kept beside it fails: truncation would not show."""
    entries = chain(5)
    report = verify_log(entries[:3], head=None, coverage=covered(entries[:3]))
    assert not report.ok and "head" in (report.problem or "") and report.first_bad_seq is None


def test_head_rolled_back_under_later_entries_fails() -> None:
    """A head that names an earlier entry than the log's last fails."""
    entries = chain(5)
    report = verify_log(entries, head=head(entries[:3]), coverage=covered(entries))
    assert not report.ok and "head says 3" in (report.problem or "")


def test_first_entries_deleted_fails() -> None:
    """Deleting the first entries (the oldest) fails at entry 1."""
    entries = chain(5)
    report = verify_log(entries[2:], head=head(entries), coverage=covered(entries))
    assert not report.ok and report.first_bad_seq == 1


def test_requests_without_their_submit_entry_fail() -> None:
    """A store with requests but an empty (or short) log fails, naming a request."""
    report = verify_log(
        [], head=None, coverage=LogCoverage(requests=2, events=0, unaudited_requests=("req_a",))
    )
    assert not report.ok and "req_a" in (report.problem or "")
    assert "0 entries for 2 requests" in (report.problem or "")


def test_deleted_request_and_orphan_events_fail() -> None:
    """A submit entry whose request is gone, or an event of an unaudited request, fails."""
    entries = chain(3)
    gone = covered(entries, unknown_requests=("req_2",))
    report = verify_log(entries, head=head(entries), coverage=gone)
    assert not report.ok and "req_2" in (report.problem or "")
    orphan = covered(entries, orphan_events=(7,))
    report = verify_log(entries, head=head(entries), coverage=orphan)
    assert not report.ok and "event 7" in (report.problem or "")


def test_event_log_gaps_fail() -> None:
    """Events missing from the start, middle or end (by the event head, or by a request
    whose current version no event carries) fail."""
    entries = chain(3)
    for over in (
        {"events": 3, "first_event_seq": 2, "last_event_seq": 4},
        {"events": 3, "first_event_seq": 1, "last_event_seq": 4},
        {"events": 3, "first_event_seq": 1, "last_event_seq": 3, "event_head": 5},
        {"unannounced_requests": ("req_3",)},
    ):
        report = verify_log(entries, head=head(entries), coverage=covered(entries, **over))
        assert not report.ok and "event" in (report.problem or ""), over


def test_rehashed_log_passes_alone_but_fails_its_anchor() -> None:
    """A log rewritten and re-hashed from entry 2 on verifies (the documented limit) but
    fails against an anchor taken before, and one past its end fails too."""
    honest = chain(5)
    anchor = Anchor(seq=4, hash=honest[3].hash)
    rewritten = [honest[0]]
    for old in honest[2:]:  # entry 2 dropped, the rest renumbered and re-hashed
        seq, prev = len(rewritten) + 1, rewritten[-1].hash
        digest = entry_hash(prev_hash=prev, seq=seq, at=old.at, draft=old)
        rewritten.append(committed_entry(old, seq=seq, at=old.at, prev_hash=prev, hash=digest))
    coverage = covered(rewritten)
    assert verify_log(rewritten, head=head(rewritten), coverage=coverage).ok
    report = verify_log(rewritten, head=head(rewritten), coverage=coverage, anchor=anchor)
    assert not report.ok and report.first_bad_seq == 4 and "anchored" in (report.problem or "")
    past = Anchor(seq=5, hash=honest[4].hash)
    report = verify_log(rewritten, head=head(rewritten), coverage=coverage, anchor=past)
    assert not report.ok and "only 4 entries" in (report.problem or "")


def test_anchor_text_round_trips_and_bad_forms_are_refused() -> None:
    """SEQ:HASH parses back to the anchor; anything else is a ValueError naming the form."""
    anchor = Anchor(seq=12, hash="ab" * 32)
    assert parse_anchor(str(anchor)) == anchor
    assert parse_anchor(f" 0:{GENESIS_HASH}\n") == Anchor(seq=0, hash=GENESIS_HASH)
    for bad in (
        "",
        "12",
        "12:" + "AB" * 32,
        "-1:" + "ab" * 32,
        "01:" + "ab" * 32,
        "12:" + "ab" * 31,
        "0:" + "ab" * 32,
        "1" * 30 + ":" + "ab" * 32,
    ):
        with pytest.raises(ValueError, match="anchor"):
            parse_anchor(bad)
