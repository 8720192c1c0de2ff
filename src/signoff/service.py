"""The service: the only writer of signoff's state.

Every operation reads a request, asks ``domain.transitions`` whether the change is legal,
and commits the new version, its audit entry and its events in one conditional write.
Events are published only after that write has committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from pydantic import JsonValue, ValidationError

from signoff.bus.follower import EventLogFollower
from signoff.bus.local import EventBus, LocalBus, Subscription
from signoff.config import follower_for, shared
from signoff.domain.audit import (
    GENESIS_HASH,
    Anchor,
    AuditDraft,
    AuditEntry,
    ChainReport,
    parse_anchor,
    verify_log,
)
from signoff.domain.clock import Clock, system_clock
from signoff.domain.decisions import (
    Approve,
    Channel,
    Decision,
    DecisionAdapter,
    DecisionRecord,
    require_reason,
)
from signoff.domain.edits import EditPreview, args_preview, check_may_edit, edit_preview
from signoff.domain.events import Event, EventType, event_draft
from signoff.domain.grants import Grant, args_digest
from signoff.domain.notify import (
    LinkKind,
    Notice,
    PersonLink,
    Route,
    RouteSpec,
    RouteStatus,
    WebhookTarget,
    new_route_id,
)
from signoff.domain.policies import Governance, Policy, PolicyDecision
from signoff.domain.previews import MAX_PREVIEW_BYTES, FilePreview, FileReader
from signoff.domain.principals import (
    DECIDER_ROLES,
    Principal,
    Role,
    TokenRecord,
    hash_token,
    new_token,
)
from signoff.domain.requests import ApprovalRequest, Request
from signoff.domain.sessions import SessionRecord, hash_session_id, new_session_id
from signoff.domain.submission import NewRequest, build_request, rejected_record
from signoff.domain.tasks import (
    TASK_TRANSITIONS,
    PendingCall,
    Task,
    TaskStatus,
    may_see_conversation,
    may_see_task,
    new_task_id,
)
from signoff.domain.terms import Terms, settle
from signoff.domain.transitions import (
    DEFAULT_LEASE,
    Change,
    apply_decision,
    approved_by_grant,
    cancel,
    check_may_decide,
    claim,
    expire,
    finish,
    is_overdue,
    lapse,
    lease_ended,
    refuse_claim,
    renew,
)
from signoff.domain.webhooks import (
    Delivery,
    DeliveryStatus,
    Webhook,
    WebhookFormat,
    new_webhook_id,
)
from signoff.errors import (
    AuditChainBroken,
    CallerError,
    GrantNotFound,
    InvalidDecision,
    InvalidRequest,
    InvalidTransition,
    NotAllowed,
    RequestNotFound,
    RouteNotFound,
    RuntimeFailure,
    SignoffError,
    StoreUnavailable,
    TaskNotFound,
    TokenNotFound,
    Unauthenticated,
)
from signoff.store.base import (
    DuplicateRequest,
    GrantsChanged,
    GrantsRead,
    Page,
    RequestQuery,
    Store,
    VersionConflict,
    Write,
)
from signoff.webhook_targets import check_target

__all__ = [
    "SYSTEM",
    "BatchOutcome",
    "Service",
    "Submitted",
    "read_text_file",
    "service_for",
    "validation_message",
]

logger = logging.getLogger("signoff.service")

SYSTEM = Principal(name="system", role="admin")
"""The principal of signoff's own actions (the expiry sweeper)."""

_RETRIES = 50
_GRANT_KEYS = 4096
"""Tools and requesters a service keeps the live grants of, at most."""
_TASK_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_RECENT = 10_000
_NO_GOVERNANCE = Governance()
"""Who decides a request when there is no policy (frozen: one for every submit)."""
_BUILT_IN_TERMS = Terms()
"""A request's terms when there is no policy."""


@dataclass(frozen=True)
class Submitted:
    """The outcome of a submit: the request, and whether this call created it."""

    request: Request
    created: bool


@dataclass(frozen=True)
class BatchOutcome:
    """One id's outcome in a batch decision: the new status, or the error."""

    id: str
    status: str | None = None
    error: SignoffError | None = None


