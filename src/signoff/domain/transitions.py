"""The rules of every change to a request, as pure functions from old record to new.

Each function checks who is asking and whether the change is legal, and returns the new
record and the audit entry that explains it, or raises a caller error and changes nothing.
The service then asks the store to write the new record only if nobody changed the old
one in between.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import assert_never

from pydantic import JsonValue

from signoff.domain.audit import AuditDraft
from signoff.domain.built import built, replaced
from signoff.domain.decisions import (
    Answer,
    Approve,
    Channel,
    Choose,
    Decision,
    DecisionRecord,
    Reject,
    Respond,
    require_reason,
)
from signoff.domain.grants import Grant, args_digest, new_grant_id
from signoff.domain.principals import DECIDER_ROLES, Principal
from signoff.domain.requests import (
    ApprovalRequest,
    ChoiceRequest,
    ExecutionResult,
    QuestionsRequest,
    Request,
    Status,
    can_transition,
)
from signoff.domain.schemas import args_problem
from signoff.errors import (
    ArgsMismatch,
    InvalidDecision,
    InvalidRequest,
    InvalidTransition,
    NotAllowed,
)

__all__ = [
    "DEFAULT_LEASE",
    "GRANT_TTL",
    "LEASE_LAPSED",
    "MAX_CLIENT_NAME",
    "MAX_LEASE",
    "MIN_LEASE",
    "Change",
    "apply_decision",
    "approved_by_grant",
    "cancel",
    "check_may_decide",
    "claim",
    "expire",
    "finish",
    "is_overdue",
    "lapse",
    "lease_ended",
    "refuse_claim",
    "renew",
    "seen_details",
    "starter_may_approve",
]

MAX_CLIENT_NAME = 200
"""The longest MCP client name recorded with a decision."""

GRANT_TTL: dict[str, timedelta] = {"session": timedelta(hours=12), "always": timedelta(days=30)}
"""How long a standing grant lasts unless revoked."""

DEFAULT_LEASE = 300.0
"""Seconds a claim lasts unless the claimant asks for another lease or renews it."""

MIN_LEASE = 1.0
"""The shortest lease a claim or renewal may ask for, in seconds."""

MAX_LEASE = 3600.0
"""The longest lease one claim or renewal may ask for; longer calls renew while they run."""

LEASE_LAPSED = "the executor did not report within its lease; not run again"
"""The error of a call failed by the server because its claim's lease ran out."""


@dataclass(frozen=True)
class Change:
    """A legal change: the new record, why (audit), and whether it ended the pending state."""

    request: Request
    audit: AuditDraft
    decided: bool = False
    grant: Grant | None = None


def is_overdue(request: Request, now: datetime) -> bool:
    """Whether a pending request is past its expiry."""
    return (
        request.status == "pending" and request.expires_at is not None and request.expires_at <= now
    )


def lease_ended(request: Request, now: datetime) -> bool:
    """Whether an executing call's claimant let its lease run out without reporting."""
    return (
        isinstance(request, ApprovalRequest)
        and request.status == "executing"
        and request.lease_until is not None
        and request.lease_until <= now
    )


def _check_lease(lease: float) -> timedelta:
    # not (a <= x <= b) also refuses NaN
    if not MIN_LEASE <= lease <= MAX_LEASE:
        raise InvalidRequest(f"lease must be {MIN_LEASE:g} to {MAX_LEASE:g} seconds")
    return timedelta(seconds=lease)


def seen_details(request: Request) -> dict[str, JsonValue]:
    """What a decider was shown, for the audit: the call and its digest, or the question."""
    if isinstance(request, ApprovalRequest):
        seen: dict[str, JsonValue] = {
            "tool_name": request.tool_name,
            "args": request.tool_args,
            "args_digest": args_digest(request.tool_name, request.tool_args),
        }
        if request.preview is not None:
            seen["preview_path"] = request.preview.path
            seen["preview_diff"] = request.preview.diff
        return seen
    if isinstance(request, ChoiceRequest):
        return {"prompt": request.prompt, "options": list(request.options)}
    return {"prompt": request.prompt, "questions": [q.text for q in request.questions]}


