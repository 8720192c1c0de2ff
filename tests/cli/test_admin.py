"""``signoff audit``, ``token`` and ``grants``, run as real subprocesses on a real SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.cli.running import Run, submit


def test_session_grant_approves_later_calls_until_revoked(cli: Run) -> None:
    """approve --scope session approves later calls of that tool at submit; revoke stops it."""
    first = submit(cli, "--session", "s1")
    assert cli("approve", first["id"], "--scope", "session").returncode == 0
    second = submit(cli, "--session", "s1", args={"command": "pwd"})
    assert second["status"] == "approved"
    other_session = submit(cli, "--session", "s2")
    assert other_session["status"] == "pending"
    grants = cli("grants", "list")
    grant_id = next(w for w in grants.stdout.split() if w.startswith("grt_"))
    assert cli("grants", "revoke", grant_id).returncode == 0
    assert submit(cli, "--session", "s1")["status"] == "pending"
    audit = cli("audit", "log", "--request", second["id"])
    assert "grant" in audit.stdout


def test_audit_verify_detects_an_edited_entry(cli: Run, tmp_path: Path) -> None:
    """audit verify passes on an honest log and fails, naming the entry, after an edit."""
    request = submit(cli)
    cli("approve", request["id"])
    ok = cli("audit", "verify")
    assert ok.returncode == 0 and "ok" in ok.stdout
    with sqlite3.connect(tmp_path / "signoff.db") as db:
        db.execute("UPDATE audit SET actor = 'mallory' WHERE seq = 2")
    db.close()
    broken = cli("audit", "verify")
    assert broken.returncode != 0
    assert "entry 2" in broken.stderr


def test_token_create_prints_once_and_stores_only_a_hash(cli: Run, tmp_path: Path) -> None:
    """The token is printed, its hash stored, and the token itself appears nowhere in the file."""
    done = cli("token", "create", "ci-bot", "--role", "agent")
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    assert token.startswith("so_") and len(token) > 40
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("signoff.db*"))
    assert token.encode() not in raw
    listed = cli("token", "list")
    assert "ci-bot" in listed.stdout and token not in listed.stdout
    assert cli("token", "create", "x", "--role", "wizard").returncode == 64