def validation_message(exc: ValidationError) -> str:
    """One line naming the first invalid field and what is wrong with it."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg


def read_text_file(path: str) -> str | None:
    """The text of a file for a diff preview, or None if it does not exist or is unreadable."""
    try:
        p = Path(path).expanduser()
        if not p.is_file() or p.stat().st_size > MAX_PREVIEW_BYTES:
            return None
        return p.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


class Service:
    """Submit, decide, wait, claim, complete, cancel and expire requests; the one writer."""

    def __init__(
        self,
        store: Store,
        *,
        bus: EventBus | None = None,
        policy: Policy | None = None,
        clock: Clock = system_clock,
        read_file: FileReader | None = read_text_file,
        follow: bool | None = None,
    ) -> None:
        """``follow``: while open, publish on ``bus`` the events other processes write to
        the store (a SQLite file is tailed every 0.2 s, PostgreSQL is LISTENed to), so
        :meth:`wait`, watchers and integrations here wake for decisions made elsewhere.
        None (the default) follows when other processes can share the store: a SQLite file
        or PostgreSQL, not the in-memory store."""
        self.store = store
        self.bus: EventBus = bus if bus is not None else LocalBus()
        self.policy = policy
        self.clock = clock
        self._read_file = read_file
        self._follow = shared(store) if follow is None else follow
        self._follower: EventLogFollower | None = None
        self._sweeper: asyncio.Task[None] | None = None
        # the latest version this service wrote or followed of each request that can still
        # change (a change may start from it without a read); a final version is not kept
        self._recent: OrderedDict[str, Request] = OrderedDict()
        # the live grants of a tool and requester, read once and used until a write decided
        # against them is refused (GrantsChanged): a grant stored anywhere since
        self._grants: OrderedDict[tuple[str, str], GrantsRead] = OrderedDict()

    @property
    def follower(self) -> EventLogFollower | None:
        """What brings other processes' events onto the bus while open; None when not following."""
        return self._follower

    async def open(self) -> Self:
        """Open the store (migrating it if needed), then follow other processes' events."""
        await self.store.open()
        if self._follow and self._follower is None:
            follower = follower_for(self.store, _Followed(self.bus, self._remember))
            try:
                await follower.start()
            except BaseException:
                await self.store.close()
                raise
            self._follower = follower
        return self

    async def close(self) -> None:
        """Stop following and the sweeper, then close the store."""
        follower, self._follower = self._follower, None
        if follower is not None:
            await follower.stop()
        await self.stop_sweeper()
        await self.store.close()

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- writing -------------------------------------------------------------------------

    async def _commit(self, write: Write) -> None:
        committed = await self.store.commit(write)
        if write.grants:
            self._grants.clear()  # read again, rather than be refused once
        for written in (write.insert, write.update):
            if written is not None:
                self._remember(written)
        await self.bus.publish(committed.events)

    def _remember(self, request: Request) -> None:
        """Keep ``request`` as the version a change here may start from: one this service
        wrote, or one another process wrote and the follower brought (its event carries the
        request as stored). An older version than the one kept is ignored; a final one is
        dropped, since it never changes again."""
        held = self._recent.get(request.id)
        if held is not None and held.version >= request.version:
            return
        if request.is_terminal:
            self._recent.pop(request.id, None)
            return
        self._recent[request.id] = request
        self._recent.move_to_end(request.id)
        if len(self._recent) > _RECENT:
            self._recent.popitem(last=False)

    async def submit(
        self,
        new: NewRequest | Mapping[str, Any],
        principal: Principal,
        *,
        started_by: str | None = None,
    ) -> Submitted:
        """Open a request; the same requester's session + tool_call_id (or key) returns it again.

        Policy may decide at once (``allow`` approves, ``deny`` rejects), and a live standing
        grant that covers the call approves it; the audit says which. ``started_by`` (never
        from the agent: the server's hosted runs set it) records who started the run.
        """
        if principal.role not in ("agent", "admin"):
            raise NotAllowed(f"{principal.name} is an {principal.role} and may not submit requests")
        if not isinstance(new, NewRequest):
            try:
                new = NewRequest.model_validate(new)
            except ValidationError as exc:
                raise InvalidRequest(validation_message(exc)) from None
        if new.tool_call_id is not None or new.idempotency_key is not None:
            existing = await self.store.find_duplicate(
                session_id=new.session_id,
                tool_call_id=new.tool_call_id,
                requested_by=principal.name,
                idempotency_key=new.idempotency_key,
            )
            if existing is not None:
                existing = _own_duplicate(existing, principal)
                _same_call(existing, new)
                return Submitted(existing, created=False)
        now = self.clock()
        verdict: PolicyDecision | None = None
        governance = _NO_GOVERNANCE
        if self.policy is not None:
            if new.kind == "approval":
                assert new.tool_name is not None
                verdict = self.policy.evaluate(new.tool_name, new.tool_args or {})
                governance = verdict.governance
            else:
                governance = self.policy.governance()
        terms = _BUILT_IN_TERMS
        if verdict is not None and verdict.terms is not None:
            terms = verdict.terms
        elif self.policy is not None:
            terms = self.policy.terms(new.kind)
        settled = settle(
            new.kind,
            terms,
            expires_in=new.expires_in,
            on_expire=new.on_expire,
            allowed_decisions=new.allowed_decisions,
        )
        preview = self._preview(new)
        request = build_request(
            new,
            requested_by=principal.name,
            now=now,
            approvers=governance.approvers,
            quorum=governance.quorum,
            allow_self_approval=governance.allow_self_approval,
            started_by=started_by,
            starter_may_approve=governance.starter_may_approve,
            policy_note=verdict.explain() if verdict is not None else None,
            preview=preview,
            settled=settled,
        )
        audit: list[AuditDraft] = [
            # the request was just validated: its JSON form needs no second check
            AuditDraft.model_construct(
                action="submit",
                actor=principal.name,
                request_id=request.id,
                to_status="pending",
                details={"request": request.model_dump(mode="json")},
            )
        ]
        for _ in range(_RETRIES):
            decided, auto, grants_version = await self._decide_at_submit(request, verdict, now)
            events = [event_draft("created", decided)]
            if auto is not None:
                events.append(event_draft("decided", decided))
            write = Write(
                at=now,
                insert=decided,
                audit=(*audit, auto) if auto is not None else tuple(audit),
                events=tuple(events),
                grants_version=grants_version,
            )
            try:
                await self._commit(write)
            except GrantsChanged:
                self._grants.clear()  # decide again, on the grants as they are now
                continue
            except DuplicateRequest as dup:
                again = _own_duplicate(await self.store.get_request(dup.existing_id), principal)
                _same_call(again, new)
                return Submitted(again, created=False)
            return Submitted(decided, created=True)
        raise InvalidTransition("the standing grants keep changing; submit again")

    def confine_previews(self, read_file: FileReader | None) -> None:
        """Read files for diff previews only through ``read_file``, or (None) not at all.

        A server calls this before it takes requests over HTTP: the default reader is for a
        service inside the agent's own process, reading the agent's own workspace.
        """
        self._read_file = read_file

    def _preview(self, new: NewRequest) -> FilePreview | None:
        if new.kind != "approval" or not new.tool_args:
            return None
        return args_preview(new.tool_args, self._read_file)

    async def preview_edit(
        self, request_id: str, args: Mapping[str, JsonValue], principal: Principal
    ) -> EditPreview:
        """The call's preview made again for a person's edited ``args``, and how they misfit
        the tool's schema; changes nothing.

        Refused as approving would be (an agent first, whatever the id); the preview is
        made by the function and file reader that made the request's own.
        """
        check_may_decide(principal)
        request = await self.get(request_id, principal)
        editable = check_may_edit(request, args, principal, self.clock())
        # off the event loop: a diff of a large file takes a while
        return await asyncio.to_thread(edit_preview, editable, args, self._read_file)

    async def _decide_at_submit(
        self, request: Request, verdict: PolicyDecision | None, now: datetime
    ) -> tuple[Request, AuditDraft | None, int | None]:
        """The request as decided at once (by policy or a grant, with its audit entry, or
        as it is), and the grants version it was decided against, if grants were read."""
        if not isinstance(request, ApprovalRequest):
            return request, None, None
        if verdict is not None and verdict.verdict == "deny":
            record = rejected_record(
                f"denied by policy: {verdict.explain()}", by="policy", at=now, via="policy"
            )
            new: Request = request.model_copy(update={"status": "rejected", "decision": record})
            return new, _auto_audit(new, "policy", {"policy": verdict.explain()}), None
        if verdict is not None and verdict.verdict == "allow":
            digest = args_digest(request.tool_name, request.tool_args)
            record = DecisionRecord(
                decision=Approve(), decided_by="policy", decided_at=now, via="policy"
            )
            new = request.model_copy(
                update={
                    "status": "approved",
                    "decision": record,
                    "approved_args": request.tool_args,
                    "args_digest": digest,
                }
            )
            return new, _auto_audit(new, "policy", {"policy": verdict.explain()}), None
        read = await self._live_grants(request.tool_name, request.requested_by, now)
        for grant in read.grants:
            if grant.covers(
                tool_name=request.tool_name,
                session_id=request.session_id,
                requested_by=request.requested_by,
                args=request.tool_args,
                now=now,
                started_by=request.started_by,
            ):
                new = approved_by_grant(request, grant, now)
                audit = _auto_audit(
                    new, "grant", {"grant_id": grant.id, "grant_scope": grant.scope}
                )
                return new, audit, read.version
        return request, None, read.version

    async def _live_grants(self, tool_name: str, requested_by: str, now: datetime) -> GrantsRead:
        """The live grants of this tool and requester: kept from the last read, which a
        write carrying its version checks is still current as it commits."""
        key = (tool_name, requested_by)
        read = self._grants.get(key)
        if read is not None:
            self._grants.move_to_end(key)
            return read
        read = await self.store.grants_for(tool_name, requested_by)
        read = GrantsRead(read.version, tuple(g for g in read.grants if g.is_live(now)))
        self._grants[key] = read
        if len(self._grants) > _GRANT_KEYS:
            self._grants.popitem(last=False)
        return read

    async def _change(
        self, request_id: str, make: Callable[[Request, datetime], Change]
    ) -> Request:
        """Apply ``make`` to the current version, retrying when someone wrote in between.

        The first try may start from the version this service last wrote (saving a read);
        that is safe because the write is conditional on the version: a stale start ends in
        a conflict or a refusal, and then the change is tried again on a fresh read.
        """
        fresh = False
        for _ in range(_RETRIES):
            request = None if fresh else self._recent.get(request_id)
            if request is None:
                request = await self._get(request_id)
                fresh = True
            now = self.clock()
            if is_overdue(request, now):
                await self._expire(request, now)
                fresh = True
                continue
            if lease_ended(request, now):
                await self._lapse(request, now)
                fresh = True
                continue
            try:
                change = make(request, now)
            except CallerError:
                if fresh:
                    raise
                fresh = True
                continue
            event_type = "decided" if change.decided else _event_type(change)
            events = [event_draft(event_type, change.request)]
            try:
                await self._commit(
                    Write(
                        at=now,
                        update=change.request,
                        grants=(change.grant,) if change.grant else (),
                        audit=(change.audit, *_grant_audit(change)),
                        events=tuple(events),
                    )
                )
            except VersionConflict:
                fresh = True
                continue
            return change.request
        raise InvalidTransition(f"request {request_id} keeps changing; try again")

    async def _expire(self, request: Request, now: datetime) -> Request | None:
        """Expire an overdue request; None when someone else changed it first."""
        change = expire(request, now)
        return await self._system_change(change, "decided" if change.decided else "status", now)

    async def _lapse(self, request: Request, now: datetime) -> Request | None:
        """Fail a call whose claim's lease ended; None when someone else changed it first."""
        return await self._system_change(lapse(request, now), "result", now)

    async def _system_change(
        self, change: Change, event_type: EventType, now: datetime
    ) -> Request | None:
        """Commit a change signoff makes by itself, once: None when the request moved on."""
        event = event_draft(event_type, change.request)
        try:
            await self._commit(
                Write(at=now, update=change.request, audit=(change.audit,), events=(event,))
            )
        except VersionConflict:
            return None
        return change.request

    async def decide(
        self,
        request_id: str,
        decision: Decision | Mapping[str, Any],
        principal: Principal,
        *,
        via: Channel = "person",
        client: str | None = None,
    ) -> Request:
        """Record a decision: of concurrent deciders one wins, the rest get InvalidTransition.

        Every path that decides (HTTP, batch, resume, MCP elicitation, CLI) comes through
        here, and an agent is refused before anything is read or written. ``via`` and
        ``client`` record a decision made in an MCP client's prompt as such.
        """
        check_may_decide(principal)
        parsed = _parse_decision(decision)
        return await self._change(
            request_id,
            lambda r, now: apply_decision(r, parsed, principal, now, via=via, client=client),
        )

    async def decide_many(
        self,
        request_ids: Sequence[str],
        decision: Decision | Mapping[str, Any],
        principal: Principal,
    ) -> list[BatchOutcome]:
        """Decide several requests alike; each succeeds or fails on its own.

        An agent's batch is refused as a whole, so it learns nothing about any id; so is
        a rejection without a reason.
        """
        check_may_decide(principal)
        parsed = _parse_decision(decision)
        require_reason(parsed)

        async def one(request_id: str) -> BatchOutcome:
            try:
                # an id the caller may not see gets what an unknown id gets, whatever its state
                await self.get(request_id, principal)
                request = await self.decide(request_id, parsed, principal)
            except SignoffError as exc:
                return BatchOutcome(id=request_id, error=exc)
            return BatchOutcome(id=request_id, status=request.status)

        return list(await asyncio.gather(*(one(i) for i in dict.fromkeys(request_ids))))

    async def decide_all(
        self,
        decisions: Sequence[tuple[str, Decision | Mapping[str, Any]]],
        principal: Principal,
    ) -> list[Request]:
        """Decide several requests, each its own way, as one answer (an AG-UI resume).

        Every decision is checked against its request, as :meth:`decide` would, before any
        is recorded: one refused (a forged option, a self-approval governance forbids) leaves
        them all as they were. A request no longer pending is skipped, so an answer sent
        twice changes nothing; the requests decided here are returned.
        """
        check_may_decide(principal)
        parsed = [(request_id, _parse_decision(d)) for request_id, d in decisions]
        now = self.clock()
        ready: list[tuple[str, Decision]] = []
        for request_id, decision in parsed:
            request = await self.get(request_id, principal)
            if request.status != "pending" or is_overdue(request, now):
                continue
            apply_decision(request, decision, principal, now)  # what decide() would refuse
            ready.append((request_id, decision))
        decided: list[Request] = []
        for request_id, decision in ready:
            with contextlib.suppress(InvalidTransition):  # decided elsewhere meanwhile
                decided.append(await self.decide(request_id, decision, principal))
        return decided

    async def claim(
        self,
        request_id: str,
        args: Mapping[str, JsonValue],
        principal: Principal,
        *,
        lease: float | None = None,
    ) -> Request:
        """Take an approved call for execution: once, and only with the approved args.

        The claim holds for ``lease`` seconds (default ``DEFAULT_LEASE``); past it, unless
        the claimant reported or renewed, the sweeper fails the call, never to run again.
        """
        span = DEFAULT_LEASE if lease is None else lease
        try:
            return await self._change(
                request_id,
                lambda r, now: claim(_seen(r, principal), dict(args), principal, now, lease=span),
            )
        except InvalidDecision as refused:
            # the approved args break the tool's schema: the call must never run, so it
            # ends failed with the reason instead of staying approved for another claim
            await self._change(
                request_id,
                lambda r, now: refuse_claim(_seen(r, principal), dict(args), principal, now),
            )
            raise InvalidDecision(f"{refused.message}; it is now failed") from None

    async def renew(
        self, request_id: str, principal: Principal, *, lease: float | None = None
    ) -> Request:
        """Extend the lease of a call ``principal`` claimed to ``lease`` seconds from now."""
        span = DEFAULT_LEASE if lease is None else lease
        return await self._change(
            request_id, lambda r, now: renew(_seen(r, principal), principal, now, lease=span)
        )

    async def complete(
        self, request_id: str, principal: Principal, result: JsonValue = None
    ) -> Request:
        """Record that a claimed call ran and succeeded."""
        return await self._change(
            request_id,
            lambda r, now: finish(
                _seen(r, principal),
                ok=True,
                result=result,
                error=None,
                principal=principal,
                now=now,
            ),
        )

    async def fail(self, request_id: str, principal: Principal, error: str) -> Request:
        """Record that a claimed call ran and failed."""
        return await self._change(
            request_id,
            lambda r, now: finish(
                _seen(r, principal),
                ok=False,
                result=None,
                error=error,
                principal=principal,
                now=now,
            ),
        )

    async def cancel(self, request_id: str, principal: Principal, reason: str = "") -> Request:
        """Withdraw a pending request (its asker, or an admin); RequestNotFound for another
        agent's."""
        return await self._change(
            request_id, lambda r, now: cancel(_seen(r, principal), principal, now, reason)
        )

    async def expire_due(self, limit: int = 100) -> int:
        """Expire every overdue pending request and fail every executing call whose lease
        ended; how many this call changed."""
        count = 0
        while True:
            now = self.clock()
            lapsed = await self.store.lapsed_claims(now, limit)
            for request in lapsed:
                if await self._lapse(request, now) is not None:
                    count += 1
            if len(lapsed) < limit:
                break
        while True:
            now = self.clock()
            due = await self.store.due_requests(now, limit)
            if not due:
                return count
            for request in due:
                if await self._expire(request, now) is not None:
                    count += 1
            if len(due) < limit:
                return count

    async def run_sweeper(self, interval: float = 1.0) -> None:
        """Expire overdue requests every ``interval`` seconds, forever."""
        while True:
            try:
                await self.expire_due()
            except StoreUnavailable as exc:  # e.g. a database restart: try again next round
                logger.warning("expiry sweeper: %s", exc.message)
            await asyncio.sleep(interval)

    def start_sweeper(self, interval: float = 1.0) -> None:
        """Run the expiry sweeper in the background until ``close``."""
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(self.run_sweeper(interval), name="signoff-sweeper")

    async def stop_sweeper(self) -> None:
        """Stop the background sweeper, if running."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None

    # -- grants and tokens ---------------------------------------------------------------

    async def list_grants(
        self, *, live_only: bool = False, principal: Principal | None = None
    ) -> list[Grant]:
        """Standing grants, newest first (not for agents)."""
        if principal is not None and principal.role == "agent":
            raise NotAllowed("agents may not list grants")
        grants = await self.store.list_grants()
        if live_only:
            now = self.clock()
            grants = [g for g in grants if g.is_live(now)]
        return grants

    async def revoke_grant(self, grant_id: str, principal: Principal) -> Grant:
        """Stop a standing grant approving anything more."""
        if principal.role not in ("approver", "admin"):
            raise NotAllowed(f"{principal.name} is an {principal.role} and may not revoke grants")
        grant = await self.store.get_grant(grant_id)
        if grant is None:
            raise GrantNotFound(grant_id)
        if grant.revoked_at is not None:
            raise InvalidTransition(f"grant {grant_id} was already revoked")
        now = self.clock()
        revoked = grant.model_copy(update={"revoked_at": now, "revoked_by": principal.name})
        audit = AuditDraft(
            action="grant.revoke",
            actor=principal.name,
            request_id=grant.source_request_id,
            details={"grant_id": grant.id, "tool_name": grant.tool_name},
        )
        await self._commit(Write(at=now, grants=(revoked,), audit=(audit,)))
        return revoked

    async def create_token(
        self,
        name: str,
        role: Role,
        *,
        created_by: str = "local",
        principal: Principal | None = None,
    ) -> tuple[str, TokenRecord]:
        """A new token for ``name``; the token is returned once and only its hash is stored.

        Given ``principal``, only an admin may, and the token is recorded as theirs.
        """
        if principal is not None:
            _admins_only(principal, "create tokens")
            created_by = principal.name
        if not name.strip() or len(name) > 200:
            raise InvalidRequest("a token name must be 1 to 200 characters")
        token = new_token()
        now = self.clock()
        record = TokenRecord(
            id="tok_" + hash_token(token)[:12],
            name=name,
            role=role,
            token_hash=hash_token(token),
            created_at=now,
        )
        audit = AuditDraft(
            action="token.create",
            actor=created_by,
            details={"token_id": record.id, "name": name, "role": role},
        )
        await self._commit(Write(at=now, tokens=(record,), audit=(audit,)))
        return token, record

    async def list_tokens(self, principal: Principal | None = None) -> list[TokenRecord]:
        """Every token's record (admins)."""
        if principal is not None:
            _admins_only(principal, "list tokens")
        return await self.store.list_tokens()

    async def revoke_token(self, token_id: str, principal: Principal) -> TokenRecord:
        """Stop a token authenticating anyone, and end the inbox sessions signed in with it."""
        if principal.role != "admin":
            raise NotAllowed(f"{principal.name} is an {principal.role} and may not revoke tokens")
        record = await self.store.get_token(token_id)
        if record is None:
            raise TokenNotFound(token_id)
        if record.revoked_at is not None:
            raise InvalidTransition(f"token {token_id} was already revoked")
        now = self.clock()
        revoked = record.model_copy(update={"revoked_at": now})
        audit = AuditDraft(
            action="token.revoke",
            actor=principal.name,
            details={"token_id": record.id, "name": record.name, "role": record.role},
        )
        await self._commit(Write(at=now, tokens=(revoked,), audit=(audit,)))
        return revoked

    async def authenticate(self, token: str) -> Principal:
        """The principal a bearer token stands for."""
        record = await self.store.find_token(hash_token(token))
        if record is None or record.revoked_at is not None:
            raise Unauthenticated("unknown or revoked token")
        return record.principal

    async def metrics_reader(self, token: str) -> Principal:
        """The admin a bearer token stands for: only admins read a server's metrics (the
        server's own metrics token aside, which is no principal)."""
        principal = await self.authenticate(token)
        _admins_only(principal, "read the metrics")
        return principal

    # -- tasks ---------------------------------------------------------------------------

    async def create_task(
        self,
        *,
        agent: str,
        user: str,
        prompt: str = "",
        session_id: str | None = None,
        status: TaskStatus = "Running",
        messages: str = "[]",
        pending: tuple[PendingCall, ...] = (),
        task_id: str | None = None,
    ) -> Task:
        """Store a new task: ``user``'s run of ``agent``, under a new unguessable id.

        ``task_id`` names it instead (a client's own thread id, 1 to 128 of ``A-Za-z0-9_.:-``;
        InvalidRequest otherwise): an id already taken is InvalidTransition, nothing stored.
        ``session_id`` (where its requests are filed) is the task's id unless given.
        """
        now = self.clock()
        if task_id is not None and not _TASK_ID.fullmatch(task_id):
            raise InvalidRequest("a task id is 1 to 128 letters, digits and _ . : -")
        task_id = task_id or new_task_id()
        task = Task(
            id=task_id,
            agent=agent,
            session_id=session_id or task_id,
            user=user,
            status=status,
            created_at=now,
            updated_at=now,
            prompt=prompt,
            messages=messages,
            pending=pending,
        )
        await self._commit_task(task, now)
        return task

    async def save_task(self, task: Task) -> Task:
        """Store ``task``, changed from the version it was read at, as its next version.

        The write is conditional on that version: when someone saved the task meanwhile
        (a second resumer of one pause), InvalidTransition and nothing is stored.
        """
        now = self.clock()
        saved = task.model_copy(update={"version": task.version + 1, "updated_at": now})
        await self._commit_task(saved, now)
        return saved

    async def _commit_task(self, task: Task, now: datetime) -> None:
        try:
            await self._commit(Write(at=now, task=task))
        except VersionConflict:
            raise InvalidTransition(
                f"task {task.id} was changed by someone else since version "
                f"{task.version - 1} was read; read it again",
                status=task.status,
            ) from None

    async def get_task(self, task_id: str, principal: Principal | None = None) -> Task:
        """The task; TaskNotFound when unknown or not visible to ``principal``.

        Its user, approvers and admins see a task; nobody else learns that it exists.
        """
        task = await self.store.get_task(task_id)
        if task is None or (principal is not None and not may_see_task(task, principal)):
            raise TaskNotFound(task_id)
        return task

    async def get_conversation(self, task_id: str, principal: Principal) -> Task:
        """The task as a conversation: its user's and admins' only.

        Anyone else gets TaskNotFound, as for an unknown id; an agent that is not its user
        is refused (NotAllowed), like an agent deciding.
        """
        task = await self.store.get_task(task_id)
        if task is None:
            raise TaskNotFound(task_id)
        if not may_see_conversation(task, principal):
            if principal.role not in DECIDER_ROLES:  # an agent: refused, as when it decides
                raise NotAllowed(f"{principal.name} may not read another's conversation")
            raise TaskNotFound(task_id)
        return task

    async def find_task(self, request_id: str, principal: Principal | None = None) -> Task | None:
        """The task waiting on this request, if any ``principal`` may see."""
        task = await self.store.find_task(request_id)
        if task is None or (principal is not None and not may_see_task(task, principal)):
            return None
        return task

    async def list_tasks(
        self,
        principal: Principal | None = None,
        *,
        status: TaskStatus | str | None = None,
        limit: int = 100,
    ) -> list[Task]:
        """Tasks newest first, of one status if given; those ``principal`` may see."""
        if status is not None and status not in TASK_TRANSITIONS:
            raise InvalidRequest(f"a task status is one of {', '.join(TASK_TRANSITIONS)}")
        tasks = await self.store.list_tasks(status=status, limit=limit)
        if principal is None:
            return tasks
        return [t for t in tasks if may_see_task(t, principal)]

    # -- webhooks ------------------------------------------------------------------------

    async def add_webhook(
        self,
        url: str,
        principal: Principal,
        *,
        secret: str | None = None,
        fmt: WebhookFormat | str = "json",
        allow_private: bool = False,
    ) -> Webhook:
        """Register an endpoint for every event (admins); a secret is made when none is given.

        Its URL must name a public address unless ``allow_private`` (the server's
        ``--allow-private-webhooks``): see :func:`signoff.webhook_targets.check_target`.
        """
        _manages_webhooks(principal)
        if fmt not in ("json", "slack"):
            raise InvalidRequest("a webhook format is json or slack")
        if not url.startswith(("http://", "https://")) or len(url) > 2000:
            raise InvalidRequest("a webhook URL must start with http:// or https://")
        await check_target(url, allow_private=allow_private)
        now = self.clock()
        webhook = Webhook(
            id=new_webhook_id(),
            url=url,
            secret=secret or secrets.token_urlsafe(24),
            format=fmt,
            created_by=principal.name,
            created_at=now,
        )
        await self._commit(Write(at=now, webhooks=(webhook,)))
        return webhook

    async def list_webhooks(self, principal: Principal) -> list[Webhook]:
        """Every endpoint, removed ones too (admins)."""
        _manages_webhooks(principal)
        return await self.store.list_webhooks()

    async def remove_webhook(self, webhook_id: str, principal: Principal) -> Webhook:
        """Stop sending events to an endpoint (admins); its delivery log is kept."""
        _manages_webhooks(principal)
        found = next((w for w in await self.store.list_webhooks() if w.id == webhook_id), None)
        if found is None or not found.active:
            raise InvalidRequest(f"no active webhook with id {webhook_id!r}")
        removed = found.model_copy(update={"active": False})
        await self._commit(Write(at=self.clock(), webhooks=(removed,)))
        return removed

    async def record_deliveries(
        self, deliveries: Sequence[Delivery], principal: Principal = SYSTEM
    ) -> None:
        """Store new deliveries, or attempts' outcomes (by id): the dispatcher's log (admins)."""
        _manages_webhooks(principal)
        if deliveries:
            await self._commit(Write(at=self.clock(), deliveries=tuple(deliveries)))

    async def list_deliveries(
        self, principal: Principal, *, status: DeliveryStatus | str | None = None, limit: int = 100
    ) -> list[Delivery]:
        """The delivery log, newest first, of one status if given (admins)."""
        _manages_webhooks(principal)
        if status not in (None, "pending", "delivered", "failed"):
            raise InvalidRequest("a delivery status is pending, delivered or failed")
        return await self.store.list_deliveries(status=status, limit=limit)

    async def redelivery(self, delivery_id: str, principal: Principal) -> Delivery:
        """A delivery that was tried, made ready to be sent again by hand (admins).

        Nothing is stored here: the dispatcher sends it and records the outcome.
        """
        _manages_webhooks(principal)
        delivery = await self.store.get_delivery(delivery_id)
        if delivery is None:
            raise InvalidRequest(f"no delivery with id {delivery_id!r}")
        if delivery.status == "pending" and delivery.attempts == 0:
            raise InvalidTransition(f"delivery {delivery_id} has not been tried yet")
        return delivery.model_copy(update={"status": "pending", "attempts": 0})

    # -- notification routes, person links, notices -------------------------------------

    async def routes(self) -> list[Route]:
        """Every route the dispatcher follows: tools.toml's (read-only) and the stored ones."""
        from_policy = list(self.policy.routes()) if self.policy is not None else []
        taken = {r.name for r in from_policy}
        return from_policy + [r for r in await self.store.list_routes() if r.name not in taken]

    async def add_route(
        self,
        spec: RouteSpec | Mapping[str, Any],
        principal: Principal,
        *,
        allow_private: bool = False,
    ) -> Route:
        """Add a notification route (admins), audited. A webhook channel's URL must name a
        public address unless ``allow_private`` (as for webhooks); ``escalate_to`` must name
        an existing route."""
        _admins_only(principal, "manage notification routes")
        if not isinstance(spec, RouteSpec):
            try:
                spec = RouteSpec.model_validate(spec)
            except ValidationError as exc:
                raise InvalidRequest(validation_message(exc)) from None
        routes = {r.name: r for r in await self.routes()}
        if spec.name in routes:
            where = " in tools.toml" if routes[spec.name].source == "tools.toml" else ""
            raise InvalidRequest(f"a route named {spec.name!r} exists{where}")
        if spec.escalate_to is not None and spec.escalate_to not in routes:
            raise InvalidRequest(f"escalate_to names no route: {spec.escalate_to!r}")
        if isinstance(spec.channel, WebhookTarget):
            await check_target(spec.channel.url, allow_private=allow_private)
        now = self.clock()
        route = Route(
            **spec.model_dump(),
            id=new_route_id(),
            created_by=principal.name,
            created_at=now,
        )
        audit = AuditDraft(
            action="notify.route.add",
            actor=principal.name,
            details=route.model_dump(mode="json"),
        )
        await self._commit(Write(at=now, routes=(route,), audit=(audit,)))
        return route

    async def list_routes(self, principal: Principal) -> list[RouteStatus]:
        """Every route with whether it is reaching anyone (admins)."""
        _admins_only(principal, "list notification routes")
        return [
            _route_status(route, await self.store.list_notices(route_id=route.id, limit=50))
            for route in await self.routes()
        ]

    async def remove_route(self, name: str, principal: Principal) -> Route:
        """Remove a stored route (admins), audited; tools.toml's routes are edited there."""
        _admins_only(principal, "manage notification routes")
        routes = await self.routes()
        found = next((r for r in routes if r.name == name), None)
        if found is None:
            raise RouteNotFound(f"notification route named {name!r}")
        if found.source == "tools.toml":
            raise InvalidRequest(f"route {name!r} comes from tools.toml: edit the file instead")
        escalating = [r.name for r in routes if r.escalate_to == name]
        if escalating:
            raise InvalidRequest(f"route {name!r} is the escalation of {', '.join(escalating)}")
        audit = AuditDraft(
            action="notify.route.remove",
            actor=principal.name,
            details={"route_id": found.id, "name": found.name},
        )
        await self._commit(Write(at=self.clock(), removed_routes=(found.id,), audit=(audit,)))
        return found

    async def link_person(
        self, kind: LinkKind | str, external_id: str, name: str, principal: Principal
    ) -> PersonLink:
        """Make a Slack user id or an email address stand for a signoff person (admins),
        audited. The person must hold a live approver or admin token: only they decide."""
        _admins_only(principal, "link people")
        if kind not in ("slack", "email"):
            raise InvalidRequest("a person link's kind is slack or email")
        if kind == "email":
            external_id = external_id.strip().lower()
        if await self._decider_named(name) is None:
            raise InvalidRequest(f"no live approver or admin token is named {name!r}")
        try:
            link = PersonLink(
                kind=kind,
                external_id=external_id,
                name=name,
                created_by=principal.name,
                created_at=self.clock(),
            )
        except ValidationError as exc:
            raise InvalidRequest(validation_message(exc)) from None
        audit = AuditDraft(
            action="person.link",
            actor=principal.name,
            details={"kind": link.kind, "external_id": link.external_id, "name": name},
        )
        await self._commit(Write(at=link.created_at, links=(link,), audit=(audit,)))
        return link

    async def unlink_person(
        self, kind: LinkKind | str, external_id: str, principal: Principal
    ) -> PersonLink:
        """Stop a Slack user id or an email address standing for anyone (admins), audited."""
        _admins_only(principal, "link people")
        if kind not in ("slack", "email"):
            raise InvalidRequest("a person link's kind is slack or email")
        if kind == "email":
            external_id = external_id.strip().lower()
        link = await self.store.get_link(kind, external_id)
        if link is None:
            raise RouteNotFound(f"{kind} link for {external_id!r}")
        audit = AuditDraft(
            action="person.unlink",
            actor=principal.name,
            details={"kind": link.kind, "external_id": link.external_id, "name": link.name},
        )
        write = Write(
            at=self.clock(), removed_links=((link.kind, link.external_id),), audit=(audit,)
        )
        await self._commit(write)
        return link

    async def list_links(self, principal: Principal) -> list[PersonLink]:
        """Every person link, oldest first (admins)."""
        _admins_only(principal, "list person links")
        return await self.store.list_links()

    async def person_for(self, kind: LinkKind, external_id: str) -> Principal | None:
        """The person a Slack user id or an email address stands for, as the decider their
        live token makes them; None when unlinked or they hold no live decider token."""
        key = external_id.strip().lower() if kind == "email" else external_id
        link = await self.store.get_link(kind, key)
        return None if link is None else await self._decider_named(link.name)

    async def _decider_named(self, name: str) -> Principal | None:
        roles = {
            t.role
            for t in await self.store.list_tokens()
            if t.name == name and t.revoked_at is None
        }
        # the least power that decides: an admin token beside an approver one adds nothing here
        role = next((r for r in ("approver", "admin") if r in roles), None)
        return None if role is None else Principal(name=name, role=role)

    async def use_once(self, key: str, until: datetime) -> bool:
        """True the first time ``key`` is used (it is remembered until ``until``), False
        after: a replayed Slack payload, an email link's second use."""
        if not key or len(key) > 512:
            raise InvalidRequest("a single-use key is 1 to 512 characters")
        return await self.store.use_nonce(key, until, self.clock())

    async def record_notices(self, notices: Sequence[Notice]) -> None:
        """Store new notices, or their attempts' outcomes (by id): the dispatcher's writes."""
        if notices:
            await self._commit(Write(at=self.clock(), notices=tuple(notices)))

    async def list_notices(
        self,
        principal: Principal,
        *,
        route_id: str | None = None,
        request_id: str | None = None,
        limit: int = 100,
    ) -> list[Notice]:
        """Notices, newest first, of one route and/or request (admins)."""
        _admins_only(principal, "list notices")
        return await self.store.list_notices(route_id=route_id, request_id=request_id, limit=limit)

    async def failing_routes(self, principal: Principal | None = None) -> list[RouteStatus]:
        """The routes whose latest attempt failed: the inbox's banner (no details beyond
        name and error, for any person; NotAllowed for an agent)."""
        if principal is not None and principal.role == "agent":
            raise NotAllowed("agents may not read notification routes")
        return [s for s in await self.list_routes(SYSTEM) if s.failing]

    # -- inbox sessions ------------------------------------------------------------------

    async def sign_in(self, token: str, *, max_age: float) -> tuple[str, Principal]:
        """Open an inbox session for an approver's or admin's token.

        Returns the new session id (given to the browser once; only its hash is stored)
        and who it signs in. Agents' tokens never open a session.
        """
        record = None
        if 0 < len(token) <= 200:
            record = await self.store.find_token(hash_token(token.strip()))
        if record is None or record.revoked_at is not None:
            raise Unauthenticated("unknown or revoked token")
        if record.role not in DECIDER_ROLES:
            raise NotAllowed("agent tokens cannot sign in to the inbox")
        session_id, now = new_session_id(), self.clock()
        session = SessionRecord(
            id=hash_session_id(session_id),
            token_id=record.id,
            created_at=now,
            expires_at=now + timedelta(seconds=max_age),
        )
        audit = AuditDraft(
            action="session.start", actor=record.name, details={"token_id": record.id}
        )
        await self._commit(Write(at=now, sessions=(session,), audit=(audit,)))
        return session_id, record.principal

    async def session_principal(self, session_id: str) -> Principal | None:
        """Who a live session signs in: None once it is signed out, expired or its token revoked."""
        session = await self.store.get_session(hash_session_id(session_id))
        if session is None or not session.live(self.clock()):
            return None
        record = await self.store.get_token(session.token_id)
        if record is None or record.revoked_at is not None or record.role not in DECIDER_ROLES:
            return None
        return record.principal

    async def sign_out(self, session_id: str) -> None:
        """End a session for every copy of its cookie (nothing happens if it already ended)."""
        session = await self.store.get_session(hash_session_id(session_id))
        if session is None or session.ended_at is not None:
            return
        now = self.clock()
        record = await self.store.get_token(session.token_id)
        audit = AuditDraft(
            action="session.end",
            actor=record.name if record is not None else session.token_id,
            details={"token_id": session.token_id},
        )
        ended = session.model_copy(update={"ended_at": now})
        await self._commit(Write(at=now, sessions=(ended,), audit=(audit,)))

    # -- reading -------------------------------------------------------------------------

    async def _get(self, request_id: str) -> Request:
        request = await self.store.get_request(request_id)
        if request is None:
            raise RequestNotFound(request_id)
        return request

    async def get(self, request_id: str, principal: Principal | None = None) -> Request:
        """The request; RequestNotFound when unknown or not visible to ``principal``."""
        request = await self._get(request_id)
        if principal is not None and not _visible(request, principal):
            raise RequestNotFound(request_id)
        return request

    async def list_requests(self, query: RequestQuery, principal: Principal | None = None) -> Page:
        """Requests newest first; an agent sees only its own."""
        if principal is not None and principal.role == "agent":
            query = RequestQuery(**{**query.__dict__, "requested_by": principal.name})
        return await self.store.list_requests(query)

    async def wait(
        self,
        request_id: str,
        timeout: float,
        principal: Principal | None = None,
        *,
        until: asyncio.Future[None] | None = None,
    ) -> Request:
        """The request once it is no longer pending, or as it is after ``timeout`` seconds
        or once ``until`` is done (a server stopping), whichever comes first.

        Woken by its request's events (the bus finds the subscription by request id) or by
        its timer, never by polling; an expiry that falls due while waiting is applied here.
        ``until`` wakes this coroutine itself, so a long poll costs no task of its own.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        async with self.bus.subscribe(request_id=request_id) as subscription:
            if until is not None:
                until.add_done_callback(subscription.interrupt)
            try:
                request = self._pending_here(request_id, principal) or await self.get(
                    request_id, principal
                )
                while request.status == "pending" and (until is None or not until.done()):
                    now = self.clock()
                    if is_overdue(request, now):
                        await self._expire(request, now)
                        request = await self._get(request_id)
                        continue
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    if request.expires_at is not None:
                        expiry = (request.expires_at - now).total_seconds() + 0.001
                        remaining = min(remaining, expiry)
                    event = await subscription.get(timeout=remaining)
                    if event is not None and event.request.version > request.version:
                        request = event.request
                    elif event is None and (until is None or not until.done()):
                        request = await self._get(request_id)  # its timer: expiry or timeout
                return request
            finally:
                if until is not None:
                    until.remove_done_callback(subscription.interrupt)

    def _pending_here(self, request_id: str, principal: Principal | None) -> Request | None:
        """The request's pending version as this service last wrote or followed it, if a
        wait may start from it without a read: every later version, whoever writes it,
        reaches this bus (the follower brings other processes' commits; without one, no
        other process writes this store) and wakes the wait. A version that is no longer
        pending, or one ``principal`` may not see, is read from the store as before."""
        if self._follower is None and shared(self.store):
            return None
        request = self._recent.get(request_id)
        if request is None or request.status != "pending":
            return None
        if principal is not None and not _visible(request, principal):
            return None
        return request

    async def audit(
        self, request_id: str | None = None, principal: Principal | None = None
    ) -> list[AuditEntry]:
        """Audit entries in chain order, all (admins) or for one request ``principal`` sees."""
        if principal is not None:
            if request_id is None:
                _admins_only(principal, "read the whole audit log")
            else:
                await self.get(request_id, principal)
        return await self.store.list_audit(request_id=request_id)

    async def verify_audit(
        self, anchor: str | None = None, principal: Principal | None = None
    ) -> ChainReport:
        """Check the whole audit log (admins): edits, deletions and reordering, its head,
        requests and events it fails to account for, and, given an anchor (``SEQ:HASH``), that
        the log still holds that entry."""
        if principal is not None:
            _admins_only(principal, "verify the audit log")
        pinned = _parse_anchor(anchor) if anchor is not None else None
        for attempt in range(1, _VERIFY_READS + 1):
            # the head is read before and after, so the entries are compared with the head
            # they were written under, not with one a write moved on meanwhile
            head = await self.store.audit_head()
            entries = await self.store.list_audit()
            coverage = await self.store.audit_coverage()
            if attempt == _VERIFY_READS or await self.store.audit_head() == head:
                return verify_log(entries, head=head, coverage=coverage, anchor=pinned)
        raise AssertionError("unreachable")  # pragma: no cover

    async def audit_anchor(self, principal: Principal | None = None) -> Anchor:
        """The chain head as an anchor to keep outside the database, for ``verify(anchor)``
        (not for agents).

        AuditChainBroken when the head is missing while entries exist, or the entry it names
        does not carry its hash: an anchor of a broken log would vouch for nothing.
        """
        if principal is not None and principal.role == "agent":
            raise NotAllowed("agents may not read the audit anchor")
        head = await self.store.audit_head()
        if head is None:
            if await self.store.list_audit(limit=1):
                raise AuditChainBroken(
                    "the audit log has entries but no chain head: see signoff audit verify",
                    seq=1,
                )
            return Anchor(seq=0, hash=GENESIS_HASH)
        seq, digest = head
        named = await self.store.list_audit(after_seq=seq - 1, limit=1)
        if not named or named[0].seq != seq or named[0].hash != digest:
            raise AuditChainBroken(
                f"the chain head names entry {seq}, which the log does not hold as it says: "
                "see signoff audit verify",
                seq=seq,
            )
        return Anchor(seq=seq, hash=digest)


_VERIFY_READS = 5
"""How often verify reads the log again when writes keep moving its head meanwhile."""


def _parse_anchor(text: str) -> Anchor:
    try:
        return parse_anchor(text)
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from None


def service_for(target: Store | Service, *, clock: Clock = system_clock) -> Service:
    """The service that writes to ``target``: itself, or a service over that store.

    For an integration given a store for its task records: the records are still written
    by the service, with its version checks (the store is opened and closed by its owner).
    """
    if isinstance(target, Service):
        return target
    return Service(target, clock=clock, read_file=None, follow=False)


def _route_status(route: Route, notices: Sequence[Notice]) -> RouteStatus:
    """Whether a route reaches anyone, from its newest notices (newest first)."""
    sent = [n.sent_at for n in notices if n.sent_at is not None]
    last_sent = max(sent) if sent else None
    failing = next(
        (
            n
            for n in notices
            if n.last_error is not None
            and n.status != "sent"
            and (last_sent is None or n.created_at >= last_sent)
        ),
        None,
    )
    return RouteStatus(
        route=route,
        last_sent_at=last_sent,
        last_error=failing.last_error if failing is not None else None,
        failing=failing is not None,
    )


def _manages_webhooks(principal: Principal) -> None:
    if principal.role != "admin":
        raise NotAllowed("only admins manage webhooks")


def _visible(request: Request, principal: Principal) -> bool:
    return principal.role != "agent" or request.requested_by == principal.name


def _seen(request: Request, principal: Principal) -> Request:
    """The request, if ``principal`` may see it: an agent runs only its own calls."""
    if not _visible(request, principal):
        raise RequestNotFound(request.id)
    return request


def _admins_only(principal: Principal, what: str) -> None:
    """NotAllowed unless ``principal`` is an admin (``what``: the operation, as a verb)."""
    if principal.role != "admin":
        raise NotAllowed(f"only admins may {what}")


def _event_type(change: Change) -> EventType:
    if change.request.status in ("completed", "failed"):
        return "result"
    return "status"


def _grant_audit(change: Change) -> tuple[AuditDraft, ...]:
    if change.grant is None:
        return ()
    grant = change.grant
    return (
        AuditDraft(
            action="grant.create",
            actor=grant.created_by,
            request_id=grant.source_request_id,
            details=grant.model_dump(mode="json"),
        ),
    )


def _auto_audit(request: Request, actor: str, details: dict[str, JsonValue]) -> AuditDraft:
    return AuditDraft(
        action="decide",
        actor=actor,
        request_id=request.id,
        from_status="pending",
        to_status=request.status,
        details=details,
    )


def _parse_decision(decision: Decision | Mapping[str, Any]) -> Decision:
    if not isinstance(decision, Mapping):
        return decision
    try:
        return DecisionAdapter.validate_python(dict(decision))
    except ValidationError as exc:
        raise InvalidDecision(validation_message(exc)) from None


def _own_duplicate(existing: Request | None, principal: Principal) -> Request:
    """The stored request a resubmit gets back, which must be the submitter's own.

    Every store keys duplicates by requester, so another requester's request cannot be named
    here; should one be (or vanish), fail without a word about it rather than hand it over.
    """
    if existing is None or existing.requested_by != principal.name:
        logger.error(
            "a duplicate of %s's submit was %s, not its own request: refused",
            principal.name,
            "missing" if existing is None else f"{existing.id} of {existing.requested_by}",
        )
        raise RuntimeFailure("the request could not be submitted; nothing was changed")
    return existing


def _same_call(existing: Request, new: NewRequest) -> None:
    """A repeated submit must be the same call: never hand back another call's request."""
    if isinstance(existing, ApprovalRequest):
        same = new.kind == "approval" and (new.tool_name, new.tool_args or {}) == (
            existing.tool_name,
            existing.tool_args,
        )
    else:
        same = new.kind == existing.kind
    if not same:
        key = "tool_call_id" if new.tool_call_id is not None else "idempotency key"
        raise InvalidRequest(
            f"this {key} was already used in session {new.session_id!r} for a different call"
        )


class _Followed:
    """The bus as the follower sees it. The events it publishes are other processes'
    commits; each carries its request as stored, which the service keeps
    (:meth:`Service._remember`), so that a decision made on another server is not read back
    before this one claims the request. Everything else is the bus's."""

    def __init__(self, bus: EventBus, remember: Callable[[Request], None]) -> None:
        self._bus = bus
        self._remember = remember

    async def publish(self, events: Sequence[Event]) -> None:
        """Keep each event's request, then publish the events on the bus."""
        for event in events:
            self._remember(event.request)
        await self._bus.publish(events)

    def subscribe(
        self, *, request_id: str | None = None, session_id: str | None = None
    ) -> Subscription:
        """The bus's subscription."""
        return self._bus.subscribe(request_id=request_id, session_id=session_id)

    def already_published(self, seq: int) -> bool:
        """Whether the bus published this seq recently."""
        return self._bus.already_published(seq)
