"""Attack: someone with write access to the database deletes or rewrites audit history.

A real ``signoff serve`` files, decides, runs and reports requests; then the server is
stopped and its SQLite file is edited directly with sqlite3, as an intruder (or a careless
operator) would. ``signoff audit verify`` must then fail with a specific reason, and a
consistent rewrite that verify alone cannot see must fail against an anchor taken before.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.domain.audit import GENESIS_HASH, AuditDraft, entry_hash
from signoff.domain.principals import Principal
from signoff.server.app import API
from signoff.service import Service
from signoff.store.postgres import PostgresStore
from tests.conftest import pg_execute
from tests.serving import Server, agent_token, bearer, free_port, new_token, start_server


@dataclass(frozen=True)
class History:
    """A database a real server wrote, and what the test needs to know about it."""

    db: Path
    env: dict[str, str]
    requests: dict[str, str]
    """tool_call_id -> request id: c1 approved and not run, c2 rejected, c3 ran, c4 pending."""
    early_anchor: str
    """The anchor after the four submits, taken with the CLI while the server ran."""
    final_anchor: str
    """The anchor at the end, read over HTTP by an approver."""


def cli(db: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``signoff ARGS --db sqlite:///DB``."""
    return subprocess.run(
        [sys.executable, "-m", "signoff", *args, "--db", f"sqlite:///{db}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    """Four requests filed, decided, run and reported on a real server, which then stops."""
    home = tmp_path_factory.mktemp("audit_tamper")
    env = {**os.environ, "XDG_CONFIG_HOME": str(home), "COLUMNS": "200"}
    db = home / "serve.db"
    server = start_server(f"sqlite:///{db}", free_port(), env)
    try:
        assert server.admin_token is not None
        admin = bearer(server.admin_token)
        agent = bearer(agent_token(server))
        approver = bearer(new_token(server, "alice", "approver")[0])
        ids: dict[str, str] = {}
        with httpx.Client(base_url=server.base, timeout=30) as http:
            for call in ("c1", "c2", "c3", "c4"):
                body = {
                    "session_id": "s1",
                    "tool_name": "shell",
                    "tool_call_id": call,
                    "tool_args": {"cmd": f"echo {call}"},
                }
                ids[call] = _ok(http.post(f"{API}/requests", json=body, headers=agent))["id"]
            early = cli(db, env, "audit", "anchor")
            assert early.returncode == 0, early.stderr
            decide = f"{API}/requests/{{}}/decision"
            _ok(http.post(decide.format(ids["c1"]), json={"type": "approve"}, headers=admin))
            reject = {"type": "reject", "reason": "no"}
            _ok(http.post(decide.format(ids["c2"]), json=reject, headers=admin))
            _ok(http.post(decide.format(ids["c3"]), json={"type": "approve"}, headers=admin))
            claim = {"args": {"cmd": "echo c3"}}
            _ok(http.post(f"{API}/requests/{ids['c3']}/claim", json=claim, headers=agent))
            report = {"ok": True, "result": "c3"}
            _ok(http.post(f"{API}/requests/{ids['c3']}/result", json=report, headers=agent))
            final = _ok(http.get(f"{API}/audit/anchor", headers=approver))["anchor"]
    finally:
        server.stop()
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return History(db, env, ids, early.stdout.strip(), final)


@pytest.fixture
def copy(history: History, tmp_path: Path) -> History:
    """The history in a file of this test's own, to tamper with."""
    target = tmp_path / "serve.db"
    shutil.copyfile(history.db, target)
    return History(
        target, history.env, history.requests, history.early_anchor, history.final_anchor
    )


def tamper(h: History, *statements: str) -> None:
    """Edit the database directly, as someone with write access to the file would."""
    with sqlite3.connect(h.db) as conn:
        for statement in statements:
            conn.execute(statement)
    conn.close()


def rehash(h: History) -> None:
    """Renumber and re-hash every audit entry and the head, as a careful forger would."""
    with sqlite3.connect(h.db) as conn:
        rows = conn.execute(
            "SELECT request_id, at, action, actor, from_status, to_status, details "
            "FROM audit ORDER BY seq"
        ).fetchall()
        conn.execute("DELETE FROM audit")
        prev = GENESIS_HASH
        for seq, (request_id, at, action, actor, from_status, to_status, details) in enumerate(
            rows, start=1
        ):
            draft = AuditDraft(
                action=action,
                actor=actor,
                request_id=request_id,
                from_status=from_status,
                to_status=to_status,
                details=json.loads(details),
            )
            digest = entry_hash(
                prev_hash=prev,
                seq=seq,
                at=datetime.fromisoformat(at),
                draft=draft,
                details_json=details,
            )
            conn.execute(
                "INSERT INTO audit (seq, request_id, at, action, actor, from_status, to_status, "
                "details, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (seq, request_id, at, action, actor, from_status, to_status, details, prev, digest),
            )
            prev = digest
        conn.execute("DELETE FROM audit_head")
        conn.execute("INSERT INTO audit_head (id, seq, hash) VALUES (1, ?, ?)", (len(rows), prev))
        # the events too: renumbered without gaps
        seqs = [r[0] for r in conn.execute("SELECT seq FROM events ORDER BY seq")]
        for new, old in enumerate(seqs, start=1):
            conn.execute("UPDATE events SET seq = ? WHERE seq = ?", (new, old))
    conn.close()


def verify(h: History, *extra: str) -> subprocess.CompletedProcess[str]:
    """``signoff audit verify`` on the (tampered) database."""
    return cli(h.db, h.env, "audit", "verify", *extra)


def refused(done: subprocess.CompletedProcess[str], *phrases: str) -> None:
    """Verify failed with exit code 3 and one ``error:`` line containing ``phrases``."""
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])


