"""Settings read from the environment, and where signoff keeps its files by default."""

from __future__ import annotations

import getpass
import os
from pathlib import Path

import platformdirs

from signoff.errors import InvalidRequest
from signoff.store.base import Store

__all__ = ["default_db_url", "local_user", "open_store"]

ENV_DB = "SIGNOFF_DB"
"""Environment variable naming the database URL."""
ENV_USER = "SIGNOFF_USER"
"""Environment variable naming the local CLI user (default: the login name)."""


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


def open_store(url: str) -> Store:
    """The store a database URL names (``sqlite:///path``, ``postgresql://...``, ``memory://``)."""
    if url.startswith("sqlite:"):
        from signoff.store.sqlite import SQLiteStore, sqlite_path_from_url

        return SQLiteStore(sqlite_path_from_url(url))
    if url in ("memory://", "memory:"):
        from signoff.store.memory import MemoryStore

        return MemoryStore()
    if url.startswith(("postgresql:", "postgres:")):
        from signoff.store.postgres import PostgresStore

        return PostgresStore(url)
    raise InvalidRequest(
        f"unsupported database URL {url!r}; use sqlite:///path or postgresql://host/db"
    )
