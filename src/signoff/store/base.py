"""The one store protocol every backend implements, and the write it applies atomically.

The service never changes two things separately: every change is one :class:`Write`
(a request inserted or conditionally updated, grants, tokens, audit entries, events) that
the store applies all together or not at all. A backend numbers and chains the audit
entries and numbers the events inside that same transaction.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from signoff.domain.audit import AuditDraft, AuditEntry, LogCoverage
from signoff.domain.events import Event, EventDraft
from signoff.domain.grants import Grant
from signoff.domain.notify import LinkKind, Notice, PersonLink, Route
from signoff.domain.principals import TokenRecord
from signoff.domain.requests import ApprovalRequest, Request, RequestKind, Status
from signoff.domain.sessions import SessionRecord
from signoff.domain.tasks import Task, TaskStatus
from signoff.domain.webhooks import Delivery, DeliveryStatus, Webhook
from signoff.errors import DuplicateRequest, GrantsChanged, InvalidRequest, VersionConflict
from signoff.store import search

__all__ = [
    "MAX_PAGE",
    "Committed",
    "DuplicateRequest",
    "GrantsChanged",
    "GrantsRead",
    "Page",
    "RequestQuery",
    "StatusFilter",
    "Store",
    "VersionConflict",
    "Write",
    "decode_cursor",
    "encode_cursor",
    "from_micros",
    "lapsed_among",
    "to_micros",
]

MAX_PAGE = 500
"""The most requests one page returns."""


@dataclass(frozen=True, kw_only=True)
class Write:
    """One atomic change: all of it is stored, or none of it."""

    at: datetime
    """When the change happens; stamps the audit entries and events."""
    insert: Request | None = None
    """A new request. Fails with DuplicateRequest on an idempotency clash."""
    update: Request | None = None
    """A request's next version: stored only if the stored version is ``update.version - 1``."""
    grants: tuple[Grant, ...] = ()
    """Grants to insert, or to replace by id; the store's grants version moves on."""
    grants_version: int | None = None
    """The grants version a new request was decided against (:meth:`Store.grants_for`):
    the write is stored only if no grant was stored since (GrantsChanged otherwise), so a
    grant revoked before the write commits never approves it."""
    tokens: tuple[TokenRecord, ...] = ()
    """Tokens to insert, or to replace by id."""
    sessions: tuple[SessionRecord, ...] = ()
    """Inbox sessions to insert, or to replace by id (ending one replaces it)."""
    audit: tuple[AuditDraft, ...] = ()
    """Entries to append to the audit chain, in order."""
    events: tuple[EventDraft, ...] = ()
    """Events to append to the event log, in order."""
    webhooks: tuple[Webhook, ...] = ()
    """Webhook endpoints to insert, or to replace by id."""
    deliveries: tuple[Delivery, ...] = ()
    """Webhook deliveries to insert, or to replace by id."""
    routes: tuple[Route, ...] = ()
    """Notification routes to insert, or to replace by id."""
    removed_routes: tuple[str, ...] = ()
    """Ids of notification routes to delete (their notices stay)."""
    notices: tuple[Notice, ...] = ()
    """Notices to insert, or to replace by id."""
    links: tuple[PersonLink, ...] = ()
    """Person links to insert, or to replace by (kind, external id)."""
    removed_links: tuple[tuple[LinkKind, str], ...] = ()
    """(kind, external id) of person links to delete."""
    task: Task | None = None
    """A hosted agent run: inserted when ``version`` is 1, else stored only if the stored
    version is ``task.version - 1`` (VersionConflict otherwise). Each of its pending calls'
    request ids is indexed to it, so :meth:`Store.find_task` finds it by request."""


@dataclass(frozen=True)
class GrantsRead:
    """One tool and requester's grants, newest first, and the store's grants version when
    they were read (every write that stores a grant moves it on)."""

    version: int
    grants: tuple[Grant, ...]