def _moved(request: Request, status: Status, now: datetime, **changes: object) -> Request:
    if status != request.status and not can_transition(request.status, status):
        raise InvalidTransition(
            f"request {request.id} is {request.status}; it cannot become {status}",
            status=request.status,
        )
    return replaced(request, status=status, version=request.version + 1, updated_at=now, **changes)


def _require_pending(request: Request, now: datetime) -> None:
    if request.status != "pending":
        raise InvalidTransition(
            f"request {request.id} is {request.status}, not pending", status=request.status
        )
    if is_overdue(request, now):
        raise InvalidTransition(f"request {request.id} has expired", status="expired")


def starter_may_approve(request: Request) -> bool:
    """Whether the person who started the hosted run that filed ``request`` may approve it.

    They may by default (they are the human in that run's loop); they count as the requester
    when governance says ``starter_may_approve = false``, names designated approvers without
    them, or asks for a quorum.
    """
    if request.started_by is None or not request.starter_may_approve or request.quorum > 1:
        return False
    return not request.approvers or request.started_by in request.approvers


def check_may_decide(principal: Principal) -> None:
    """Refuse anyone whose role may not decide (agents), whatever the request or path."""
    if principal.role not in DECIDER_ROLES:
        raise NotAllowed(f"{principal.name} is an {principal.role} and may not decide requests")


def _check_decider(request: Request, decision: Decision, principal: Principal) -> None:
    if request.approvers and principal.name not in request.approvers:
        raise NotAllowed(f"{principal.name} is not a designated approver of request {request.id}")
    approving = not isinstance(decision, Reject | Respond)
    if approving and not request.allow_self_approval:
        if principal.name == request.requested_by:
            raise NotAllowed(f"{principal.name} may not approve their own request")
        if principal.name == request.started_by and not starter_may_approve(request):
            raise NotAllowed(
                f"{principal.name} started the run that filed request {request.id}, and "
                "policy counts them as its requester: another person must approve it"
            )


def _resolve_choice(request: ChoiceRequest, decision: Choose) -> list[str]:
    if request.multi_select:
        picked = list(decision.choices or ([decision.choice] if decision.choice else []))
        if decision.choice is not None and decision.choices is not None:
            raise InvalidDecision("give either choice or choices, not both")
    else:
        if decision.choices is not None and len(decision.choices) != 1:
            raise InvalidDecision("this choice request takes exactly one choice")
        single = decision.choice if decision.choice is not None else (decision.choices or [None])[0]
        picked = [single] if single is not None else []
    if not picked:
        raise InvalidDecision("a choose decision needs choice (or choices for multi-select)")
    if len(set(picked)) != len(picked):
        raise InvalidDecision("the same option was chosen twice")
    for item in picked:
        if item not in request.options and not request.allow_other:
            raise InvalidDecision(f"{item!r} is not one of the options {list(request.options)}")
        if not item.strip():
            raise InvalidDecision("an empty choice is not an answer")
    return picked


def _check_answers(request: QuestionsRequest, decision: Answer) -> None:
    ids = {q.id for q in request.questions}
    unknown = sorted(set(decision.answers) - ids)
    if unknown:
        raise InvalidDecision(f"answers names unknown question {unknown[0]!r}")
    for q in request.questions:
        if q.required and not decision.answers.get(q.id, "").strip():
            raise InvalidDecision(f"question {q.id!r} needs an answer")


def _check_channel(via: Channel, client: str | None) -> None:
    if client is not None and via != "mcp-elicitation":
        raise InvalidDecision("client names the MCP client of an mcp-elicitation decision only")
    if client is not None and not 1 <= len(client) <= MAX_CLIENT_NAME:
        raise InvalidDecision(f"client must be 1 to {MAX_CLIENT_NAME} characters")


