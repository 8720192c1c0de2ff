"""The in-memory store: the reference backend, for tests and throwaway runs."""

from __future__ import annotations

import asyncio
from datetime import datetime

from signoff.domain.audit import (
    GENESIS_HASH,
    AuditEntry,
    LogCoverage,
    committed_entry,
    entry_hash,
)
from signoff.domain.events import Event, committed_event
from signoff.domain.grants import Grant
from signoff.domain.notify import LinkKind, Notice, PersonLink, Route
from signoff.domain.principals import TokenRecord
from signoff.domain.requests import ApprovalRequest, Request
from signoff.domain.sessions import SessionRecord
from signoff.domain.tasks import Task, TaskStatus
from signoff.domain.webhooks import Delivery, DeliveryStatus, Webhook
from signoff.store import search
from signoff.store.base import (
    MAX_PAGE,
    Committed,
    DuplicateRequest,
    GrantsChanged,
    GrantsRead,
    Page,
    RequestQuery,
    VersionConflict,
    Write,
    decode_cursor,
    encode_cursor,
    lapsed_among,
    to_micros,
)

__all__ = ["MemoryStore"]


def _sort_key(request: Request) -> tuple[int, str]:
    return to_micros(request.created_at), request.id


def _decider(r: Request) -> str | None:
    return r.decision.decided_by if r.decision else None


def _listed(r: Request, query: RequestQuery) -> bool:
    """Whether ``r`` passes the query's exact filters (not its text or cursor)."""
    status_ok = (
        query.status is None
        or r.status == query.status
        or (query.status == search.ENDED and r.status != "pending")
    )
    tool = r.tool_name if isinstance(r, ApprovalRequest) else None
    return (
        status_ok
        and (query.session_id is None or r.session_id == query.session_id)
        and (query.kind is None or r.kind == query.kind)
        and (query.requested_by is None or r.requested_by == query.requested_by)
        and (query.decided_by is None or _decider(r) == query.decided_by)
        and (query.tool_name is None or tool == query.tool_name)
    )


