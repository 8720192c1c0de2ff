"""A person's edited arguments, previewed over HTTP before they approve them."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import JsonValue

from signoff.domain.edits import EditPreview
from signoff.server.bodies import StrictBody
from signoff.server.deps import API, Caller, ServiceDep

__all__ = ["EditBody", "edits_router"]


class EditBody(StrictBody):
    """The arguments as the person edited them."""

    args: dict[str, JsonValue]


def edits_router() -> APIRouter:
    """``POST /requests/{id}/preview``: what approving with edited arguments would do."""
    router = APIRouter(prefix=API, tags=["requests"])

    @router.post("/requests/{request_id}/preview", response_model=EditPreview)
    async def preview_edit(
        request_id: str, body: EditBody, service: ServiceDep, caller: Caller
    ) -> EditPreview:
        """The call's preview made again for edited ``args``, and how they misfit the tool's
        schema (``errors``, still 200); changes nothing.

        Made by the same code and file reader as the request's own preview (the server's
        preview root only). Deciders only: 403 for an agent whatever the id, 404 unknown,
        409 no longer pending, 422 a request that is not an editable tool call.
        """
        return await service.preview_edit(request_id, body.args, caller)

    return router
