"""Settings read from the environment, and where signoff keeps its files by default."""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import os
import secrets
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import platformdirs

from signoff.bus.follower import EventLogFollower
from signoff.bus.local import EventBus
from signoff.errors import InvalidRequest
from signoff.store.base import Store
from signoff.store.memory import MemoryStore

__all__ = [
    "ServerSecret",
    "default_db_url",
    "exposed_files",
    "follower_for",
    "is_postgres",
    "local_user",
    "open_store",
    "secret_file",
    "server_secret",
    "shared",
]

ENV_DB = "SIGNOFF_DB"
"""Environment variable naming the database URL."""
ENV_USER = "SIGNOFF_USER"
"""Environment variable naming the local CLI user (default: the login name)."""
ENV_SECRET = "SIGNOFF_SECRET"  # noqa: S105 - the variable's name, not a secret
"""Environment variable holding the server secret that signs inbox sessions."""
MIN_SECRET_LENGTH = 32
"""The shortest ``SIGNOFF_SECRET`` accepted, in characters."""


def default_db_url() -> str:
    """``$SIGNOFF_DB``, else a SQLite file under the user's data dir.

    On Linux that is ``~/.local/share/signoff/signoff.db`` (``$XDG_DATA_HOME`` honoured).
    """
    env = os.environ.get(ENV_DB)
    if env:
        return env
    return "sqlite:///" + str(Path(platformdirs.user_data_dir("signoff")) / "signoff.db")


def local_user() -> str:
    """The name the local CLI acts under: ``$SIGNOFF_USER`` or the login name."""
    return os.environ.get(ENV_USER) or getpass.getuser()


def is_postgres(url: str) -> bool:
    """Whether a database URL names PostgreSQL (``postgresql://`` or ``postgres://``)."""
    return url.startswith(("postgresql:", "postgres:"))


def open_store(url: str, *, pool: int | None = None, writer: str | None = None) -> Store:
    """The store a database URL names (``sqlite:///path``, ``postgresql://...``, ``memory://``).

    ``pool``: the most connections a PostgreSQL store opens for its reads and writes
    (default 10); InvalidRequest for any other store, which has no pool. ``writer``: what
    runs a SQLite store's writes, ``thread`` (the default) or ``process``; InvalidRequest
    for any other store.
    """
    postgres = is_postgres(url)
    if pool is not None and not postgres:
        raise InvalidRequest("a connection pool size applies to a PostgreSQL database only")
    if writer is not None and not url.startswith("sqlite:"):
        raise InvalidRequest("a writer thread or process applies to a SQLite database only")
    if pool is not None and pool < 1:
        raise InvalidRequest(f"a connection pool needs at least 1 connection, not {pool}")
    if url.startswith("sqlite:"):
        from signoff.store.sqlite import SQLiteStore, WriterKind, sqlite_path_from_url

        # the store refuses a kind it does not know
        return SQLiteStore(sqlite_path_from_url(url), writer=cast(WriterKind, writer or "thread"))
    if url in ("memory://", "memory:"):
        from signoff.store.memory import MemoryStore

        return MemoryStore()
    if postgres:
        from signoff.store.postgres import PostgresStore

        return PostgresStore(url) if pool is None else PostgresStore(url, max_size=pool)
    raise InvalidRequest(
        f"unsupported database URL {url!r}; use sqlite:///path or postgresql://host/db"
    )


def shared(store: Store) -> bool:
    """Whether other processes may write to ``store``: a database, not the in-memory store."""
    return not isinstance(store, MemoryStore)


def follower_for(store: Store, bus: EventBus) -> EventLogFollower:
    """The follower that suits ``store``: LISTEN/NOTIFY on PostgreSQL, tailing elsewhere.

    Chosen here, beside :func:`open_store`, so the bus knows neither the stores nor their
    URLs. A :class:`~signoff.store.postgres.PostgresStore` can exist only once its module
    (and asyncpg) is imported, so a store of any other type never imports them.
    """
    postgres = sys.modules.get("signoff.store.postgres")
    if postgres is not None and isinstance(store, postgres.PostgresStore):
        from signoff.bus.postgres import PostgresEventFollower

        return PostgresEventFollower(
            store.dsn,
            store,
            bus,
            own_backend=store.is_own_backend,
            parse=store.carried_events,
            schema=store.schema,
            others_follow=store.others_follow,
            commits_here=store.tell_commits,
        )
    return EventLogFollower(store, bus)


