"""The server secret and the file-mode check in signoff.config."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from signoff.bus.follower import EventLogFollower
from signoff.bus.local import LocalBus
from signoff.config import (
    ENV_SECRET,
    exposed_files,
    follower_for,
    open_store,
    secret_file,
    server_secret,
    shared,
)
from signoff.errors import InvalidRequest


@pytest.fixture(autouse=True)
def no_env_secret(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test starts without SIGNOFF_SECRET and with its own user data dir."""
    monkeypatch.delenv(ENV_SECRET, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


def test_sqlite_secret_is_made_once_0600_beside_the_database(tmp_path: Path) -> None:
    """The first call writes <db>.secret 0600 (and a 0700 dir); later calls read the same key."""
    url = f"sqlite:///{tmp_path / 'new' / 'x.db'}"
    first = server_secret(url)
    path = tmp_path / "new" / "x.db.secret"
    assert secret_file(url) == path and first.source == str(path) and not first.shared
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(first.key) == 32 and first.key.hex() not in path.read_text()
    assert server_secret(url).key == first.key
    path.unlink()
    assert server_secret(url).key != first.key


def test_env_secret_wins_and_must_be_long(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """SIGNOFF_SECRET is used as given (no file written); under 32 characters it is refused."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    monkeypatch.setenv(ENV_SECRET, "s" * 32)
    chosen = server_secret(url)
    assert chosen.shared and chosen.source == f"${ENV_SECRET}"
    assert not (tmp_path / "x.db.secret").exists()
    monkeypatch.setenv(ENV_SECRET, "s" * 33)
    assert server_secret(url).key != chosen.key
    monkeypatch.setenv(ENV_SECRET, "s" * 31)
    with pytest.raises(InvalidRequest, match=ENV_SECRET):
        server_secret(url)


def test_truncated_secret_file_is_refused(tmp_path: Path) -> None:
    """A secret file too short to be a real secret is an error, never a weak key."""
    (tmp_path / "x.db.secret").write_text("abc\n")
    with pytest.raises(InvalidRequest, match="shorter than"):
        server_secret(f"sqlite:///{tmp_path / 'x.db'}")


def test_postgres_secret_lives_in_the_user_data_dir(tmp_path: Path) -> None:
    """Without SIGNOFF_SECRET a PostgreSQL server keeps server.secret in the user data dir."""
    chosen = server_secret("postgresql://db.example/signoff")
    path = tmp_path / "xdg" / "signoff" / "server.secret"
    assert chosen.source == str(path) and not chosen.shared
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_memory_store_gets_a_fresh_secret_each_time() -> None:
    """An in-memory store has no file: each call is a new random key."""
    assert secret_file("memory://") is None
    assert server_secret("memory://").key != server_secret("memory://").key


def test_exposed_files_lists_only_what_others_can_read(tmp_path: Path) -> None:
    """Database, -wal, -shm and secret readable by group or others are listed with their mode."""
    db = tmp_path / "x.db"
    url = f"sqlite:///{db}"
    for name, mode in [("x.db", 0o644), ("x.db-wal", 0o600), ("x.db-shm", 0o660)]:
        (tmp_path / name).write_text("")
        (tmp_path / name).chmod(mode)
    server_secret(url)
    assert exposed_files(url) == [(db, 0o644), (tmp_path / "x.db-shm", 0o660)]
    (tmp_path / "x.db.secret").chmod(0o604)
    assert (tmp_path / "x.db.secret", 0o604) in exposed_files(url)


def test_the_follower_is_chosen_beside_the_store(tmp_path: Path) -> None:
    """A SQLite file is shared and tailed; the in-memory store is not shared."""
    sqlite = open_store(f"sqlite:///{tmp_path / 'x.db'}")
    assert shared(sqlite)
    assert type(follower_for(sqlite, LocalBus())) is EventLogFollower
    assert not shared(open_store("memory://"))
