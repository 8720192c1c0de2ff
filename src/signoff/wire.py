"""The bodies of the HTTP API's answers, as typed models both sides share.

The server declares them as its routes' response models, so ``/openapi.json`` shows each
answer's schema; :mod:`signoff.client` reads answers with the same models. Each one holds
exactly what the API sends: a token's hash never, a webhook's secret only in the answer
that adds it. No web framework is imported here.

Answers that are one domain record (a request, a grant, a delivery, an audit report, a
principal) use the domain model itself; this module adds the lists, the views that leave a
secret out, and the answers that carry more than a record.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    JsonValue,
    PlainSerializer,
    WithJsonSchema,
)

from signoff.domain.audit import Anchor, AuditEntry
from signoff.domain.grants import Grant
from signoff.domain.notify import PersonLink, RouteStatus
from signoff.domain.principals import Role, TokenRecord
from signoff.domain.requests import Request, Status
from signoff.domain.tasks import HistoryItem, PendingCall, Task, TaskStatus
from signoff.domain.webhooks import Delivery, Webhook, WebhookFormat

__all__ = [
    "HIDDEN",
    "NOT_DISCLOSED",
    "AgentList",
    "AnchorView",
    "AuditLog",
    "BatchDecided",
    "BatchRefused",
    "BatchResults",
    "DeliveryList",
    "FailingRoute",
    "FailingRoutes",
    "GrantList",
    "LinkList",
    "RequestPage",
    "RouteList",
    "TaskList",
    "TaskView",
    "TokenCreated",
    "TokenList",
    "TokenView",
    "WebhookList",
    "WebhookView",
]

NOT_DISCLOSED = "(not disclosed)"
"""What a token record read over HTTP holds in place of its hash."""

HIDDEN = "(hidden)"
"""What a webhook read over HTTP holds in place of its secret."""


class _Answer(BaseModel):
    # a client reading an answer from a newer server ignores the fields it does not know
    model_config = ConfigDict(frozen=True)


class RequestPage(_Answer):
    """One page of requests, newest first (``GET /requests``)."""

    items: list[Request]
    """The requests on this page."""
    next_cursor: str | None
    """Pass as ``cursor`` for the next page; None: this is the last one."""


class BatchDecided(_Answer):
    """A batch decision's id that was decided."""

    id: str
    """The request's id."""
    status: Status
    """Its status after the decision."""


class BatchRefused(_Answer):
    """A batch decision's id that was not decided, and why."""

    id: str
    """The request's id, as given."""
    error: str
    """The error's name (``RequestNotFound``, ``InvalidTransition``...)."""
    detail: str
    """What went wrong, in words."""
    code: int
    """The HTTP status the same error gets on its own."""


class BatchResults(_Answer):
    """Each id's outcome of ``POST /decisions``, in the order given."""

    results: list[BatchDecided | BatchRefused]
    """A status for each id decided, an error for each one not."""


class GrantList(_Answer):
    """Standing grants (``GET /grants``)."""

    items: list[Grant]
    """The grants, newest first."""


class AuditLog(_Answer):
    """Audit entries in chain order (``GET /audit``)."""

    items: list[AuditEntry]
    """The entries, all of them or one request's."""


def _iso(at: datetime) -> str:
    return at.isoformat()