@dataclass(frozen=True)
class Committed:
    """What a write appended, numbered: the events to publish and the audit entries."""

    events: tuple[Event, ...] = ()
    audit: tuple[AuditEntry, ...] = ()


StatusFilter: TypeAlias = Status | Literal["ended"]
"""A status to list, or ``ended``: any status but pending."""


@dataclass(frozen=True, kw_only=True)
class RequestQuery:
    """A filter and a page position for listing requests, newest first.

    The filters combine (all must hold). A value no store could compare (empty, too long,
    holding NUL) is InvalidRequest when the query is made.
    """

    status: StatusFilter | None = None
    session_id: str | None = None
    kind: RequestKind | None = None
    requested_by: str | None = None
    """The agent that asked."""
    decided_by: str | None = None
    """Who made the decision that ended the pending state (a person, or ``policy``,
    ``expiry``; a grant's decisions name the person who made the grant)."""
    tool_name: str | None = None
    """The tool an approval request calls (exactly)."""
    text: str | None = None
    """Words that must each occur in the request's text (see :mod:`signoff.store.search`)."""
    limit: int = 50
    cursor: str | None = None
    """Opaque position from a previous page's ``next_cursor``."""

    def __post_init__(self) -> None:
        search.check_filter(self.requested_by, "requested_by")
        search.check_filter(self.decided_by, "decided_by")
        search.check_filter(self.tool_name, "tool_name")
        if self.text is not None:
            search.words(self.text)


@dataclass(frozen=True)
class Page:
    """One page of requests and where the next one starts (None: no more)."""

    items: list[Request] = field(default_factory=list)
    next_cursor: str | None = None


