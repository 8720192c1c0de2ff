"""The audit log over HTTP: read it, verify it, take its anchor."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from signoff.domain.audit import ChainReport
from signoff.server.deps import API, Caller, ServiceDep
from signoff.wire import AnchorView, AuditLog

__all__ = ["audit_router"]


def audit_router() -> APIRouter:
    """``/audit``, ``/audit/verify`` and ``/audit/anchor``."""
    router = APIRouter(prefix=API, tags=["audit"])

    @router.get("/audit", response_model=AuditLog)
    async def audit(
        service: ServiceDep,
        caller: Caller,
        request_id: Annotated[str | None, Query(max_length=100)] = None,
    ) -> AuditLog:
        """The audit chain, all of it (admins) or one request's entries."""
        return AuditLog(items=await service.audit(request_id, caller))

    @router.get("/audit/verify", response_model=ChainReport)
    async def audit_verify(
        service: ServiceDep,
        caller: Caller,
        anchor: Annotated[str | None, Query(max_length=100)] = None,
    ) -> ChainReport:
        """Check the audit log: edits, deletions, its head, unaudited requests and events,
        and, given ``anchor`` (``SEQ:HASH`` from /audit/anchor), that it extends that entry."""
        return await service.verify_audit(anchor, caller)

    @router.get("/audit/anchor", response_model=AnchorView)
    async def audit_anchor(service: ServiceDep, caller: Caller) -> AnchorView:
        """The chain head (approvers and admins), to keep outside the database."""
        return AnchorView.of(await service.audit_anchor(caller), service.clock())

    return router
