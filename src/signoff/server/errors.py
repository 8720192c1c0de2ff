"""The one table that maps signoff's errors to HTTP statuses."""

from __future__ import annotations

import json

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from signoff.errors import (
    ArgsMismatch,
    AuditChainBroken,
    CallerError,
    GrantNotFound,
    InvalidDecision,
    InvalidHeader,
    InvalidRequest,
    InvalidTransition,
    NotAllowed,
    PayloadTooLarge,
    PolicyError,
    RequestNotFound,
    RequestTimeout,
    RouteNotFound,
    ServerBusy,
    ServerStopping,
    SignoffError,
    StoreUnavailable,
    TaskNotFound,
    TokenNotFound,
    Unauthenticated,
)
from signoff.server.error_pages import framework_error

__all__ = ["STATUS_OF", "error_body", "install_error_handlers", "status_of"]

STATUS_OF: tuple[tuple[type[SignoffError], int], ...] = (
    (RequestNotFound, 404),
    (GrantNotFound, 404),
    (TaskNotFound, 404),
    (TokenNotFound, 404),
    (RouteNotFound, 404),
    (ArgsMismatch, 409),
    (InvalidTransition, 409),
    (InvalidHeader, 400),
    (InvalidRequest, 422),
    (InvalidDecision, 422),
    (PolicyError, 422),
    (NotAllowed, 403),
    (Unauthenticated, 401),
    (PayloadTooLarge, 413),
    (RequestTimeout, 408),
    (CallerError, 400),
    (StoreUnavailable, 503),
    (ServerBusy, 503),
    (ServerStopping, 503),
    (AuditChainBroken, 500),
    (SignoffError, 500),
)
"""First match wins, so subclasses come before their parents."""


def status_of(exc: SignoffError) -> int:
    """The HTTP status for ``exc``."""
    return next(code for cls, code in STATUS_OF if isinstance(exc, cls))


def error_body(exc: SignoffError) -> bytes:
    """``{"error": kind, "detail": one line}`` as bytes, for answers sent below FastAPI."""
    return json.dumps({"error": type(exc).__name__, "detail": _one_line(exc.message)}).encode()


def _one_line(detail: str) -> str:
    """``detail`` with every character that is not printable (newline, CR, ESC, bidi and
    format marks, lone surrogates) shown as its Python escape (``\\n``, ``\\x1b``,
    ``\\u202e``): a detail names what a client sent (a key, a field), and stays one line of
    visible text whatever that was."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in detail)


def _location(loc: tuple[int | str, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts)


def install_error_handlers(app: FastAPI) -> None:
    """Every error becomes ``{"error": kind, "detail": one line}`` with its status."""

    async def signoff_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, SignoffError)
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthenticated) else None
        if isinstance(exc, ServerStopping):  # a long poll cut by a shutdown: ask again soon
            headers = {"Retry-After": "1"}
        return JSONResponse(
            {"error": type(exc).__name__, "detail": _one_line(exc.message)},
            status_code=status_of(exc),
            headers=headers,
        )

    async def validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = list(exc.errors())
        first = errors[0] if errors else {"loc": (), "msg": "invalid input"}
        if first.get("type") == "json_invalid":
            ctx = first.get("ctx")
            why = ctx.get("error", "invalid JSON") if isinstance(ctx, dict) else "invalid JSON"
            return JSONResponse(
                {"error": "InvalidInput", "detail": f"the body is not valid JSON: {why}"},
                status_code=422,
            )
        where = _location(tuple(first.get("loc", ())))
        msg = str(first.get("msg", "invalid input")).removeprefix("Value error, ")
        return JSONResponse(
            {"error": "InvalidInput", "detail": _one_line(f"{where}: {msg}" if where else msg)},
            status_code=422,
        )

    async def http_error(request: Request, exc: Exception) -> Response:
        # FastAPI answers a body it cannot read with a bare 400: a body that is not UTF-8,
        # or one a limit in server/limits.py stopped (that error is the cause)
        assert isinstance(exc, HTTPException)
        cause = exc.__cause__
        if isinstance(cause, SignoffError):
            return await signoff_error(request, cause)
        if isinstance(cause, UnicodeDecodeError):
            detail = f"the body is not valid UTF-8 text: {cause.reason} at byte {cause.start}"
            return JSONResponse({"error": "InvalidInput", "detail": detail}, status_code=422)
        if exc.status_code == 400 and cause is not None:
            detail = f"the body cannot be read: {exc.detail}"
            return JSONResponse({"error": "InvalidInput", "detail": detail}, status_code=422)
        # an unknown path, a method the path does not take: JSON, or a page for a browser
        return framework_error(request, exc.status_code, str(exc.detail), exc.headers)

    app.add_exception_handler(SignoffError, signoff_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
