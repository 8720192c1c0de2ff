"""Administration over HTTP: tokens, webhooks and their deliveries, and ``/me``.

Only admins manage tokens and webhooks; any caller may ask whom its token names.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import Field

from signoff.domain.principals import Principal, Role
from signoff.domain.text import NoNul
from signoff.domain.webhooks import Delivery, DeliveryStatus, Webhook, WebhookFormat
from signoff.server.bodies import StrictBody
from signoff.server.deps import API, Caller, ServiceDep
from signoff.store.base import MAX_PAGE
from signoff.webhooks import redeliver
from signoff.wire import (
    DeliveryList,
    TokenCreated,
    TokenList,
    TokenView,
    WebhookList,
    WebhookView,
)

__all__ = ["TokenBody", "WebhookBody", "admin_router"]


class TokenBody(StrictBody):
    """A token to create."""

    name: NoNul = Field(min_length=1, max_length=200)
    role: Role


class WebhookBody(StrictBody):
    """A webhook endpoint to add."""

    url: str = Field(min_length=8, max_length=2000)
    secret: str | None = Field(default=None, min_length=8, max_length=200)
    format: WebhookFormat = "json"


def admin_router() -> APIRouter:
    """``/tokens``, ``/webhooks``, ``/webhooks/deliveries`` and ``/me``."""
    router = APIRouter(prefix=API)
    _tokens(router)
    _webhooks(router)
    _deliveries(router)

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
        token, record = await service.create_token(body.name, body.role, principal=caller)
        return TokenCreated.issued(token, record)

    @router.get("/tokens", response_model=TokenList, tags=["tokens"])
    async def list_tokens(service: ServiceDep, caller: Caller) -> TokenList:
        """Tokens' ids, names and roles (admins); never the tokens or their hashes."""
        records = await service.list_tokens(caller)
        return TokenList(items=[TokenView.of(t) for t in records])

    @router.post("/tokens/{token_id}/revoke", response_model=TokenView, tags=["tokens"])
    async def revoke_token(token_id: str, service: ServiceDep, caller: Caller) -> TokenView:
        """Revoke a token (admins): it and the inbox sessions made with it stop working."""
        return TokenView.of(await service.revoke_token(token_id, caller))


def _webhooks(router: APIRouter) -> None:
    """Add, list and remove webhook endpoints (admins)."""

    @router.post("/webhooks", status_code=201, response_model=Webhook, tags=["webhooks"])
    async def create_webhook(
        body: WebhookBody, request: Request, service: ServiceDep, caller: Caller
    ) -> Webhook:
        """Add an endpoint that receives every event (admins); the secret is in this answer.

        422 for a loopback, private or link-local target unless private ones are allowed.
        """
        return await service.add_webhook(
            body.url,
            caller,
            secret=body.secret,
            fmt=body.format,
            allow_private=request.app.state.allow_private_webhooks,
        )

    @router.get("/webhooks", response_model=WebhookList, tags=["webhooks"])
    async def list_webhooks(service: ServiceDep, caller: Caller) -> WebhookList:
        """Endpoints (admins), without their secrets."""
        items = await service.list_webhooks(caller)
        return WebhookList(items=[WebhookView.of(w) for w in items])

    @router.post("/webhooks/{webhook_id}/remove", response_model=WebhookView, tags=["webhooks"])
    async def delete_webhook(webhook_id: str, service: ServiceDep, caller: Caller) -> WebhookView:
        """Stop sending to an endpoint (admins)."""
        return WebhookView.of(await service.remove_webhook(webhook_id, caller))


def _deliveries(router: APIRouter) -> None:
    """Read the delivery log, send one delivery again (admins)."""

    @router.get("/webhooks/deliveries", response_model=DeliveryList, tags=["webhooks"])
    async def deliveries(
        service: ServiceDep,
        caller: Caller,
        status: DeliveryStatus | None = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    ) -> DeliveryList:
        """The delivery log, newest first (admins)."""
        return DeliveryList(items=await service.list_deliveries(caller, status=status, limit=limit))

    @router.post(
        "/webhooks/deliveries/{delivery_id}/redeliver", response_model=Delivery, tags=["webhooks"]
    )
    async def redeliver_one(
        delivery_id: str, request: Request, service: ServiceDep, caller: Caller
    ) -> Delivery:
        """Send one delivery again now (admins)."""
        return await redeliver(
            service,
            caller,
            delivery_id,
            base_url=getattr(request.app.state, "public_url", None),
            allow_private=request.app.state.allow_private_webhooks,
        )
