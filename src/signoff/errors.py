"""The one exception tree of signoff.

Caller mistakes are kept apart from runtime failures, so a transport can map the first
to a 4xx and the second to a 5xx in one table (HTTP statuses live only in ``server/``)::

    SignoffError
    ├── CallerError                 the caller asked for something that cannot be done
    │   ├── RequestNotFound         no such request (or not visible to the caller)
    │   ├── GrantNotFound           no such standing grant
    │   ├── TokenNotFound           no such API token
    │   ├── RouteNotFound           no such notification route (or person link)
    │   ├── TaskNotFound            no such hosted agent run (or agent), or not visible
    │   ├── InvalidRequest          a request that cannot be submitted as given
    │   ├── InvalidHeader           a header that cannot be read, or a head over the limit
    │   ├── InvalidDecision         a decision the request does not allow, or malformed
    │   ├── InvalidTransition       the request is not in a state that allows this
    │   │   └── ArgsMismatch        a claim whose args differ from what was approved
    │   ├── NotAllowed              the principal may not do this
    │   ├── Unauthenticated         no principal: unknown or revoked token
    │   ├── PayloadTooLarge         a request body over the server's size limit
    │   ├── RequestTimeout          a request head or body that arrived too slowly
    │   ├── PolicyError             a tools.toml that cannot be read or understood
    │   └── AgentSettingsError      a coding agent's settings file signoff will not change
    ├── StoreConflict               the store refused a write over what it already holds
    │   ├── VersionConflict         the record changed since it was read
    │   └── DuplicateRequest        the same request was already submitted
    └── RuntimeFailure              signoff itself could not do it
        ├── StoreUnavailable        the store cannot be reached or written
        ├── ServerBusy              the server holds as many connections as it may
        ├── ServerStopping          the server is shutting down; ask again once it is back
        ├── AuditChainBroken        the audit log fails verification
        ├── UpstreamDown            the MCP server signoff wraps is not running
        └── SendFailed              a notification could not be delivered (retried)

A ``StoreConflict`` is the store's answer to the service, which turns it into what the
caller sees (the existing request, or ``InvalidTransition``); it is in the tree so that
everything a store raises on purpose is a ``SignoffError``.
"""

from __future__ import annotations

__all__ = [
    "AgentSettingsError",
    "ArgsMismatch",
    "AuditChainBroken",
    "CallerError",
    "DuplicateRequest",
    "GrantNotFound",
    "GrantsChanged",
    "InvalidDecision",
    "InvalidHeader",
    "InvalidRequest",
    "InvalidTransition",
    "NotAllowed",
    "PayloadTooLarge",
    "PolicyError",
    "RequestNotFound",
    "RequestTimeout",
    "RouteNotFound",
    "RuntimeFailure",
    "SendFailed",
    "ServerBusy",
    "ServerStopping",
    "SignoffError",
    "StoreConflict",
    "StoreUnavailable",
    "TaskNotFound",
    "TokenNotFound",
    "Unauthenticated",
    "UpstreamDown",
    "VersionConflict",
]


class SignoffError(Exception):
    """Root of every error signoff raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CallerError(SignoffError):
    """The caller asked for something that cannot be done; nothing was changed."""


class RequestNotFound(CallerError):
    """No request has this id, or the caller may not see it."""

    def __init__(self, request_id: str) -> None:
        super().__init__(f"no request with id {request_id!r}")
        self.request_id = request_id


class GrantNotFound(CallerError):
    """No standing grant has this id."""

    def __init__(self, grant_id: str) -> None:
        super().__init__(f"no grant with id {grant_id!r}")
        self.grant_id = grant_id


class TokenNotFound(CallerError):
    """No API token has this id."""

    def __init__(self, token_id: str) -> None:
        super().__init__(f"no token with id {token_id!r}")
        self.token_id = token_id


class RouteNotFound(CallerError):
    """No notification route (or person link) has this name."""

    def __init__(self, what: str) -> None:
        super().__init__(f"no {what}")


class TaskNotFound(CallerError):
    """No task (or agent) has this id, or the caller may not see it."""

    def __init__(self, what: str) -> None:
        super().__init__(f"no task for {what}")
        self.what = what


class InvalidRequest(CallerError):
    """A request that cannot be submitted as given (missing or contradictory fields)."""


class InvalidHeader(CallerError):
    """A request header whose value cannot be read, e.g. a ``Last-Event-ID`` that names no
    event id, or a request head larger than the server takes."""


class InvalidDecision(CallerError):
    """A decision this request does not allow, or one whose fields do not fit it."""


class InvalidTransition(CallerError):
    """The request is not in a state that allows this change."""

    def __init__(self, message: str, *, status: str | None = None) -> None:
        super().__init__(message)
        self.status = status


class ArgsMismatch(InvalidTransition):
    """A claim whose arguments do not match the digest the approval was bound to."""


class NotAllowed(CallerError):
    """The principal is known but may not do this."""


class Unauthenticated(CallerError):
    """No principal could be resolved: the token is unknown, malformed or revoked."""


class PayloadTooLarge(CallerError):
    """A request body over the server's size limit, declared or streamed."""


class RequestTimeout(CallerError):
    """A request head or body that did not arrive within the server's read timeout."""


class PolicyError(CallerError):
    """A tools.toml that cannot be read or understood."""


class AgentSettingsError(CallerError):
    """A coding agent's settings file that ``signoff hook install`` leaves as it is.

    It is not valid JSON, or its ``hooks`` are not in the shape that agent documents, so
    merging signoff's hook into it could lose what is there; nothing is written.
    """


class StoreConflict(SignoffError):
    """The store refused a write because of what it already holds; nothing was written."""


class VersionConflict(StoreConflict):
    """The request changed since it was read; the write was not applied."""

    def __init__(self, request_id: str) -> None:
        super().__init__(f"request {request_id!r} changed concurrently")
        self.request_id = request_id


class DuplicateRequest(StoreConflict):
    """The same requester already has a request with this session and tool_call_id, or key."""

    def __init__(self, existing_id: str) -> None:
        super().__init__(f"request already submitted as {existing_id!r}")
        self.existing_id = existing_id


class GrantsChanged(StoreConflict):
    """A grant was stored or revoked since the grants a new request was decided against
    were read; the request was not stored (read the grants again and decide again)."""

    def __init__(self) -> None:
        super().__init__("the standing grants changed concurrently")


class RuntimeFailure(SignoffError):
    """signoff itself could not do what was asked; the caller's input may be fine."""


class StoreUnavailable(RuntimeFailure):
    """The store cannot be opened, read or written."""


class ServerBusy(RuntimeFailure):
    """The server already holds as many connections as it is set to; try again later."""


class ServerStopping(RuntimeFailure):
    """The server is shutting down (a long poll it cut short); ask again once it is back."""


class AuditChainBroken(RuntimeFailure):
    """The audit log fails verification; ``seq`` is the first bad entry."""

    def __init__(self, message: str, *, seq: int) -> None:
        super().__init__(message)
        self.seq = seq


class UpstreamDown(RuntimeFailure):
    """The wrapped MCP server is not running (it exited, or could not be started)."""


class SendFailed(RuntimeFailure):
    """A channel could not deliver a notice; the dispatcher retries it with backoff and
    shows the message in ``signoff notify list``, the inbox and the log."""