def apply_decision(
    request: Request,
    decision: Decision,
    principal: Principal,
    now: datetime,
    *,
    via: Channel = "person",
    client: str | None = None,
) -> Change:
    """Record ``decision`` by ``principal``: a final decision, or one quorum vote.

    ``via`` says how it reached signoff: ``mcp-elicitation`` (with the MCP ``client``'s
    self-reported name) when the person answered in an MCP client's own prompt.
    """
    check_may_decide(principal)  # first: an agent learns nothing about the request's state
    _check_channel(via, client)
    require_reason(decision)
    _require_pending(request, now)
    if decision.type not in request.allowed_decisions:
        raise InvalidDecision(
            f"{decision.type} is not allowed on this {request.kind} request; "
            f"allowed: {', '.join(request.allowed_decisions)}"
        )
    _check_decider(request, decision, principal)
    seen = seen_details(request)
    seen_digest = seen.get("args_digest") if isinstance(request, ApprovalRequest) else None
    digest = seen_digest if isinstance(seen_digest, str) else None
    if client is None:
        # Every field is a validated record's or this function's own: built without
        # walking them again (the decision was walked for lone surrogates and NaN when it
        # was parsed). An MCP client's self-reported name is still checked as text.
        record = DecisionRecord.model_construct(
            decision=decision,
            decided_by=principal.name,
            decided_at=now,
            seen_digest=digest,
            via=via,
        )
    else:
        record = DecisionRecord(
            decision=decision,
            decided_by=principal.name,
            decided_at=now,
            seen_digest=digest,
            via=via,
            client=client,
        )
    details: dict[str, JsonValue] = {"seen": seen, "decision": decision.model_dump(mode="json")}
    if via != "person":
        details["via"] = via
        details["client"] = client
    if isinstance(decision, Approve):
        return _approve(request, decision, record, principal, now, details)
    if isinstance(decision, Reject | Respond):
        new = _moved(request, "rejected", now, decision=record)
        return Change(new, _audit("decide", principal.name, request, new, details), decided=True)
    if isinstance(decision, Choose):
        if not isinstance(request, ChoiceRequest):
            raise InvalidDecision("choose is only for choice requests")
        picked = _resolve_choice(request, decision)
        record = record.model_copy(update={"extra": {"choices": list(picked)}})
        details["choices"] = list(picked)
        new = _moved(request, "approved", now, decision=record)
        return Change(new, _audit("decide", principal.name, request, new, details), decided=True)
    if isinstance(decision, Answer):
        if not isinstance(request, QuestionsRequest):
            raise InvalidDecision("answer is only for questions requests")
        _check_answers(request, decision)
        new = _moved(request, "approved", now, decision=record)
        return Change(new, _audit("decide", principal.name, request, new, details), decided=True)
    assert_never(decision)


