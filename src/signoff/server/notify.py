"""Notification routes and person links over HTTP.

``/notify/routes`` and ``/people/links`` are for admins (an agent's token is refused);
``/notify/failing`` names the routes that cannot send, to any signed-in person, so the
inbox can say so: no silent failures.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from pydantic import Field

from signoff.domain.notify import PersonLink, Route, RouteSpec
from signoff.server.bodies import StrictBody
from signoff.server.deps import API, Caller, ServiceDep
from signoff.wire import FailingRoute, FailingRoutes, LinkList, RouteList

__all__ = ["LinkBody", "UnlinkBody", "notify_router"]


class LinkBody(StrictBody):
    """A Slack user id or email address to link to a person."""

    kind: Literal["slack", "email"]
    external_id: str = Field(min_length=1, max_length=320)
    name: str = Field(min_length=1, max_length=200)


class UnlinkBody(StrictBody):
    """The link to remove."""

    kind: Literal["slack", "email"]
    external_id: str = Field(min_length=1, max_length=320)


def notify_router() -> APIRouter:
    """``/notify/routes``, ``/notify/failing`` and ``/people/links``."""
    router = APIRouter(prefix=API)

    @router.post("/notify/routes", status_code=201, response_model=Route, tags=["notify"])
    async def add_route(
        body: RouteSpec, request: Request, service: ServiceDep, caller: Caller
    ) -> Route:
        """Add a notification route (admins). 422 for a webhook channel's private address
        unless the server allows private webhooks, or an unknown ``escalate_to``."""
        return await service.add_route(
            body, caller, allow_private=request.app.state.allow_private_webhooks
        )

    @router.get("/notify/routes", response_model=RouteList, tags=["notify"])
    async def list_routes(service: ServiceDep, caller: Caller) -> RouteList:
        """Every route (tools.toml's read-only) with its last send and failure (admins)."""
        return RouteList(items=await service.list_routes(caller))

    @router.post("/notify/routes/{name}/remove", response_model=Route, tags=["notify"])
    async def remove_route(name: str, service: ServiceDep, caller: Caller) -> Route:
        """Remove a stored route (admins); tools.toml's are edited in the file."""
        return await service.remove_route(name, caller)

    @router.get("/notify/failing", response_model=FailingRoutes, tags=["notify"])
    async def failing(service: ServiceDep, caller: Caller) -> FailingRoutes:
        """Routes whose latest attempt failed, by name and error (people, not agents)."""
        return FailingRoutes(
            items=[
                FailingRoute(name=s.route.name, error=s.last_error or "failing")
                for s in await service.failing_routes(caller)
            ]
        )

    @router.post("/people/links", status_code=201, response_model=PersonLink, tags=["notify"])
    async def link(body: LinkBody, service: ServiceDep, caller: Caller) -> PersonLink:
        """Link a Slack user id or an email address to a person with a decider token."""
        return await service.link_person(body.kind, body.external_id, body.name, caller)

    @router.get("/people/links", response_model=LinkList, tags=["notify"])
    async def links(service: ServiceDep, caller: Caller) -> LinkList:
        """Every person link (admins)."""
        return LinkList(items=await service.list_links(caller))

    @router.post("/people/links/remove", response_model=PersonLink, tags=["notify"])
    async def unlink(body: UnlinkBody, service: ServiceDep, caller: Caller) -> PersonLink:
        """Remove a person link (admins)."""
        return await service.unlink_person(body.kind, body.external_id, caller)

    return router
