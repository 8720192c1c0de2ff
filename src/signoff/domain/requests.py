"""Requests: what awaits a human, in three kinds, and the states they move through.

A request is created ``pending`` and ends in exactly one terminal state::

    pending ──> approved ──> executing ──> completed
       │           │                    └─> failed
       │           └─> failed   (refused at claim: its args do not fit the tool's schema)
       ├──> rejected
       ├──> expired
       └──> canceled

Every record here is immutable; a change is a new record with ``version`` one higher,
written by the store only if the stored version is still the old one.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Annotated, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter

from signoff.domain.decisions import DecisionRecord, DecisionType
from signoff.domain.previews import FilePreview
from signoff.domain.text import STORED

__all__ = [
    "ALLOWED_DECISIONS",
    "TERMINAL",
    "TRANSITIONS",
    "ApprovalRequest",
    "ChoiceRequest",
    "ExecutionResult",
    "OnExpire",
    "Question",
    "QuestionsRequest",
    "Request",
    "RequestAdapter",
    "RequestKind",
    "Status",
    "can_transition",
    "new_request_id",
    "stored_request",
]

RequestKind: TypeAlias = Literal["approval", "choice", "questions"]
Status: TypeAlias = Literal[
    "pending", "approved", "rejected", "expired", "canceled", "executing", "completed", "failed"
]
OnExpire: TypeAlias = Literal["reject", "approve", "default"]

TRANSITIONS: dict[Status, frozenset[Status]] = {
    "pending": frozenset({"approved", "rejected", "expired", "canceled"}),
    "approved": frozenset({"executing", "failed"}),
    "executing": frozenset({"completed", "failed"}),
    "rejected": frozenset(),
    "expired": frozenset(),
    "canceled": frozenset(),
    "completed": frozenset(),
    "failed": frozenset(),
}
"""Every legal change of status; there are no others."""

TERMINAL: frozenset[Status] = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)
"""States that never change again."""

ALLOWED_DECISIONS: dict[RequestKind, tuple[DecisionType, ...]] = {
    "approval": ("approve", "reject", "respond"),
    "choice": ("choose", "reject"),
    "questions": ("approve", "answer", "reject"),
}
"""Which decisions each kind allows; a request may narrow this with ``allowed_decisions``."""


def can_transition(old: Status, new: Status) -> bool:
    """Whether ``old -> new`` is one of the legal transitions."""
    return new in TRANSITIONS[old]


def new_request_id() -> str:
    """A request id nobody can guess: 128 random bits."""
    return "req_" + secrets.token_urlsafe(16)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Question(_Model):
    """One question of a ``questions`` request."""

    id: str
    """Key under which the answer comes back."""
    text: str
    """What is asked, shown to the person as text."""
    required: bool = False
    """Whether an ``answer`` decision must include it."""


class ExecutionResult(_Model):
    """What happened when an approved call ran."""

    ok: bool
    """Whether the call succeeded."""
    result: JsonValue = None
    """What the call returned, as JSON."""
    error: str | None = None
    """Why it failed, when it did."""
    reported_by: str
    """Principal that reported the result."""
    reported_at: datetime
    """When the result was reported."""


class _RequestBase(_Model):
    id: str
    """Unguessable id, ``req_`` and 22 url-safe characters."""
    status: Status = "pending"
    """Where the request is in its life."""
    version: int = 1
    """Optimistic-concurrency counter, one higher on every change."""
    session_id: str
    """The agent session (conversation, thread, run) that asked."""
    requested_by: str
    """Name of the principal that submitted the request."""
    created_at: datetime
    """When it was submitted."""
    updated_at: datetime
    """When it last changed."""
    expires_at: datetime | None = None
    """When a still-pending request expires; None: never."""
    on_expire: OnExpire = "reject"
    """What expiry means: ``reject`` (fail closed), ``approve``, or the ``default`` answer."""
    context: JsonValue = None
    """Free-form context from the agent, shown to the person as text."""
    idempotency_key: str | None = None
    """Key that makes a repeated submit return the same request."""
    allowed_decisions: tuple[DecisionType, ...]
    """The decisions a person may make on this request."""
    approvers: tuple[str, ...] = ()
    """Designated approvers (principal names); empty means any approver or admin."""
    quorum: int = 1
    """How many approvals it takes."""
    allow_self_approval: bool = False
    """Whether the requester may approve their own request."""
    started_by: str | None = None
    """For a call a hosted run files: who started the run (set by the server, never by the
    agent); the person in that run's loop."""
    starter_may_approve: bool = True
    """Governance: whether ``started_by`` may approve; false, designated approvers without
    them, or a quorum make them count as the requester."""
    policy_note: str | None = None
    """Which policy file and rule sent this request where it is."""
    expiry_set_by: str | None = None
    """Which policy file and table or rule (or the requester, stricter) set the expiry."""
    votes: tuple[DecisionRecord, ...] = ()
    """Approvals recorded so far (more than one only under a quorum)."""
    decision: DecisionRecord | None = None
    """The decision that ended the pending state, if any."""
    grant_id: str | None = None
    """The standing grant that approved this request at submit, if one did."""

    @property
    def is_terminal(self) -> bool:
        """Whether the status can never change again."""
        return self.status in TERMINAL