_IsoTime = Annotated[
    datetime,
    PlainSerializer(_iso, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""A time written as Python's ``isoformat`` writes it (``+00:00``, not ``Z``)."""


class AnchorView(_Answer):
    """The audit chain's head (``GET /audit/anchor``), to keep outside the database."""

    seq: int
    """The head entry's seq (0: the empty log)."""
    hash: str
    """The head entry's hash."""
    anchor: str
    """Both as ``SEQ:HASH``, the form ``/audit/verify?anchor=`` and the CLI take."""
    at: _IsoTime
    """When the head was read."""

    @classmethod
    def of(cls, anchor: Anchor, at: datetime) -> AnchorView:
        """The view of ``anchor`` read at ``at``."""
        return cls(seq=anchor.seq, hash=anchor.hash, anchor=str(anchor), at=at)

    def as_anchor(self) -> Anchor:
        """The anchor itself."""
        return Anchor(seq=self.seq, hash=self.hash)


class TokenView(_Answer):
    """A token's record as the API shows it: never the token, never its hash."""

    id: str
    """Public id of the token (safe to show)."""
    name: str
    """The principal it authenticates as."""
    role: Role
    """That principal's role."""
    created_at: datetime
    """When it was created."""
    revoked_at: datetime | None = None
    """When it was revoked, if it was."""

    @classmethod
    def of(cls, record: TokenRecord) -> TokenView:
        """The view of a stored record."""
        return cls.model_validate(record, from_attributes=True)

    def as_record(self) -> TokenRecord:
        """A record with :data:`NOT_DISCLOSED` for the hash the API never sends."""
        shown = {name: getattr(self, name) for name in TokenView.model_fields}
        return TokenRecord(**shown, token_hash=NOT_DISCLOSED)


class _NewToken(_Answer):
    token: str
    """The token itself; only its hash is stored, so it cannot be shown again."""


class TokenCreated(TokenView, _NewToken):
    """A new token (``POST /tokens``): the only answer that ever holds the token.

    The token comes first, then the view of its record (the bases are in that order).
    """

    @classmethod
    def issued(cls, token: str, record: TokenRecord) -> TokenCreated:
        """The answer for ``token``, just created with ``record``."""
        return cls(token=token, **dict(TokenView.of(record)))


class TokenList(_Answer):
    """Tokens (``GET /tokens``)."""

    items: list[TokenView]
    """Every token's view, revoked ones too."""


class WebhookView(_Answer):
    """A webhook endpoint as listed: without its secret."""

    id: str
    """Public id."""
    url: str
    """Where events are POSTed."""
    format: WebhookFormat = "json"
    """``json``: the event as the API sends it; ``slack``: a Slack incoming-webhook message."""
    created_by: str
    """Who added it."""
    created_at: datetime
    """When."""
    active: bool = True
    """Whether it still receives events."""

    @classmethod
    def of(cls, webhook: Webhook) -> WebhookView:
        """The view of a stored endpoint."""
        return cls.model_validate(webhook, from_attributes=True)

    def as_webhook(self) -> Webhook:
        """A webhook with :data:`HIDDEN` for the secret the API does not send."""
        return Webhook(**dict(self), secret=HIDDEN)


class WebhookList(_Answer):
    """Webhook endpoints (``GET /webhooks``)."""

    items: list[WebhookView]
    """Each endpoint, without its secret."""


class DeliveryList(_Answer):
    """The webhook delivery log (``GET /webhooks/deliveries``)."""

    items: list[Delivery]
    """Deliveries, newest first."""


class AgentList(_Answer):
    """The agents a server hosts (``GET /agents``)."""

    items: list[str]
    """Their names, sorted."""


class TaskView(_Answer):
    """A hosted task as the API shows it (``GET /tasks/{id}``, runs and resumes): the task
    without the agent's opaque state, and a paused one with what it waits on and where to
    answer.

    The fields after ``task_id`` are a paused task's only: the others leave them unset, and
    the API sends a view without its unset fields (``exclude_unset``), as it always has.
    """

    id: str
    """The task's id."""
    agent: str
    """The registered agent's name."""
    session_id: str
    """The session its requests are filed under."""
    user: str
    """Who started it."""
    status: TaskStatus
    """Where it is."""
    version: int
    """Optimistic-concurrency counter."""
    created_at: datetime
    """When it started."""
    updated_at: datetime
    """When it last changed."""
    prompt: str
    """What the agent was asked."""
    pending: tuple[PendingCall, ...]
    """The calls a paused task waits on."""
    history: tuple[HistoryItem, ...]
    """Everything that happened, oldest first."""
    output: JsonValue
    """The agent's output once Completed."""
    error: str | None
    """Why it Failed or was Canceled."""
    task_id: str
    """The task's id again (what a run's answer names it)."""
    request_id: str | None = None
    """Paused: the first request it waits on."""
    message: str | None = None
    """Paused: the calls it waits on, in words."""
    approval_url: str | None = None
    """Paused: POST here to approve the first request."""
    rejection_url: str | None = None
    """Paused: POST ``{"reason": ...}`` here to reject the first request (a reason is
    required)."""
    tool_calls: list[PendingCall] | None = None
    """Paused: every call it waits on."""

    @classmethod
    def of(cls, task: Task, base_url: str = "") -> TaskView:
        """The view of ``task``; links to resume it start with ``base_url`` (the server's)."""
        fields = task.model_dump(exclude={"messages", "events"})
        if task.status != "Paused" or not task.pending:
            return cls(**fields, task_id=task.id)
        first = task.pending[0]
        resume = f"{base_url}/api/v1/resume/{first.request_id}"
        calls = ", ".join(f"{p.tool_name}({json.dumps(p.args)})" for p in task.pending)
        return cls(
            **fields,
            task_id=task.id,
            request_id=first.request_id,
            message=f"The agent is waiting for approval of: {calls}",
            approval_url=f"{resume}?action=approve",
            rejection_url=f"{resume}?action=reject",
            tool_calls=list(task.pending),
        )


class TaskList(_Answer):
    """Tasks the caller may see, newest first (``GET /tasks``)."""

    items: list[TaskView]
    """Each task's view."""


class RouteList(_Answer):
    """Notification routes and whether each reaches anyone (``GET /notify/routes``)."""

    items: list[RouteStatus]
    """Each route, tools.toml's first, with its last send and its failure if failing."""


class LinkList(_Answer):
    """Slack user ids and email addresses linked to people (``GET /people/links``)."""

    items: list[PersonLink]
    """Each link, oldest first."""


class FailingRoute(_Answer):
    """A route whose latest attempt failed, as the inbox's banner names it."""

    name: str
    """The route's name."""
    error: str
    """Why its latest attempt failed."""


class FailingRoutes(_Answer):
    """The routes that cannot send (``GET /notify/failing``), for any signed-in person."""

    items: list[FailingRoute]
    """Each failing route."""
