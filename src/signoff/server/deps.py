"""What every endpoint depends on: the service and who is asking."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from signoff.domain.principals import Principal
from signoff.errors import Unauthenticated
from signoff.service import Service

__all__ = ["API", "Caller", "ServiceDep", "current_principal", "service_of"]

API = "/api/v1"
"""Where the public contract lives."""


def service_of(request: Request) -> Service:
    """The service the app serves."""
    service: Service = request.app.state.service
    return service


async def current_principal(
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
) -> Principal:
    """The principal behind the bearer token (or the inbox's session cookie); its name is
    the access log's ``who`` (``request.state.who``)."""
    principal = await _principal(request, authorization)
    request.state.who = principal.name
    return principal


async def _principal(request: Request, authorization: str | None) -> Principal:
    service = service_of(request)
    if authorization:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("use 'Authorization: Bearer <token>'")
        return await service.authenticate(token.strip())
    resolve = getattr(request.app.state, "cookie_principal", None)
    if resolve is not None:
        principal: Principal | None = await resolve(request)
        if principal is not None:
            return principal
    raise Unauthenticated("a bearer token is required")


async def _service(request: Request) -> Service:
    # async: FastAPI runs a plain def dependency in a worker thread, a thread hop and a
    # wake-up of the event loop for every request only to read the app's state
    return service_of(request)


Caller = Annotated[Principal, Depends(current_principal)]
"""A route parameter: who is asking."""

ServiceDep = Annotated[Service, Depends(_service)]
"""A route parameter: the service the app serves."""
