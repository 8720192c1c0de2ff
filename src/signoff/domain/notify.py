"""Notification routes: which requests reach which people, where, and the sends they make.

A :class:`Route` matches requests (tool, kind, agent, session globs) and names a channel
(Slack, email, webhook). The dispatcher queues one :class:`Notice` per send: the first one
when a request is created, an ``escalation`` to another route once a request has waited
``escalate_after`` seconds, a ``warning`` ``warn_before_expiry`` seconds before it expires,
or a ``digest`` gathering a route's new requests over ``digest`` seconds. A
:class:`PersonLink` maps a Slack user id or an email address to a signoff person, so a
decision made there is that person's, under the same governance as in the inbox.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from typing import Annotated, Literal, Self, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from signoff.domain.requests import ApprovalRequest, Request, RequestKind

__all__ = [
    "MAX_NOTICE_ATTEMPTS",
    "ROUTE_NAME",
    "EmailTarget",
    "LinkKind",
    "Notice",
    "NoticePurpose",
    "NoticeStatus",
    "PersonLink",
    "Route",
    "RouteSource",
    "RouteSpec",
    "RouteStatus",
    "SlackTarget",
    "Target",
    "WebhookTarget",
    "new_notice_id",
    "new_route_id",
    "notice_backoff",
]

ROUTE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
"""What a route's name looks like (it is how ``escalate_to`` and the CLI name a route)."""

NoticePurpose: TypeAlias = Literal["new", "escalation", "warning", "digest"]
NoticeStatus: TypeAlias = Literal["pending", "sent", "failed"]
RouteSource: TypeAlias = Literal["api", "tools.toml"]
LinkKind: TypeAlias = Literal["slack", "email"]

MAX_NOTICE_ATTEMPTS = 6
"""Attempts before a notice is given up as failed (1 + 5 retries over about a minute)."""

_SLACK_CHANNEL = re.compile(r"(#[a-z0-9][a-z0-9._-]{0,79}|[CGDU][A-Z0-9]{2,30})")
_SLACK_USER = re.compile(r"[UW][A-Z0-9]{2,30}")
_EMAIL = re.compile(r"[^@\s<>\"',;]{1,64}@[A-Za-z0-9.-]{1,253}\.[A-Za-z]{2,63}")


def new_route_id() -> str:
    """A route id."""
    return "route_" + secrets.token_urlsafe(9)


def new_notice_id() -> str:
    """A notice id."""
    return "ntc_" + secrets.token_urlsafe(12)


def notice_backoff(attempts: int) -> timedelta:
    """How long to wait after the ``attempts``-th failed send: 2, 4, 8, 16, 32 seconds."""
    return timedelta(seconds=2 ** min(attempts, 10))


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SlackTarget(_Model):
    """A Slack channel (or a user's DM) the bot posts to, and whom it mentions."""

    type: Literal["slack"] = "slack"
    channel: str
    """A channel or user id (``C…``, ``G…``, ``D…``, ``U…``) or ``#name``."""
    mention: list[str] = Field(default_factory=list, max_length=50)
    """Slack user ids mentioned in the message (``U…``)."""

    @field_validator("channel")
    @classmethod
    def _channel(cls, value: str) -> str:
        if not _SLACK_CHANNEL.fullmatch(value):
            raise ValueError("channel must be a Slack channel or user id (C…, U…) or #name")
        return value

    @field_validator("mention")
    @classmethod
    def _mention(cls, value: list[str]) -> list[str]:
        for user in value:
            if not _SLACK_USER.fullmatch(user):
                raise ValueError(f"mention must list Slack user ids (U…), not {user!r}")
        return value


class EmailTarget(_Model):
    """Email addresses each notice goes to."""

    type: Literal["email"] = "email"
    to: list[str] = Field(min_length=1, max_length=50)
    """The addresses (lower-cased)."""

    @field_validator("to")
    @classmethod
    def _to(cls, value: list[str]) -> list[str]:
        for address in value:
            if not _EMAIL.fullmatch(address):
                raise ValueError(f"not an email address: {address!r}")
        return [address.lower() for address in value]


class WebhookTarget(_Model):
    """A URL each notice is POSTed to as JSON (public addresses only, like webhooks)."""

    type: Literal["webhook"] = "webhook"
    url: str = Field(max_length=2000)
    """An ``http`` or ``https`` URL."""

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("url must be http:// or https://")
        return value


Target: TypeAlias = Annotated[
    SlackTarget | EmailTarget | WebhookTarget, Field(discriminator="type")
]
"""Any channel, told apart by ``type``."""


def _glob(pattern: str | None, value: str | None) -> bool:
    if pattern is None:
        return True
    return value is not None and fnmatchcase(value, pattern)


