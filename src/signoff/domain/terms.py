"""Terms: when a request expires, what expiry does, and what a person may decide.

They come from policy (the operator's tools.toml), never from the requester: an agent
that could say ``on_expire: "approve"``, or take ``reject`` away from a person, could
approve itself by waiting. A requester may only make its own request stricter: an
earlier expiry (which then rejects), ``on_expire: "reject"``, or fewer decisions as long
as ``reject`` stays. :func:`settle` applies that rule to one submit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from signoff.domain.decisions import DecisionType
from signoff.domain.requests import ALLOWED_DECISIONS, OnExpire, RequestKind
from signoff.errors import InvalidRequest

__all__ = ["BUILT_IN_TERMS", "ON_EXPIRE_FITS", "Settled", "Terms", "settle"]

BUILT_IN_TERMS = "built-in default"

ON_EXPIRE_FITS: dict[RequestKind, frozenset[OnExpire]] = {
    "approval": frozenset({"reject", "approve"}),
    "choice": frozenset({"reject", "default"}),
    "questions": frozenset({"reject", "approve", "default"}),
}
"""Which ``on_expire`` each kind can carry out; any other means ``reject`` for that kind."""

_REJECT_ONLY: tuple[Literal["reject"]] = ("reject",)


class Terms(BaseModel):
    """What policy says of a request's end: expiry, what expiry does, a person's choices."""

    model_config = ConfigDict(frozen=True)

    expires_in: float | None = None
    """Seconds a request waits for a person; None: it never expires (unless asked)."""
    on_expire: OnExpire = "reject"
    """What expiry at ``expires_in`` does (``default``: the requester's default answer)."""
    allowed_decisions: tuple[DecisionType, ...] | None = None
    """The decisions a person has (None: all the kind allows); only policy removes reject."""
    set_by: str = BUILT_IN_TERMS
    """Which file and table or rule said so, for the audit."""


@dataclass(frozen=True)
class Settled:
    """A submit's terms: policy's, made stricter where the requester asked."""

    expires_in: float | None
    on_expire: OnExpire
    allowed_decisions: tuple[DecisionType, ...]
    set_by: str


def settle(
    kind: RequestKind,
    terms: Terms,
    *,
    expires_in: float | None = None,
    on_expire: OnExpire | None = None,
    allowed_decisions: list[DecisionType] | None = None,
) -> Settled:
    """The terms of a new ``kind`` request under ``terms``, given what the requester asked.

    InvalidRequest (naming the field) when the requester asks for anything looser.
    """
    allowed = _allowed(kind, terms, allowed_decisions)
    fitted: OnExpire = terms.on_expire if terms.on_expire in ON_EXPIRE_FITS[kind] else "reject"
    policy_in = terms.expires_in
    effective: OnExpire
    if policy_in is not None and (expires_in is None or expires_in >= policy_in):
        final_in, effective, set_by = policy_in, fitted, terms.set_by
    elif expires_in is not None:
        final_in, effective = expires_in, "reject"
        set_by = "the requester's expires_in (an expiry a requester asks for rejects)"
        if policy_in is not None:
            set_by += f", earlier than the {policy_in:g} s of {terms.set_by}"
    else:
        final_in, effective, set_by = None, "reject", terms.set_by
    if on_expire == "reject" and effective != "reject":
        effective = "reject"
        set_by = f"the requester's on_expire reject, stricter than {set_by}"
    elif on_expire is not None and on_expire != effective:
        raise InvalidRequest(
            f"on_expire: on_expire is set by policy, not by the requester, who may only ask "
            f"for reject (here expiry does {effective!r}, as set by {set_by})"
        )
    return Settled(
        expires_in=final_in, on_expire=effective, allowed_decisions=allowed, set_by=set_by
    )


def _allowed(
    kind: RequestKind, terms: Terms, asked: list[DecisionType] | None
) -> tuple[DecisionType, ...]:
    kind_allows = ALLOWED_DECISIONS[kind]
    policy = terms.allowed_decisions
    allowed = tuple(d for d in kind_allows if policy is None or d in policy) or _REJECT_ONLY
    if asked is None:
        return allowed
    if "reject" in allowed and "reject" not in asked:
        raise InvalidRequest(
            "allowed_decisions: a requester may not take reject away from a person; "
            "only policy (tools.toml) narrows a person's choices so"
        )
    narrowed = tuple(d for d in allowed if d in asked)
    if not narrowed:
        raise InvalidRequest(
            f"allowed_decisions: policy allows only {list(allowed)} on this request"
        )
    return narrowed