class MemoryStore:
    """Keeps everything in dicts and lists; same semantics as the SQL backends."""

    def __init__(self) -> None:
        self._requests: dict[str, Request] = {}
        self._grants: dict[str, Grant] = {}
        self._grants_version = 0
        self._tokens: dict[str, TokenRecord] = {}
        self._sessions: dict[str, SessionRecord] = {}
        self._audit: list[AuditEntry] = []
        self._events: list[Event] = []
        self._webhooks: dict[str, Webhook] = {}
        self._deliveries: dict[str, Delivery] = {}
        self._tasks: dict[str, Task] = {}
        self._task_requests: dict[str, str] = {}
        self._routes: dict[str, Route] = {}
        self._notices: dict[str, Notice] = {}
        self._links: dict[tuple[LinkKind, str], PersonLink] = {}
        self._nonces: dict[str, datetime] = {}
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        """Nothing to connect to."""

    async def close(self) -> None:
        """Nothing to release."""

    async def commit(self, write: Write) -> Committed:
        """Check every precondition first, then apply everything."""
        async with self._lock:
            if write.grants_version not in (None, self._grants_version):
                raise GrantsChanged()
            if write.insert is not None:
                existing = self._duplicate_of(write.insert)
                if existing is not None:
                    raise DuplicateRequest(existing.id)
                if write.insert.id in self._requests:
                    raise DuplicateRequest(write.insert.id)
            if write.update is not None:
                stored = self._requests.get(write.update.id)
                if stored is None or stored.version != write.update.version - 1:
                    raise VersionConflict(write.update.id)
            if write.task is not None:
                task = write.task
                stored_task = self._tasks.get(task.id)
                if task.version == 1:
                    if stored_task is not None:
                        raise VersionConflict(task.id)
                elif stored_task is None or stored_task.version != task.version - 1:
                    raise VersionConflict(task.id)
            for new in (write.insert, write.update):
                if new is not None:
                    self._requests[new.id] = new
            if write.task is not None:
                self._tasks[write.task.id] = write.task
                for request_id in write.task.request_ids:
                    self._task_requests[request_id] = write.task.id
            for grant in write.grants:
                self._grants[grant.id] = grant
            if write.grants:
                self._grants_version += 1
            for token in write.tokens:
                self._tokens[token.id] = token
            for session in write.sessions:
                self._sessions[session.id] = session
            for webhook in write.webhooks:
                self._webhooks[webhook.id] = webhook
            for delivery in write.deliveries:
                self._deliveries[delivery.id] = delivery
            for route in write.routes:
                self._routes[route.id] = route
            for route_id in write.removed_routes:
                self._routes.pop(route_id, None)
            for notice in write.notices:
                self._notices[notice.id] = notice
            for link in write.links:
                self._links[(link.kind, link.external_id)] = link
            for key in write.removed_links:
                self._links.pop(key, None)
            audit: list[AuditEntry] = []
            for draft in write.audit:
                prev = self._audit[-1].hash if self._audit else GENESIS_HASH
                seq = len(self._audit) + 1
                entry = committed_entry(
                    draft,
                    seq=seq,
                    at=write.at,
                    prev_hash=prev,
                    hash=entry_hash(prev_hash=prev, seq=seq, at=write.at, draft=draft),
                )
                self._audit.append(entry)
                audit.append(entry)
            events: list[Event] = []
            for event_draft in write.events:
                event = committed_event(event_draft, seq=len(self._events) + 1, at=write.at)
                self._events.append(event)
                events.append(event)
            return Committed(events=tuple(events), audit=tuple(audit))

    def _duplicate_of(self, new: Request) -> Request | None:
        return self._find_duplicate(
            session_id=new.session_id,
            tool_call_id=new.tool_call_id if isinstance(new, ApprovalRequest) else None,
            requested_by=new.requested_by,
            idempotency_key=new.idempotency_key,
        )

    def _find_duplicate(
        self,
        *,
        session_id: str,
        tool_call_id: str | None,
        requested_by: str,
        idempotency_key: str | None,
    ) -> Request | None:
        if tool_call_id is None and idempotency_key is None:
            return None  # nothing to repeat: no scan of every request
        for existing in self._requests.values():
            if (
                tool_call_id is not None
                and isinstance(existing, ApprovalRequest)
                and existing.session_id == session_id
                and existing.tool_call_id == tool_call_id
                and existing.requested_by == requested_by
            ):
                return existing
            if (
                idempotency_key is not None
                and existing.requested_by == requested_by
                and existing.idempotency_key == idempotency_key
            ):
                return existing
        return None

    async def get_request(self, request_id: str) -> Request | None:
        """The request, or None."""
        return self._requests.get(request_id)

    async def find_duplicate(
        self,
        *,
        session_id: str,
        tool_call_id: str | None,
        requested_by: str,
        idempotency_key: str | None,
    ) -> Request | None:
        """Linear scan; fine for a store that lives in a test."""
        return self._find_duplicate(
            session_id=session_id,
            tool_call_id=tool_call_id,
            requested_by=requested_by,
            idempotency_key=idempotency_key,
        )

    async def list_requests(self, query: RequestQuery) -> Page:
        """Filter, sort newest first, cut after the cursor."""
        limit = max(1, min(query.limit, MAX_PAGE))
        after = decode_cursor(query.cursor) if query.cursor else None
        wanted = search.words(query.text) if query.text is not None else None
        rows = sorted(
            (
                r
                for r in self._requests.values()
                if _listed(r, query)
                and (wanted is None or search.matches(r, wanted))
                and (after is None or _sort_key(r) < after)
            ),
            key=_sort_key,
            reverse=True,
        )
        items = rows[:limit]
        more = len(rows) > limit
        cursor = encode_cursor(*_sort_key(items[-1])) if more and items else None
        return Page(items=items, next_cursor=cursor)

    async def due_requests(self, now: datetime, limit: int = 100) -> list[Request]:
        """Pending requests past their expiry."""
        due = [
            r
            for r in self._requests.values()
            if r.status == "pending" and r.expires_at is not None and r.expires_at <= now
        ]
        due.sort(key=lambda r: (r.expires_at, r.id))
        return due[:limit]

    async def lapsed_claims(self, now: datetime, limit: int = 100) -> list[Request]:
        """Executing calls whose claim's lease ended, oldest lease first."""
        return lapsed_among(self._requests.values(), now, limit)

    async def get_grant(self, grant_id: str) -> Grant | None:
        """The grant, or None."""
        return self._grants.get(grant_id)

    async def list_grants(
        self, *, tool_name: str | None = None, requested_by: str | None = None
    ) -> list[Grant]:
        """Grants, newest first."""
        grants = [
            g
            for g in self._grants.values()
            if (tool_name is None or g.tool_name == tool_name)
            and (requested_by is None or g.requested_by == requested_by)
        ]
        grants.sort(key=lambda g: (g.created_at, g.id), reverse=True)
        return grants

    async def grants_for(self, tool_name: str, requested_by: str) -> GrantsRead:
        """This tool and requester's grants, newest first, and the grants version."""
        async with self._lock:  # not halfway through a commit's grants
            version = self._grants_version
            grants = await self.list_grants(tool_name=tool_name, requested_by=requested_by)
        return GrantsRead(version, tuple(grants))

    async def find_token(self, token_hash: str) -> TokenRecord | None:
        """The token with this hash, or None."""
        return next((t for t in self._tokens.values() if t.token_hash == token_hash), None)

    async def get_token(self, token_id: str) -> TokenRecord | None:
        """The token with this id, or None."""
        return self._tokens.get(token_id)

    async def list_tokens(self) -> list[TokenRecord]:
        """All tokens, oldest first."""
        return sorted(self._tokens.values(), key=lambda t: (t.created_at, t.id))

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The inbox session, or None."""
        return self._sessions.get(session_id)

    async def list_audit(
        self, *, request_id: str | None = None, after_seq: int = 0, limit: int | None = None
    ) -> list[AuditEntry]:
        """Entries in chain order."""
        entries = [
            e
            for e in self._audit
            if e.seq > after_seq and (request_id is None or e.request_id == request_id)
        ]
        return entries if limit is None else entries[:limit]

    async def audit_head(self) -> tuple[int, str] | None:
        """The last entry's seq and hash."""
        return (self._audit[-1].seq, self._audit[-1].hash) if self._audit else None

    async def audit_coverage(self, sample: int = 5) -> LogCoverage:
        """Counted from the dicts and lists."""
        submitted = {e.request_id for e in self._audit if e.action == "submit"}
        unaudited = [rid for rid in self._requests if rid not in submitted]
        unknown = sorted(rid for rid in submitted if rid is not None and rid not in self._requests)
        orphans = [e.seq for e in self._events if e.request.id not in submitted]
        seqs = [e.seq for e in self._events]
        announced: dict[str, int] = {}
        for e in self._events:
            announced[e.request.id] = max(announced.get(e.request.id, 0), e.request.version)
        unannounced = sorted(
            r.id for r in self._requests.values() if announced.get(r.id, 0) < r.version
        )
        return LogCoverage(
            requests=len(self._requests),
            unaudited_requests=tuple(sorted(unaudited)[:sample]),
            unknown_requests=tuple(unknown[:sample]),
            events=len(self._events),
            first_event_seq=min(seqs, default=None),
            last_event_seq=max(seqs, default=None),
            orphan_events=tuple(orphans[:sample]),
            unannounced_requests=tuple(unannounced[:sample]),
        )

    async def list_events(self, *, after_seq: int = 0, limit: int = 1000) -> list[Event]:
        """Events after ``after_seq``."""
        return self._events[after_seq : after_seq + limit]

    async def last_event_seq(self) -> int:
        """The newest event's seq."""
        return len(self._events)

    async def list_webhooks(self) -> list[Webhook]:
        """Webhook endpoints, oldest first."""
        return sorted(self._webhooks.values(), key=lambda w: (w.created_at, w.id))

    async def get_delivery(self, delivery_id: str) -> Delivery | None:
        """One delivery, or None."""
        return self._deliveries.get(delivery_id)

    async def list_deliveries(
        self, *, status: DeliveryStatus | None = None, limit: int = 100
    ) -> list[Delivery]:
        """Deliveries, newest first."""
        found = [d for d in self._deliveries.values() if status is None or d.status == status]
        found.sort(key=lambda d: (d.created_at, d.event_seq, d.id), reverse=True)
        return found[:limit]

    async def due_deliveries(self, now: datetime, limit: int = 100) -> list[Delivery]:
        """Pending deliveries whose next attempt is due, oldest first, in event order."""
        due = [
            d
            for d in self._deliveries.values()
            if d.status == "pending" and d.next_attempt_at <= now
        ]
        due.sort(key=lambda d: (d.next_attempt_at, d.event_seq, d.id))
        return due[:limit]

    async def list_routes(self) -> list[Route]:
        """Stored notification routes, oldest first."""
        return sorted(self._routes.values(), key=lambda r: (to_micros(r.created_at), r.id))

    async def list_links(self) -> list[PersonLink]:
        """Person links, oldest first."""
        return sorted(
            self._links.values(), key=lambda p: (to_micros(p.created_at), p.kind, p.external_id)
        )

    async def get_link(self, kind: LinkKind, external_id: str) -> PersonLink | None:
        """The link of this Slack user id or email address, or None."""
        return self._links.get((kind, external_id))

    async def list_notices(
        self, *, route_id: str | None = None, request_id: str | None = None, limit: int = 100
    ) -> list[Notice]:
        """Notices, newest first, of one route and/or one request if given."""
        found = [
            n
            for n in self._notices.values()
            if (route_id is None or n.route_id == route_id)
            and (request_id is None or n.request_id == request_id)
        ]
        found.sort(key=lambda n: (to_micros(n.created_at), n.id), reverse=True)
        return found[:limit]

    async def due_notices(self, now: datetime, limit: int = 100) -> list[Notice]:
        """Pending notices whose next attempt is due, oldest due first."""
        due = [
            n for n in self._notices.values() if n.status == "pending" and n.next_attempt_at <= now
        ]
        due.sort(key=lambda n: (to_micros(n.next_attempt_at), n.id))
        return due[:limit]

    async def use_nonce(self, key: str, until: datetime, now: datetime) -> bool:
        """Record ``key`` as used until ``until``; False if it already was."""
        async with self._lock:
            for old in [k for k, end in self._nonces.items() if end <= now]:
                del self._nonces[old]
            if key in self._nonces:
                return False
            self._nonces[key] = until
            return True

    async def get_task(self, task_id: str) -> Task | None:
        """The task, or None."""
        return self._tasks.get(task_id)

    async def find_task(self, request_id: str) -> Task | None:
        """The task that filed this request, or None."""
        task_id = self._task_requests.get(request_id)
        return self._tasks.get(task_id) if task_id is not None else None

    async def list_tasks(self, *, status: TaskStatus | None = None, limit: int = 100) -> list[Task]:
        """Tasks, newest first by (created_at, id)."""
        found = [t for t in self._tasks.values() if status is None or t.status == status]
        found.sort(key=lambda t: (to_micros(t.created_at), t.id), reverse=True)
        return found[:limit]