class RouteSpec(_Model):
    """What a route matches and where it sends: what an admin (or tools.toml) writes."""

    name: str
    """Unique name (``[a-z0-9][a-z0-9_-]{0,63}``)."""
    tool: str = Field(default="*", max_length=200)
    """Glob over an approval's tool name; ``*`` also matches choice and questions requests."""
    kind: RequestKind | None = None
    """Only this kind of request; None: any."""
    agent: str | None = Field(default=None, max_length=200)
    """Glob over the requester's name; None: any."""
    session: str | None = Field(default=None, max_length=200)
    """Glob over the session id; None: any."""
    channel: Target
    """Where its notices go."""
    escalate_after: int | None = Field(default=None, ge=1, le=366 * 86400)
    """Seconds a request may stay undecided before it is sent to ``escalate_to`` (once)."""
    escalate_to: str | None = None
    """The name of the route an undecided request escalates to."""
    warn_before_expiry: int | None = Field(default=None, ge=1, le=366 * 86400)
    """Seconds before a request expires at which the route is warned (once)."""
    digest: int | None = Field(default=None, ge=1, le=86400)
    """Seconds: new requests are gathered into one message per window, not one each."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not ROUTE_NAME.fullmatch(value):
            raise ValueError("name must be lower-case letters, digits, - and _ (up to 64)")
        return value

    @model_validator(mode="after")
    def _escalation(self) -> Self:
        if (self.escalate_after is None) != (self.escalate_to is None):
            raise ValueError("escalate_after and escalate_to go together")
        if self.escalate_to is not None and self.escalate_to == self.name:
            raise ValueError("a route cannot escalate to itself")
        return self

    def matches(self, request: Request) -> bool:
        """Whether a request is this route's to announce."""
        if self.kind is not None and request.kind != self.kind:
            return False
        tool = request.tool_name if isinstance(request, ApprovalRequest) else None
        if self.tool != "*" and not _glob(self.tool, tool):
            return False
        return _glob(self.agent, request.requested_by) and _glob(self.session, request.session_id)


class Route(RouteSpec):
    """A stored (or tools.toml) route: its spec, id and who added it."""

    id: str
    """``route_`` and a random suffix (tools.toml's: ``route_toml_`` and its name)."""
    created_by: str
    """Who added it (``tools.toml`` for a policy file's routes)."""
    created_at: datetime
    """When."""
    source: RouteSource = "api"
    """``api`` (added with the CLI or HTTP API) or ``tools.toml`` (read-only)."""


class Notice(_Model):
    """One send of one request (or, for a digest, several) to one route."""

    id: str
    """``ntc_`` and a random suffix."""
    route_id: str
    """The route it goes to."""
    request_id: str
    """The request it announces (a digest: the first of them; the rest in ``request_ids``)."""
    purpose: NoticePurpose
    """``new``, ``escalation``, ``warning`` or ``digest``."""
    status: NoticeStatus = "pending"
    """``pending`` until sent, or ``failed`` after its last attempt."""
    attempts: int = 0
    """Failed attempts so far."""
    next_attempt_at: datetime
    """When it is due (a digest: when its window closes)."""
    last_error: str | None = None
    """Why the last attempt failed."""
    sent_at: datetime | None = None
    """When it was delivered."""
    ref: dict[str, JsonValue] | None = None
    """What its channel needs to update it later (Slack: ``{channel, ts}``)."""
    recipients: list[str] = Field(default_factory=list)
    """Who it went to (email: the addresses)."""
    request_ids: list[str] = Field(default_factory=list)
    """A digest's requests, in order."""
    created_at: datetime
    """When it was queued."""


class PersonLink(_Model):
    """A Slack user id or an email address that is a signoff person."""

    kind: LinkKind
    """``slack`` or ``email``."""
    external_id: str = Field(min_length=1, max_length=320)
    """The Slack user id, or the email address (lower-cased)."""
    name: str
    """The signoff principal's name."""
    created_by: str
    """Who linked them."""
    created_at: datetime
    """When."""

    @model_validator(mode="after")
    def _shape(self) -> PersonLink:
        if self.kind == "slack" and not _SLACK_USER.fullmatch(self.external_id):
            raise ValueError("a Slack link names a Slack user id (U… or W…)")
        if self.kind == "email":
            if not _EMAIL.fullmatch(self.external_id):
                raise ValueError(f"not an email address: {self.external_id!r}")
            if self.external_id != self.external_id.lower():
                raise ValueError("email addresses are stored lower-cased")
        return self


class RouteStatus(_Model):
    """A route as ``signoff notify list`` and the inbox show it: is it reaching anyone?"""

    route: Route
    """The route."""
    last_sent_at: datetime | None = None
    """When its last notice was delivered."""
    last_error: str | None = None
    """Why its latest failing notice failed (None when the latest attempt worked)."""
    failing: bool = False
    """Whether its latest attempt failed (retrying or given up) since its last delivery."""