@dataclass(frozen=True, kw_only=True)
class ServerSecret:
    """The key inbox sessions are signed with, and where it came from (for messages)."""

    key: bytes = field(repr=False)
    """32 bytes derived from the secret; never stored anywhere."""
    source: str
    """``$SIGNOFF_SECRET``, a file's path, or ``generated``."""
    shared: bool
    """Whether other servers can hold the same secret (the variable, not a local file)."""


def _key(secret: str) -> bytes:
    # a fixed label, so the same secret used elsewhere does not give the same key
    return hashlib.sha256(b"signoff inbox sessions\0" + secret.encode("utf-8")).digest()


def secret_file(url: str) -> Path | None:
    """Where the server secret is kept when ``$SIGNOFF_SECRET`` is not set.

    Beside a SQLite database (``<db>.secret``); for PostgreSQL, ``server.secret`` in the
    user's data dir; none for an in-memory store (a new secret each run).
    """
    if url.startswith("sqlite:"):
        from signoff.store.sqlite import sqlite_path_from_url

        db = sqlite_path_from_url(url)
        return db.with_name(db.name + ".secret")
    if is_postgres(url):
        return Path(platformdirs.user_data_dir("signoff")) / "server.secret"
    return None


def server_secret(url: str) -> ServerSecret:
    """``$SIGNOFF_SECRET``, else the secret file for ``url`` (made 0600 on first use).

    Nothing stored in the database goes into it, so reading the database (a backup, a
    readable file) never lets anyone sign a session. Changing it signs everyone out.
    """
    env = os.environ.get(ENV_SECRET)
    if env is not None:
        if len(env.strip()) < MIN_SECRET_LENGTH:
            raise InvalidRequest(
                f"{ENV_SECRET} must be at least {MIN_SECRET_LENGTH} characters "
                "(make one with: python -c 'import secrets; print(secrets.token_hex(32))')"
            )
        return ServerSecret(key=_key(env.strip()), source=f"${ENV_SECRET}", shared=True)
    path = secret_file(url)
    if path is None:
        return ServerSecret(key=_key(secrets.token_hex(32)), source="generated", shared=False)
    return ServerSecret(key=_key(_read_or_create(path)), source=str(path), shared=False)


def _read_or_create(path: Path) -> str:
    try:
        if not path.parent.exists():
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not path.exists():
            _create_secret(path)
        text = path.read_text("utf-8").strip()
    except OSError as exc:
        raise InvalidRequest(f"cannot read or create the server secret {path}: {exc}") from None
    if len(text) < MIN_SECRET_LENGTH:
        raise InvalidRequest(
            f"the server secret {path} is shorter than {MIN_SECRET_LENGTH} characters; "
            "delete it to have a new one made (everyone is signed out)"
        )
    return text


def _create_secret(path: Path) -> None:
    """Write a fresh secret to ``path`` (0600), unless another process got there first."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(secrets.token_hex(32) + "\n")
            out.flush()
            os.fsync(out.fileno())
        # a hard link appears whole or not at all, and fails if the name is taken
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def exposed_files(url: str) -> list[tuple[Path, int]]:
    """signoff's files for ``url`` that users other than the owner can read: (path, mode).

    The SQLite database, its ``-wal`` and ``-shm`` files and the secret file.
    """
    paths: list[Path] = []
    if url.startswith("sqlite:"):
        from signoff.store.sqlite import sqlite_path_from_url

        db = sqlite_path_from_url(url)
        paths += [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
    secret = secret_file(url)
    if secret is not None and os.environ.get(ENV_SECRET) is None:
        paths.append(secret)
    found: list[tuple[Path, int]] = []
    for path in paths:
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except OSError:
            continue
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            found.append((path, mode))
    return found
