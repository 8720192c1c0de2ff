"""Standing grants over HTTP: list them, revoke one."""

from __future__ import annotations

from fastapi import APIRouter

from signoff.domain.grants import Grant
from signoff.server.deps import API, Caller, ServiceDep
from signoff.wire import GrantList

__all__ = ["grants_router"]


def grants_router() -> APIRouter:
    """``/grants`` and ``/grants/{id}/revoke``."""
    router = APIRouter(prefix=API, tags=["grants"])

    @router.get("/grants", response_model=GrantList)
    async def grants(service: ServiceDep, caller: Caller, live: bool = True) -> GrantList:
        """Standing grants (approvers and admins)."""
        return GrantList(items=await service.list_grants(live_only=live, principal=caller))

    @router.post("/grants/{grant_id}/revoke", response_model=Grant)
    async def revoke(grant_id: str, service: ServiceDep, caller: Caller) -> Grant:
        """Stop a standing grant approving anything more."""
        return await service.revoke_grant(grant_id, caller)

    return router
