"""Attack: another user on the machine reads the server's database or its secret.

The database holds every request, token hash and session; the secret signs sessions. A
fresh ``signoff serve`` makes its directory 0700 and every file 0600 before writing any
data; an existing file others can read gets a warning on each start.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from signoff.server.app import API
from tests.serving import Server, bearer, free_port, start_server


def mode_of(path: Path) -> int:
    """The permission bits of ``path``."""
    return stat.S_IMODE(path.stat().st_mode)


@contextmanager
def umask(mask: int) -> Iterator[None]:
    """Run with this umask (children inherit it), as a typical login shell's 022."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def serve(db: Path, *extra: str) -> Server:
    """``signoff serve`` on ``db``, with the secret kept in its file (no SIGNOFF_SECRET)."""
    env = {k: v for k, v in os.environ.items() if k != "SIGNOFF_SECRET"}
    with umask(0o022):
        return start_server(f"sqlite:///{db}", free_port(), {**env, "COLUMNS": "200"}, *extra)


def stop(server: Server) -> str:
    """Stop the server; what it wrote to stderr."""
    server.process.terminate()
    _, err = server.process.communicate(timeout=20)
    return err


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A directory that does not exist yet: serve has to make it."""
    return tmp_path / "data" / "signoff"


def test_a_fresh_server_keeps_its_files_private(data_dir: Path) -> None:
    """Directory 0700; database, -wal, -shm and secret 0600, with a umask of 022."""
    db = data_dir / "serve.db"
    server = serve(db)
    try:
        assert server.admin_token is not None
        with httpx.Client(base_url=server.base, headers=bearer(server.admin_token)) as http:
            made = http.post(f"{API}/tokens", json={"name": "bot", "role": "agent"})
            assert made.status_code == 201, made.text
        files = [db, Path(f"{db}-wal"), Path(f"{db}-shm"), Path(f"{db}.secret")]
        assert mode_of(data_dir) == 0o700
        for path in files:
            assert path.exists(), path
            assert mode_of(path) == 0o600, (path, oct(mode_of(path)))
    finally:
        err = stop(server)
    assert "warning:" not in err


def test_serve_warns_when_others_can_read_its_files(data_dir: Path) -> None:
    """An existing world-readable database or secret file is named in a warning on start."""
    db = data_dir / "serve.db"
    stop(serve(db))
    secret = Path(f"{db}.secret")
    db.chmod(0o644)
    secret.chmod(0o640)
    err = stop(serve(db))
    assert f"warning: {db} can be read by other users (mode 0644)" in err
    assert f"warning: {secret} can be read by other users (mode 0640)" in err
    assert mode_of(db) == 0o644  # signoff warns; it does not change an operator's choice
    db.chmod(0o600)
    secret.chmod(0o600)
    Path(f"{db}-wal").chmod(0o600)
    Path(f"{db}-shm").chmod(0o600)
    assert "warning:" not in stop(serve(db))