def test_the_untouched_history_verifies_against_both_anchors(copy: History) -> None:
    """The honest database verifies, alone and against anchors taken along the way."""
    assert copy.early_anchor.startswith("7:") and copy.final_anchor.startswith("12:")
    for extra in ((), ("--anchor", copy.early_anchor), ("--anchor", copy.final_anchor)):
        done = verify(copy, *extra)
        assert done.returncode == 0, done.stderr
        assert "audit chain ok: 12 entries" in done.stdout


TAMPERING: dict[str, tuple[Callable[[History], list[str]], tuple[str, ...]]] = {
    "head row deleted": (
        lambda h: ["DELETE FROM audit_head"],
        ("chain head kept beside it is missing",),
    ),
    "head row and the newest entries deleted": (
        lambda h: ["DELETE FROM audit_head", "DELETE FROM audit WHERE seq > 9"],
        ("has 9 entries", "chain head kept beside it is missing"),
    ),
    "every audit row deleted": (
        lambda h: ["DELETE FROM audit_head", "DELETE FROM audit"],
        ("has no submit entry", "0 entries for 4 requests"),
    ),
    "head moved back under newer entries": (
        lambda h: [
            "UPDATE audit_head SET seq = 10, hash = (SELECT hash FROM audit WHERE seq = 10)"
        ],
        ("head says 10", "ends at 12"),
    ),
    "middle entry deleted": (
        lambda h: ["DELETE FROM audit WHERE seq = 9"],
        ("broken at entry 9", "expected entry 9 here, found entry 10"),
    ),
    "a request deleted, its audit entries kept": (
        lambda h: [
            f"DELETE FROM requests WHERE id = '{h.requests['c2']}'",
            f"DELETE FROM events WHERE request_id = '{h.requests['c2']}'",
        ],
        ("store no longer holds it", "{c2}"),
    ),
    "an event deleted from the middle": (
        lambda h: ["DELETE FROM events WHERE seq = 5"],
        ("holds 8 events numbered 1 to 9",),
    ),
    "the newest events cut from the end": (
        lambda h: ["DELETE FROM events WHERE seq > 7"],  # c3's claim and result
        ("request {c3} has no event with its current version",),
    ),
}


@pytest.mark.parametrize("case", list(TAMPERING))
def test_deletions_fail_verify_with_a_specific_reason(copy: History, case: str) -> None:
    """Each deletion makes verify exit 3 with one error line saying what is missing."""
    statements, phrases = TAMPERING[case]
    tamper(copy, *statements(copy))
    refused(verify(copy), *(p.format(**copy.requests) for p in phrases))


def test_oldest_entries_deleted_and_the_rest_rehashed_fails_on_the_requests(
    copy: History,
) -> None:
    """Deleting the first entries (three token.create, c1's submit) and re-hashing the rest
    still fails without an anchor: request c1 has no submit entry any more."""
    tamper(copy, "DELETE FROM audit WHERE seq <= 4")
    rehash(copy)
    refused(verify(copy), f"request {copy.requests['c1']} has no submit entry")


def test_a_request_whose_entries_and_row_are_deleted_leaves_orphan_events(
    copy: History,
) -> None:
    """A request removed with its audit entries (re-hashed) but its events kept fails."""
    c4 = copy.requests["c4"]
    tamper(
        copy,
        f"DELETE FROM audit WHERE request_id = '{c4}'",
        f"DELETE FROM requests WHERE id = '{c4}'",
    )
    rehash(copy)
    refused(verify(copy), "concerns a request with no submit entry")


