"""A person's edit of a tool call's arguments, seen before it is approved.

Before approving a call with edited arguments, the person sees what the edit would do:
the call's preview (a file diff) made again for the edited arguments, by the very
function and file reader that made the request's own preview, and how the edit misfits
the tool's schema, per argument. Nothing is written: a preview is a dry run of approving.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pydantic import BaseModel, ConfigDict, JsonValue

from signoff.domain.decisions import Approve
from signoff.domain.previews import FilePreview, FileReader, file_edit_preview
from signoff.domain.principals import Principal
from signoff.domain.requests import ApprovalRequest, Request
from signoff.domain.schemas import ArgsMisfit, args_misfits
from signoff.domain.transitions import apply_decision
from signoff.errors import InvalidDecision

__all__ = ["EditPreview", "args_preview", "check_may_edit", "edit_preview"]


class EditPreview(BaseModel):
    """What approving a call with edited arguments would do, before anyone approves."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    args: dict[str, JsonValue]
    """The edited arguments this preview is for."""
    preview: FilePreview | None
    """The call's preview made for ``args`` (same shape as the request's own ``preview``);
    None when the edited call writes no file."""
    errors: list[ArgsMisfit]
    """How ``args`` misfit the tool's schema; empty when they fit, when there is no schema,
    or when they are the agent's own proposal (which approving never checks)."""


def args_preview(args: Mapping[str, JsonValue], read_file: FileReader | None) -> FilePreview | None:
    """A tool call's preview for ``args``: the one function a request's preview is made by,
    at submit and again for an edit, so both read files by the same rules."""
    if not args:
        return None
    # without a reader the preview still shows what the call itself says, marked so
    return file_edit_preview(args, read_file)


def check_may_edit(
    request: Request, args: Mapping[str, JsonValue], principal: Principal, now: datetime
) -> ApprovalRequest:
    """Refuse a preview wherever approving ``request`` would be refused to ``principal``.

    Approving as proposed is tried as a dry run (nothing is kept): an agent, a request no
    longer pending or expired, a person who is not a designated approver or who already
    voted, are refused just as a decision would be. Then the request must be a tool call
    that may be edited (unless ``args`` are the proposal itself).
    """
    apply_decision(request, Approve(), principal, now)
    if not isinstance(request, ApprovalRequest):
        raise InvalidDecision(
            f"request {request.id} is a {request.kind} request: only a tool call's "
            "arguments can be edited"
        )
    if not request.editable and dict(args) != request.tool_args:
        raise InvalidDecision(
            f"request {request.id} may not be edited: approve the call as proposed or reject it"
        )
    return request


def edit_preview(
    request: ApprovalRequest, args: Mapping[str, JsonValue], read_file: FileReader | None
) -> EditPreview:
    """The preview and schema misfits of ``request`` with ``args`` instead of its own."""
    edited = dict(args)
    errors = [] if edited == request.tool_args else args_misfits(request.args_schema, edited)
    return EditPreview(args=edited, preview=args_preview(edited, read_file), errors=errors)
