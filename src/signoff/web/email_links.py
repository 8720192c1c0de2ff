"""The pages an emailed link opens: see what it decides, then confirm it.

``GET /links/{token}`` only shows the request, the decision and the person it will be
made as: mail scanners and link previews fetch links, so opening one never decides.
``POST /links/{token}`` (the page's button) decides, as the person the link's address is
linked to (``signoff people link ADDRESS NAME``), recorded ``via: email-link``, with the
same governance as the inbox. The token is the credential (``notify/links.py``), so the
form carries no CSRF token, but a POST from another site is refused as a sign-in is.
A link works once (``Service.use_once``); a decided request says who decided it.
"""

from __future__ import annotations

import html
import json
import string
from importlib import resources
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from signoff.domain.decisions import Approve, Reject, require_reason
from signoff.domain.principals import Principal
from signoff.domain.requests import ApprovalRequest
from signoff.domain.requests import Request as SignoffRequest
from signoff.errors import (
    CallerError,
    InvalidDecision,
    InvalidTransition,
    NotAllowed,
    RequestNotFound,
)
from signoff.notify.links import BadLink, SignedLink, verify_link
from signoff.server.auth import check_login_origin, session_key
from signoff.service import Service

__all__ = ["email_link_router"]

_PAGE = string.Template(
    resources.files("signoff.web").joinpath("templates", "link.html").read_text("utf-8")
)
_FORM_LIMIT = 8192
_REASON_LIMIT = 2000
_ARGS_SHOWN = 20_000


def _page(message: str, *, status: int, body: str = "", error: bool = True) -> HTMLResponse:
    page = _PAGE.substitute(
        message=html.escape(message), message_class="error" if error else "", body=body
    )
    return HTMLResponse(page, status_code=status, headers={"Cache-Control": "no-store"})


def _decided_by(request: SignoffRequest) -> str:
    record = request.decision
    if record is None:
        if request.status == "pending":  # overdue, not yet swept: expiry decides it
            return "This request can no longer be decided: it has expired."
        return f"This request is already {request.status}."
    return (
        f"This request was already decided ({record.decision.type}) by {record.decided_by} "
        f"via {record.via} at {record.decided_at.isoformat(timespec='seconds')}."
    )


def _details(request: SignoffRequest) -> str:
    e = html.escape
    rows = [("Requested by", request.requested_by), ("Session", request.session_id)]
    what = ""
    if isinstance(request, ApprovalRequest):
        rows.insert(0, ("Tool", request.tool_name))
        args = json.dumps(request.tool_args, indent=2, ensure_ascii=False)[:_ARGS_SHOWN]
        what = f'<pre id="link-args">{e(args)}</pre>'
    expires = request.expires_at.isoformat(timespec="seconds") if request.expires_at else "never"
    rows.append(("Expires", expires))
    table = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in rows)
    return f'<table id="link-request">{table}</table>{what}'


async def _resolve(
    request: Request, token: str
) -> tuple[SignedLink, Principal, SignoffRequest] | HTMLResponse:
    """The link, its person and its request, or the page saying why it is refused."""
    service: Service = request.app.state.service
    try:
        link = verify_link(session_key(request), token, now=service.clock())
    except BadLink as exc:
        status = 410 if "expired" in str(exc) else 400
        return _page(f"This link is refused: {exc}.", status=status)
    person = await service.person_for("email", link.recipient)
    if person is None:
        return _page(
            f"This link is refused: {link.recipient} is not linked to a signoff person "
            "who may decide (signoff people link ADDRESS NAME).",
            status=403,
        )
    try:
        found = await service.get(link.request_id, person)
    except RequestNotFound:
        return _page("This link is refused: its request does not exist.", status=404)
    if found.status != "pending":
        return _page(_decided_by(found), status=409)
    return link, person, found


def email_link_router() -> APIRouter:
    """``/links/{token}``: the confirm page (GET) and the decision (POST)."""
    router = APIRouter(include_in_schema=False)

    @router.get("/links/{token}")
    async def confirm_page(request: Request, token: str) -> HTMLResponse:
        """What the link would decide, as whom; deciding takes the page's button."""
        resolved = await _resolve(request, token)
        if isinstance(resolved, HTMLResponse):
            return resolved
        link, person, found = resolved
        verb = "Approve" if link.decision == "approve" else "Reject"
        reason = ""
        if link.decision == "reject":
            reason = (
                '<label for="reason">Reason (required; told to the agent)</label>'
                f'<textarea id="reason" name="reason" maxlength="{_REASON_LIMIT}" required>'
                "</textarea>"
            )
        form = (
            f'<form method="post" action="/links/{html.escape(token)}">{reason}'
            f'<button type="submit" id="confirm-link">{verb}</button></form>'
            f"<p class=hint>You act as {html.escape(person.name)}; the link works once.</p>"
        )
        title = f"{verb} this request as {person.name} ({link.recipient})?"
        return _page(title, status=200, body=_details(found) + form, error=False)

    @router.post("/links/{token}")
    async def confirm(request: Request, token: str) -> HTMLResponse:
        """Decide as the linked person: once, from this server's own page only."""
        try:
            check_login_origin(request)
        except NotAllowed as exc:
            return _page(exc.message.replace("sign-in", "a link's decision"), status=403)
        body = await request.body()
        if len(body) > _FORM_LIMIT:
            return _page("The form is too large.", status=413)
        resolved = await _resolve(request, token)
        if isinstance(resolved, HTMLResponse):
            return resolved
        link, person, found = resolved
        fields = parse_qs(body.decode("utf-8", "replace"))
        reason = (fields.get("reason") or [""])[0][:_REASON_LIMIT]
        decision = Approve() if link.decision == "approve" else Reject(reason=reason)
        try:
            require_reason(decision)  # before the link is used up: it still works after
        except InvalidDecision as exc:
            return _page(f"Not decided: {exc.message}. Go back and say why.", status=422)
        service: Service = request.app.state.service
        if not await service.use_once(f"email-link:{link.mac}", link.expires_at):
            return _page("This link was already used; each link works once.", status=409)
        try:
            decided = await service.decide(found.id, decision, person, via="email-link")
        except InvalidTransition:
            return _page(_decided_by(await service.get(found.id)), status=409)
        except CallerError as exc:
            return _page(f"Refused: {exc.message}", status=403)
        done = "Approved" if link.decision == "approve" else "Rejected"
        if decided.status == "pending":  # one vote of a quorum
            return _page(
                f"{done} as {person.name}: your vote is recorded; the request waits for more.",
                status=200,
                error=False,
            )
        return _page(f"{done} as {person.name}.", status=200, error=False)

    return router