def _approve(
    request: Request,
    decision: Approve,
    record: DecisionRecord,
    principal: Principal,
    now: datetime,
    details: dict[str, JsonValue],
) -> Change:
    if not isinstance(request, ApprovalRequest):
        if decision.args is not None or decision.scope != "once" or decision.args_pattern:
            raise InvalidDecision("args, scope and args_pattern are only for approval requests")
        new = _moved(request, "approved", now, decision=record)
        return Change(new, _audit("decide", principal.name, request, new, details), decided=True)
    if decision.args_pattern is not None and decision.scope == "once":
        raise InvalidDecision("args_pattern needs scope session or always")
    if not request.editable and decision.args is not None and decision.args != request.tool_args:
        raise InvalidDecision(
            f"request {request.id} may not be edited: approve the call as proposed or reject it"
        )
    args = decision.args if decision.args is not None else request.tool_args
    problem = _edit_problem(request, args)
    if problem is not None:
        raise InvalidDecision(
            f"the edited arguments do not fit the tool's schema, so they could never run "
            f"({problem}); edit them to fit, or reject"
        )
    # as proposed, the arguments are the ones the decider was shown, digested already
    digest = (
        record.seen_digest
        if decision.args is None and record.seen_digest is not None
        else args_digest(request.tool_name, args)
    )
    details["approved_args"] = args
    details["approved_digest"] = digest
    for vote in request.votes:
        if vote.decided_by == principal.name:
            raise NotAllowed(
                f"{principal.name} has already approved request {request.id}; "
                f"it needs {request.quorum} different approvers"
            )
        assert isinstance(vote.decision, Approve)
        voted_args = vote.decision.args if vote.decision.args is not None else request.tool_args
        if args_digest(request.tool_name, voted_args) != digest:
            raise InvalidDecision(
                "approvals of one request must approve the same arguments; "
                "reject it and ask again to change them"
            )
    votes = (*request.votes, record)
    if len(votes) < request.quorum:
        new = _moved(request, "pending", now, votes=votes)
        details["votes"] = len(votes)
        details["quorum"] = request.quorum
        return Change(new, _audit("vote", principal.name, request, new, details))
    grant = None
    if decision.scope != "once":
        grant = Grant(
            id=new_grant_id(),
            scope=decision.scope,
            tool_name=request.tool_name,
            session_id=request.session_id if decision.scope == "session" else None,
            requested_by=request.requested_by,
            started_by=request.started_by,
            args_pattern=decision.args_pattern,
            created_by=principal.name,
            created_at=now,
            expires_at=now + GRANT_TTL[decision.scope],
            source_request_id=request.id,
        )
        details["grant_created"] = grant.id
    new = _moved(
        request,
        "approved",
        now,
        votes=votes,
        decision=record,
        approved_args=args,
        args_digest=digest,
    )
    return Change(
        new, _audit("decide", principal.name, request, new, details), decided=True, grant=grant
    )


def approved_by_grant(request: ApprovalRequest, grant: Grant, now: datetime) -> ApprovalRequest:
    """A freshly built request approved at submit by a standing grant."""
    digest = args_digest(request.tool_name, request.tool_args)
    record = DecisionRecord(
        decision=Approve(),
        decided_by=grant.created_by,
        decided_at=now,
        seen_digest=digest,
        via="grant",
        extra={"grant_id": grant.id},
    )
    return replaced(
        request,
        status="approved",
        decision=record,
        grant_id=grant.id,
        approved_args=request.tool_args,
        args_digest=digest,
    )


def expire(request: Request, now: datetime) -> Change:
    """What an overdue pending request becomes under its ``on_expire`` policy."""
    if not is_overdue(request, now):
        raise InvalidTransition(f"request {request.id} is not overdue", status=request.status)
    details: dict[str, JsonValue] = {
        "on_expire": request.on_expire,
        "set_by": request.expiry_set_by,
    }
    decision: Decision | None = None
    extra: dict[str, JsonValue] | None = None
    if request.on_expire == "approve" and not isinstance(request, ChoiceRequest):
        decision = Approve()
    elif request.on_expire == "default" and isinstance(request, ChoiceRequest):
        if request.default_choice:
            decision = Choose(choices=request.default_choice)
            extra = {"choices": list(request.default_choice)}
    elif (
        request.on_expire == "default"
        and isinstance(request, QuestionsRequest)
        and request.default_answers is not None
    ):
        decision = Answer(answers=request.default_answers)
    if decision is None:
        record = DecisionRecord(
            decision=Reject(reason="expired without a decision"),
            decided_by="expiry",
            decided_at=now,
            via="expiry",
        )
        new = _moved(request, "expired", now, decision=record)
        return Change(new, _audit("expire", "expiry", request, new, details))
    record = DecisionRecord(
        decision=decision, decided_by="expiry", decided_at=now, via="expiry", extra=extra
    )
    changes: dict[str, object] = {"decision": record}
    if isinstance(request, ApprovalRequest):
        changes["approved_args"] = request.tool_args
        changes["args_digest"] = args_digest(request.tool_name, request.tool_args)
    new = _moved(request, "approved", now, **changes)
    details["decision"] = decision.model_dump(mode="json")
    return Change(new, _audit("expire", "expiry", request, new, details), decided=True)


