"""signoff: human sign-off for what AI agents do.

An agent hands signoff a request (a tool call to approve, a choice, questions); a person
decides; the agent gets the decision and carries on. ``import signoff`` never imports an
agent framework.
"""

from signoff.__version__ import __version__
from signoff.bus.local import EventBus, LocalBus, Subscription
from signoff.domain.audit import Anchor, AuditEntry, ChainReport
from signoff.domain.decisions import (
    Answer,
    Approve,
    Choose,
    Decision,
    DecisionRecord,
    Reject,
    Respond,
)
from signoff.domain.events import Event
from signoff.domain.grants import Grant, args_digest
from signoff.domain.policies import Policy, PolicyDecision
from signoff.domain.previews import FilePreview
from signoff.domain.principals import Principal
from signoff.domain.requests import (
    ApprovalRequest,
    ChoiceRequest,
    Question,
    QuestionsRequest,
    Request,
    Status,
)
from signoff.domain.submission import NewRequest
from signoff.errors import (
    ArgsMismatch,
    AuditChainBroken,
    CallerError,
    GrantNotFound,
    InvalidDecision,
    InvalidRequest,
    InvalidTransition,
    NotAllowed,
    PolicyError,
    RequestNotFound,
    RuntimeFailure,
    SignoffError,
    StoreUnavailable,
    TaskNotFound,
    TokenNotFound,
    Unauthenticated,
)
from signoff.executor import Executor, ToolRegistry
from signoff.service import BatchOutcome, Service, Submitted
from signoff.store.base import Page, RequestQuery, Store
from signoff.store.memory import MemoryStore
from signoff.store.sqlite import SQLiteStore


def __getattr__(name: str) -> object:
    # The HTTP clients need httpx (the `server` extra); import them only when asked for.
    if name in ("Client", "AsyncClient"):
        from signoff import client

        return getattr(client, name)
    raise AttributeError(f"module 'signoff' has no attribute {name!r}")


__all__ = [
    "Anchor",
    "Answer",
    "ApprovalRequest",
    "Approve",
    "ArgsMismatch",
    "AsyncClient",
    "AuditChainBroken",
    "AuditEntry",
    "BatchOutcome",
    "CallerError",
    "ChainReport",
    "ChoiceRequest",
    "Choose",
    "Client",
    "Decision",
    "DecisionRecord",
    "Event",
    "EventBus",
    "Executor",
    "FilePreview",
    "Grant",
    "GrantNotFound",
    "InvalidDecision",
    "InvalidRequest",
    "InvalidTransition",
    "LocalBus",
    "MemoryStore",
    "NewRequest",
    "NotAllowed",
    "Page",
    "Policy",
    "PolicyDecision",
    "PolicyError",
    "Principal",
    "Question",
    "QuestionsRequest",
    "Reject",
    "Request",
    "RequestNotFound",
    "RequestQuery",
    "Respond",
    "RuntimeFailure",
    "SQLiteStore",
    "Service",
    "SignoffError",
    "Status",
    "Store",
    "StoreUnavailable",
    "Submitted",
    "Subscription",
    "TaskNotFound",
    "TokenNotFound",
    "ToolRegistry",
    "Unauthenticated",
    "__version__",
    "args_digest",
]