class ApprovalRequest(_RequestBase):
    """A tool call that must not run until a person approves it."""

    kind: Literal["approval"] = "approval"
    tool_name: str
    """The tool the agent wants to call."""
    tool_args: dict[str, JsonValue]
    """The arguments the agent proposed."""
    tool_call_id: str | None = None
    """The model's id for this call; with ``session_id`` it makes submit idempotent."""
    editable: bool = True
    """Whether a person may approve it with edited arguments; false: as proposed or not at
    all (e.g. a LangGraph review that does not allow edit)."""
    preview: FilePreview | None = None
    """For a file-writing call: old content, new content and a unified diff."""
    args_schema: dict[str, JsonValue] | None = None
    """The tool's JSON Schema for its arguments, when the integration knows it: a person's
    edited arguments must fit it, at approval and at claim; None: not checked."""
    approved_args: dict[str, JsonValue] | None = None
    """The arguments approved to run (the proposal, or a person's edit)."""
    args_digest: str | None = None
    """Digest of tool name and approved arguments; a claim must match it."""
    claimed_by: str | None = None
    """Principal that claimed the call for execution."""
    claimed_at: datetime | None = None
    """When it was claimed."""
    lease_until: datetime | None = None
    """When the claim's lease ends: unless the claimant reports or renews before then, the
    server fails the call (and never runs it again)."""
    result: ExecutionResult | None = None
    """What happened when it ran."""


class ChoiceRequest(_RequestBase):
    """A question with options; the answer must be one of them (or free text if allowed)."""

    kind: Literal["choice"] = "choice"
    prompt: str
    """What the person is asked."""
    options: tuple[str, ...]
    """The options offered, in order."""
    multi_select: bool = False
    """Whether several options may be chosen."""
    allow_other: bool = False
    """Whether free text outside the options is accepted."""
    default_choice: tuple[str, ...] | None = None
    """What expiry chooses when ``on_expire`` is ``default``."""


class QuestionsRequest(_RequestBase):
    """Questions for a person, answered approve / answer (edit) / reject."""

    kind: Literal["questions"] = "questions"
    prompt: str | None = None
    """An overall prompt shown above the questions."""
    questions: tuple[Question, ...]
    """The questions, in order."""
    default_answers: dict[str, str] | None = None
    """What expiry answers when ``on_expire`` is ``default``."""


Request: TypeAlias = Annotated[
    ApprovalRequest | ChoiceRequest | QuestionsRequest, Field(discriminator="kind")
]
"""Any request, told apart by ``kind``."""

RequestAdapter: TypeAdapter[Request] = TypeAdapter(Request)
"""Parses and dumps any kind of request."""


def stored_request(data: str | bytes) -> Request:
    """The request a store's JSON text holds (validated, but not checked again for what no
    store can keep: see :data:`~signoff.domain.text.STORED`)."""
    return RequestAdapter.validate_json(data, context=STORED)