def test_a_consistent_rewrite_passes_alone_but_fails_against_an_anchor(copy: History) -> None:
    """Erasing a rejected request everywhere and re-hashing is invisible to verify alone (the
    documented limit), but fails against either anchor taken before the rewrite."""
    c2 = copy.requests["c2"]
    tamper(
        copy,
        f"DELETE FROM audit WHERE request_id = '{c2}'",
        f"DELETE FROM requests WHERE id = '{c2}'",
        f"DELETE FROM events WHERE request_id = '{c2}'",
    )
    rehash(copy)
    alone = verify(copy)
    assert alone.returncode == 0 and "audit chain ok: 10 entries" in alone.stdout, alone.stderr
    refused(verify(copy, "--anchor", copy.final_anchor), "anchor names entry 12", "only 10")
    refused(
        verify(copy, "--anchor", copy.early_anchor),
        "broken at entry 7",
        "entry 7 no longer has the anchored hash",
    )
    refused(verify(copy, "--anchor", "7:not-a-hash"), "not an audit anchor")


def test_anchor_is_for_approvers_and_admins_and_verify_checks_it(server: Server) -> None:
    """GET /audit/anchor: 403 for an agent, the CLI's anchor for an approver; /audit/verify
    takes ?anchor=, fails a wrong hash, and refuses a malformed one with 422."""
    assert server.admin_token is not None
    admin = bearer(server.admin_token)
    agent = bearer(agent_token(server))
    approver = bearer(new_token(server, "alice", "approver")[0])
    with httpx.Client(base_url=server.base, timeout=30) as http:
        body = {"session_id": "s1", "tool_name": "shell", "tool_args": {}}
        _ok(http.post(f"{API}/requests", json=body, headers=agent))
        refused_agent = http.get(f"{API}/audit/anchor", headers=agent)
        assert refused_agent.status_code == 403 and refused_agent.json()["error"] == "NotAllowed"
        anchor = _ok(http.get(f"{API}/audit/anchor", headers=approver))
        assert anchor["anchor"] == f"{anchor['seq']}:{anchor['hash']}" and anchor["seq"] == 4
        local = server.cli("audit", "anchor", "--json")
        assert json.loads(local.stdout)["anchor"] == anchor["anchor"], local.stderr
        assert server.cli("audit", "anchor").stdout.strip() == anchor["anchor"]
        checked = _ok(http.get(f"{API}/audit/verify", params=anchor, headers=admin))
        assert checked["ok"] and checked["anchor"] == anchor["anchor"]
        wrong = {"anchor": f"{anchor['seq']}:{'ab' * 32}"}
        failed = _ok(http.get(f"{API}/audit/verify", params=wrong, headers=admin))
        assert not failed["ok"] and "anchored hash" in failed["problem"]
        bad = http.get(f"{API}/audit/verify", params={"anchor": "HEAD"}, headers=admin)
        assert bad.status_code == 422 and bad.json()["error"] == "InvalidRequest", bad.text
        assert http.get(f"{API}/audit/verify", params=anchor, headers=agent).status_code == 403


def test_serve_logs_the_anchor_periodically(tmp_path: Path) -> None:
    """serve --anchor-every writes SEQ:HASH lines to stderr that verify --anchor accepts."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200"}
    db = tmp_path / "serve.db"
    server = start_server(f"sqlite:///{db}", free_port(), env, "--anchor-every", "0.2")
    with httpx.Client(base_url=server.base, timeout=30) as http:
        body = {"session_id": "s1", "tool_name": "shell", "tool_args": {}}
        agent = bearer(agent_token(server))
        _ok(http.post(f"{API}/requests", json=body, headers=agent))
    time.sleep(1.0)
    server.process.terminate()
    _, err = server.process.communicate(timeout=20)
    lines = [line for line in err.splitlines() if line.startswith("signoff: audit anchor ")]
    assert len(lines) >= 3, err
    last = lines[-1].split()[3]
    assert last.startswith("3:"), lines  # admin token, agent token, one submit
    done = cli(db, env, "audit", "verify", "--anchor", last)
    assert done.returncode == 0 and "extends anchor 3:" in done.stdout, done.stderr


async def test_postgres_cut_event_log_and_emptied_audit_fail_verify(
    pg_database: str, tmp_path: Path
) -> None:
    """On PostgreSQL: an event cut from the end fails against the event head kept in
    log_head, and an audit log emptied with its head reset fails on the requests."""
    agent = Principal(name="bot", role="agent")
    async with Service(PostgresStore(pg_database)) as service:
        for n in range(3):
            body = {"session_id": "s", "tool_name": "shell", "tool_args": {"n": n}}
            await service.submit(body, agent)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200"}

    def verify_pg(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "signoff", "audit", "verify", "--db", pg_database, *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )

    honest = verify_pg()
    assert honest.returncode == 0 and "ok: 3 entries" in honest.stdout, honest.stderr
    await pg_execute("DELETE FROM events WHERE seq = 3", pg_database)
    refused(verify_pg(), "event head says 3", "ends at 2")
    await pg_execute(
        "DELETE FROM audit; UPDATE log_head SET audit_seq = 0, audit_hash = NULL", pg_database
    )
    refused(verify_pg(), "has no submit entry", "0 entries for 3 requests")
