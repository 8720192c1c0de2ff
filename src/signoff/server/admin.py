"""Administration over HTTP: tokens, and who a token belongs to (``/me``).

Only admins create, list and revoke tokens; any caller may ask who it is.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import Field

from signoff.domain.principals import Principal, Role
from signoff.domain.text import NoNul
from signoff.errors import NotAllowed
from signoff.server.bodies import StrictBody
from signoff.server.deps import API, Caller, ServiceDep
from signoff.wire import TokenCreated, TokenList, TokenView

__all__ = ["TokenBody", "admin_router"]


class TokenBody(StrictBody):
    """A token to create."""

    name: NoNul = Field(min_length=1, max_length=200)
    role: Role


def admin_router() -> APIRouter:
    """``/tokens``, ``/tokens/{id}/revoke`` and ``/me``."""
    router = APIRouter(prefix=API)
    _tokens(router)

    @router.get("/me", response_model=Principal, tags=["tokens"])
    async def me(caller: Caller) -> Principal:
        """Who the token belongs to."""
        return caller

    return router


def _tokens(router: APIRouter) -> None:
    """Create, list and revoke tokens (admins)."""

    @router.post("/tokens", status_code=201, response_model=TokenCreated, tags=["tokens"])
    async def create_token(body: TokenBody, service: ServiceDep, caller: Caller) -> TokenCreated:
        """Create a token (admins); the token is in this answer only, stored hashed."""
        if caller.role != "admin":
            raise NotAllowed("only admins may create tokens")
        token, record = await service.create_token(body.name, body.role, created_by=caller.name)
        return TokenCreated.issued(token, record)

    @router.get("/tokens", response_model=TokenList, tags=["tokens"])
    async def list_tokens(service: ServiceDep, caller: Caller) -> TokenList:
        """Tokens' ids, names and roles (admins); never the tokens or their hashes."""
        if caller.role != "admin":
            raise NotAllowed("only admins may list tokens")
        records = await service.store.list_tokens()
        return TokenList(items=[TokenView.of(t) for t in records])

    @router.post("/tokens/{token_id}/revoke", response_model=TokenView, tags=["tokens"])
    async def revoke_token(token_id: str, service: ServiceDep, caller: Caller) -> TokenView:
        """Revoke a token (admins): it and the inbox sessions made with it stop working."""
        return TokenView.of(await service.revoke_token(token_id, caller))