def claim(
    request: Request,
    args: dict[str, JsonValue],
    principal: Principal,
    now: datetime,
    *,
    lease: float = DEFAULT_LEASE,
) -> Change:
    """Take an approved call for execution, once, and only with the approved arguments.

    The claim holds for ``lease`` seconds: the claimant reports or renews before then, or
    the server fails the call (``lapse``).
    """
    span = _check_lease(lease)
    request, digest = _approved_call(request, args, principal)
    problem = _edit_problem(request, args)
    if problem is not None:
        raise InvalidDecision(
            f"request {request.id} must not run: its edited arguments do not fit the tool's "
            f"schema ({problem})"
        )
    new = _moved(
        request,
        "executing",
        now,
        claimed_by=principal.name,
        claimed_at=now,
        lease_until=now + span,
    )
    details: dict[str, JsonValue] = {
        "tool_name": request.tool_name,
        "args": args,
        "args_digest": digest,
        "lease_until": (now + span).isoformat(),
    }
    return Change(new, _audit("claim", principal.name, request, new, details))


def _approved_call(
    request: Request, args: dict[str, JsonValue], principal: Principal
) -> tuple[ApprovalRequest, str]:
    """The approved call ``principal`` may execute with ``args``, and their digest.

    What ``claim`` and ``refuse_claim`` both require: an executing role, an approved call,
    and exactly the approved arguments.
    """
    if principal.role not in ("agent", "admin"):
        raise NotAllowed(f"{principal.name} is an {principal.role} and may not execute calls")
    if not isinstance(request, ApprovalRequest):
        raise InvalidTransition(
            f"request {request.id} is a {request.kind} request; only approval requests run",
            status=request.status,
        )
    if request.status != "approved":
        verb = "was already claimed" if request.status != "pending" else "is not approved"
        raise InvalidTransition(
            f"request {request.id} {verb} (status {request.status})", status=request.status
        )
    digest = args_digest(request.tool_name, args)
    if digest != request.args_digest:
        raise ArgsMismatch(
            f"the arguments to run do not match what was approved for request {request.id}",
            status=request.status,
        )
    return request, digest


def renew(
    request: Request, principal: Principal, now: datetime, *, lease: float = DEFAULT_LEASE
) -> Change:
    """Extend a claim's lease to ``lease`` seconds from now: its claimant only, while it holds."""
    span = _check_lease(lease)
    if principal.role not in ("agent", "admin"):
        raise NotAllowed(f"{principal.name} is an {principal.role} and may not execute calls")
    if not isinstance(request, ApprovalRequest) or request.status != "executing":
        raise InvalidTransition(
            f"request {request.id} is {request.status}; only an executing call has a lease",
            status=request.status,
        )
    if principal.name != request.claimed_by:
        raise NotAllowed(
            f"request {request.id} was claimed by {request.claimed_by}; only they renew its lease"
        )
    if lease_ended(request, now):
        raise InvalidTransition(
            f"the lease of request {request.id} has ended", status=request.status
        )
    new = _moved(request, "executing", now, lease_until=now + span)
    details: dict[str, JsonValue] = {"lease_until": (now + span).isoformat()}
    return Change(new, _audit("renew", principal.name, request, new, details))


