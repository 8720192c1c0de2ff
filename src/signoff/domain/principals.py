"""Principals (who is asking) and API tokens, which are stored only as hashes."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict

__all__ = [
    "DECIDER_ROLES",
    "Principal",
    "Role",
    "TokenRecord",
    "hash_token",
    "new_token",
]

Role: TypeAlias = Literal["agent", "approver", "admin"]

DECIDER_ROLES: frozenset[Role] = frozenset({"approver", "admin"})
"""Roles that may decide requests."""

TOKEN_PREFIX = "so_"  # noqa: S105 - a prefix, not a secret


class Principal(BaseModel):
    """Who is asking: a name and a role."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """Unique name, e.g. ``alice`` or ``ci-agent``."""
    role: Role
    """``agent`` submits, waits, claims and reports; ``approver`` decides; ``admin`` both."""


class TokenRecord(BaseModel):
    """A stored API token: its hash, never the token itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """Public id of the token (safe to show)."""
    name: str
    """The principal it authenticates as."""
    role: Role
    """That principal's role."""
    token_hash: str
    """sha256 of the token."""
    created_at: datetime
    """When it was created."""
    revoked_at: datetime | None = None
    """When it was revoked, if it was."""

    @property
    def principal(self) -> Principal:
        """The principal this token authenticates as."""
        return Principal(name=self.name, role=self.role)


def new_token() -> str:
    """A fresh bearer token: prefix and 256 random bits."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The stored form of a token.

    Tokens carry 256 random bits, so a plain sha256 cannot be brute-forced and lets the
    store find a token by its hash in one indexed lookup.
    """
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
