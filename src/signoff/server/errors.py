"""The one table that maps signoff's errors to HTTP statuses."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

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
    SignoffError,
    StoreUnavailable,
    TaskNotFound,
    TokenNotFound,
    Unauthenticated,
)

__all__ = ["STATUS_OF", "install_error_handlers", "status_of"]

STATUS_OF: tuple[tuple[type[SignoffError], int], ...] = (
    (RequestNotFound, 404),
    (GrantNotFound, 404),
    (TaskNotFound, 404),
    (TokenNotFound, 404),
    (ArgsMismatch, 409),
    (InvalidTransition, 409),
    (InvalidRequest, 422),
    (InvalidDecision, 422),
    (PolicyError, 422),
    (NotAllowed, 403),
    (Unauthenticated, 401),
    (CallerError, 400),
    (StoreUnavailable, 503),
    (AuditChainBroken, 500),
    (SignoffError, 500),
)
"""First match wins, so subclasses come before their parents."""


def status_of(exc: SignoffError) -> int:
    """The HTTP status for ``exc``."""
    return next(code for cls, code in STATUS_OF if isinstance(exc, cls))


def _location(loc: tuple[int | str, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts)


def install_error_handlers(app: FastAPI) -> None:
    """Every error becomes ``{"error": kind, "detail": one line}`` with its status."""

    async def signoff_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, SignoffError)
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthenticated) else None
        return JSONResponse(
            {"error": type(exc).__name__, "detail": exc.message},
            status_code=status_of(exc),
            headers=headers,
        )

    async def validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = list(exc.errors())
        first = errors[0] if errors else {"loc": (), "msg": "invalid input"}
        where = _location(tuple(first.get("loc", ())))
        msg = str(first.get("msg", "invalid input")).removeprefix("Value error, ")
        return JSONResponse(
            {"error": "InvalidInput", "detail": f"{where}: {msg}" if where else msg},
            status_code=422,
        )

    app.add_exception_handler(SignoffError, signoff_error)
    app.add_exception_handler(RequestValidationError, validation_error)