def to_micros(at: datetime) -> int:
    """Microseconds since the epoch, the sortable form stores keep timestamps in."""
    return int((at - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1_000_000)


def from_micros(us: int) -> datetime:
    """The inverse of :func:`to_micros`."""
    return datetime.fromtimestamp(us / 1_000_000, tz=UTC)


def lapsed_among(executing: Iterable[Request], now: datetime, limit: int) -> list[Request]:
    """Of executing requests, those whose claim's lease ended by ``now``, oldest lease first.

    Few calls execute at once, so the stores read them by status and leave the lease to this.
    """
    lapsed = sorted(
        (
            r
            for r in executing
            if isinstance(r, ApprovalRequest)
            and r.status == "executing"
            and r.lease_until is not None
            and r.lease_until <= now
        ),
        key=lambda r: (r.lease_until or now, r.id),
    )
    chosen: list[Request] = [*lapsed[:limit]]
    return chosen


def encode_cursor(created_us: int, request_id: str) -> str:
    """An opaque keyset cursor after the row (created_us, request_id)."""
    raw = f"{created_us}|{request_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """Read a cursor made by :func:`encode_cursor`; anything else is InvalidRequest."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        us, request_id = raw.split("|", 1)
        created_us = int(us)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidRequest(f"invalid cursor {cursor!r}") from None
    # the stores' columns are 64-bit and PostgreSQL's text refuses NUL: a forged cursor
    # is the caller's mistake, not a store failure
    if not -(2**63) <= created_us < 2**63 or "\x00" in request_id:
        raise InvalidRequest(f"invalid cursor {cursor!r}")
    return created_us, request_id


@runtime_checkable
class Store(Protocol):
    """Where requests, grants, tokens, the audit chain and the event log live."""

    async def open(self) -> None:
        """Connect and migrate the schema to the current version."""

    async def close(self) -> None:
        """Release connections; pending writes finish first."""

    async def commit(self, write: Write) -> Committed:
        """Apply ``write`` atomically; raise VersionConflict, DuplicateRequest or GrantsChanged
        untouched."""

    async def get_request(self, request_id: str) -> Request | None:
        """The request with this id, or None."""

    async def find_duplicate(
        self,
        *,
        session_id: str,
        tool_call_id: str | None,
        requested_by: str,
        idempotency_key: str | None,
    ) -> Request | None:
        """``requested_by``'s request with this (session, tool_call_id) or key, or None.

        Only the same requester's: another requester's ids never match.
        """

    async def list_requests(self, query: RequestQuery) -> Page:
        """Requests matching ``query``, newest first by (created_at, id)."""

    async def due_requests(self, now: datetime, limit: int = 100) -> list[Request]:
        """Pending requests whose expiry is at or before ``now``, oldest expiry first."""

    async def lapsed_claims(self, now: datetime, limit: int = 100) -> list[Request]:
        """Executing calls whose claim's lease ended at or before ``now``, oldest first."""

    async def get_grant(self, grant_id: str) -> Grant | None:
        """The grant with this id, or None."""

    async def list_grants(
        self, *, tool_name: str | None = None, requested_by: str | None = None
    ) -> list[Grant]:
        """Grants, newest first, optionally for one tool and requester."""

    async def grants_for(self, tool_name: str, requested_by: str) -> GrantsRead:
        """This tool and requester's grants, newest first, and the grants version read no
        later than they were: a write that carries it commits only if no grant was stored
        since."""

    async def find_token(self, token_hash: str) -> TokenRecord | None:
        """The token with this hash, or None."""

    async def get_token(self, token_id: str) -> TokenRecord | None:
        """The token with this id, or None."""

    async def list_tokens(self) -> list[TokenRecord]:
        """All tokens, oldest first."""

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The inbox session with this id (the hash of the cookie's id), or None."""

    async def list_audit(
        self, *, request_id: str | None = None, after_seq: int = 0, limit: int | None = None
    ) -> list[AuditEntry]:
        """Audit entries in chain order, optionally for one request."""

    async def audit_head(self) -> tuple[int, str] | None:
        """The (seq, hash) of the last entry, kept beside the log; None when empty."""

    async def audit_coverage(self, sample: int = 5) -> LogCoverage:
        """What the audit log must account for: request and event counts, the event seq
        span, and up to ``sample`` requests or events it fails to (see LogCoverage)."""

    async def list_events(self, *, after_seq: int = 0, limit: int = 1000) -> list[Event]:
        """Events after ``after_seq``, in order."""

    async def last_event_seq(self) -> int:
        """The seq of the newest event (0 when none)."""

    async def list_webhooks(self) -> list[Webhook]:
        """Webhook endpoints, oldest first."""

    async def get_delivery(self, delivery_id: str) -> Delivery | None:
        """One delivery, or None."""

    async def list_deliveries(
        self, *, status: DeliveryStatus | None = None, limit: int = 100
    ) -> list[Delivery]:
        """Deliveries, newest first."""

    async def due_deliveries(self, now: datetime, limit: int = 100) -> list[Delivery]:
        """Pending deliveries whose next attempt is due, oldest first."""

    async def list_routes(self) -> list[Route]:
        """Stored notification routes, oldest first."""

    async def list_links(self) -> list[PersonLink]:
        """Person links, oldest first."""

    async def get_link(self, kind: LinkKind, external_id: str) -> PersonLink | None:
        """The link of this Slack user id or email address, or None."""

    async def list_notices(
        self, *, route_id: str | None = None, request_id: str | None = None, limit: int = 100
    ) -> list[Notice]:
        """Notices, newest first, of one route and/or one request if given."""

    async def due_notices(self, now: datetime, limit: int = 100) -> list[Notice]:
        """Pending notices whose next attempt is due, oldest due first."""

    async def use_nonce(self, key: str, until: datetime, now: datetime) -> bool:
        """Record ``key`` as used until ``until``: True if it was not already (forgetting
        keys whose time ended by ``now``), False if it was. Atomic across processes."""

    async def get_task(self, task_id: str) -> Task | None:
        """The task with this id, or None."""

    async def find_task(self, request_id: str) -> Task | None:
        """The task that filed this request for one of its pending calls, or None."""

    async def list_tasks(self, *, status: TaskStatus | None = None, limit: int = 100) -> list[Task]:
        """Tasks, newest first (by created_at, then id), optionally of one status."""
