"""Grants: an approval bound to exactly the arguments that will run, and standing grants.

A one-off approval binds to ``args_digest(tool, args)``; whoever executes must claim it
with arguments of the same digest. A decision with scope ``session`` or ``always`` also
creates a standing :class:`Grant` that approves later matching requests at submit.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import datetime
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict

from signoff.domain.jsoncanon import canonical_json, sha256_hex
from signoff.domain.patterns import match_args

__all__ = ["Grant", "GrantScope", "args_digest", "new_grant_id"]

GrantScope: TypeAlias = Literal["session", "always"]


def args_digest(tool_name: str, args: Mapping[str, object]) -> str:
    """sha256 over the tool name and the canonical JSON of the arguments that will run."""
    return sha256_hex(tool_name + "\n" + canonical_json(dict(args)))


def new_grant_id() -> str:
    """A grant id nobody can guess."""
    return "grt_" + secrets.token_urlsafe(12)


class Grant(BaseModel):
    """A standing approval of later calls of one tool, for a session or for a requester."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """Unguessable id."""
    scope: GrantScope
    """``session``: same session and tool; ``always``: same requester and tool."""
    tool_name: str
    """The tool it approves."""
    session_id: str | None = None
    """The session it covers (scope ``session``)."""
    requested_by: str
    """The requester it covers."""
    started_by: str | None = None
    """For a hosted run's call: the run's starter; it covers only runs that person started."""
    args_pattern: dict[str, str] | None = None
    """Argument globs a later call must match, strictly (``signoff.domain.patterns``): every
    argument named, ``*`` stopping at ``/``, paths normalized; None: any arguments."""
    created_by: str
    """Principal whose decision created it."""
    created_at: datetime
    """When."""
    expires_at: datetime
    """When it stops approving anything."""
    source_request_id: str
    """The request whose approval created it."""
    revoked_at: datetime | None = None
    """When it was revoked, if it was."""
    revoked_by: str | None = None
    """Who revoked it."""

    def is_live(self, now: datetime) -> bool:
        """Whether it still approves anything."""
        return self.revoked_at is None and now < self.expires_at

    def covers(
        self,
        *,
        tool_name: str,
        session_id: str,
        requested_by: str,
        args: Mapping[str, object],
        now: datetime,
        started_by: str | None = None,
    ) -> bool:
        """Whether this grant approves such a call now."""
        if not self.is_live(now) or tool_name != self.tool_name:
            return False
        if requested_by != self.requested_by or started_by != self.started_by:
            return False
        if self.scope == "session" and session_id != self.session_id:
            return False
        return self.args_pattern is None or match_args(self.args_pattern, args, strict=True)