def lapse(request: Request, now: datetime) -> Change:
    """Fail an executing call whose claimant let the lease run out; it is never run again."""
    if not lease_ended(request, now):
        raise InvalidTransition(
            f"request {request.id} holds its lease or is not executing", status=request.status
        )
    assert isinstance(request, ApprovalRequest) and request.lease_until is not None
    outcome = ExecutionResult(
        ok=False, result=None, error=LEASE_LAPSED, reported_by="system", reported_at=now
    )
    new = _moved(request, "failed", now, result=outcome)
    details: dict[str, JsonValue] = {
        "ok": False,
        "result": None,
        "error": LEASE_LAPSED,
        "via": "lease",
        "claimed_by": request.claimed_by,
        "lease_until": request.lease_until.isoformat(),
    }
    return Change(new, _audit("fail", "system", request, new, details))


def _edit_problem(request: ApprovalRequest, args: dict[str, JsonValue]) -> str | None:
    """Why a person's edit ``args`` breaks the schema the request carries; None if it fits.

    Only an edit is checked: the agent's own proposal is its framework's to validate (as
    without a schema), so a schema never blocks approving what the agent asked for.
    """
    if args == request.tool_args:
        return None
    return args_problem(request.args_schema, args)


def refuse_claim(
    request: Request, args: dict[str, JsonValue], principal: Principal, now: datetime
) -> Change:
    """Fail, unrun, an approved call claimed with args that do not fit the tool's schema.

    Only what ``claim`` refuses for that reason alone is failed here: the claimant may
    claim it, the args are the approved ones, and the tool's schema rejects them.
    """
    request, digest = _approved_call(request, args, principal)
    problem = _edit_problem(request, args)
    if problem is None:
        raise InvalidTransition(
            f"request {request.id} fits the tool's schema; nothing to refuse",
            status=request.status,
        )
    error = f"not run: the edited arguments do not fit the tool's schema ({problem})"
    outcome = ExecutionResult(
        ok=False, result=None, error=error, reported_by=principal.name, reported_at=now
    )
    new = _moved(request, "failed", now, result=outcome)
    details: dict[str, JsonValue] = {
        "ok": False,
        "result": None,
        "error": error,
        "refused_claim": {"tool_name": request.tool_name, "args": args, "args_digest": digest},
    }
    return Change(new, _audit("fail", principal.name, request, new, details))


def finish(
    request: Request,
    *,
    ok: bool,
    result: JsonValue,
    error: str | None,
    principal: Principal,
    now: datetime,
) -> Change:
    """Record what happened when a claimed call ran."""
    if principal.role not in ("agent", "admin"):
        raise NotAllowed(f"{principal.name} is an {principal.role} and may not report results")
    if not isinstance(request, ApprovalRequest) or request.status != "executing":
        raise InvalidTransition(
            f"request {request.id} is {request.status}; only an executing call has a result",
            status=request.status,
        )
    outcome = ExecutionResult(
        ok=ok, result=result, error=error, reported_by=principal.name, reported_at=now
    )
    new = _moved(request, "completed" if ok else "failed", now, result=outcome)
    details: dict[str, JsonValue] = {"ok": ok, "result": result, "error": error}
    return Change(new, _audit("complete" if ok else "fail", principal.name, request, new, details))


def cancel(request: Request, principal: Principal, now: datetime, reason: str = "") -> Change:
    """The asker (or an admin) withdraws a pending request."""
    if principal.name != request.requested_by and principal.role != "admin":
        raise NotAllowed(f"only {request.requested_by} or an admin may cancel request {request.id}")
    if request.status != "pending":
        raise InvalidTransition(
            f"request {request.id} is {request.status}, not pending", status=request.status
        )
    new = _moved(request, "canceled", now)
    return Change(new, _audit("cancel", principal.name, request, new, {"reason": reason}))


def _audit(
    action: str, actor: str, old: Request, new: Request, details: dict[str, JsonValue]
) -> AuditDraft:
    # built without validating: every field comes from validated records and inputs, and
    # checking every JSON value of ``details`` again cost microseconds a step for nothing
    return built(
        AuditDraft,
        action=action,
        actor=actor,
        request_id=new.id,
        from_status=old.status,
        to_status=new.status,
        details=details,
    )
