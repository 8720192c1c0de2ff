"""The web inbox's pages: sign-in, the page shells, static files and security headers.

The pages are shells the server renders with who is signed in and their CSRF token; the
scripts in ``static/`` fill them from the public API and the live event stream. No
business logic lives here: every decision goes through the same API as any other client.
"""

from __future__ import annotations

import hmac
import html
import string
from importlib import resources
from typing import Annotated
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from signoff.domain.principals import DECIDER_ROLES, hash_token
from signoff.errors import NotAllowed, TaskNotFound, Unauthenticated
from signoff.server.auth import (
    COOKIE,
    SESSION_MAX_AGE,
    WebSession,
    check_login_origin,
    cookie_secure,
    end_session,
    open_session,
    read_session,
    session_key,
)
from signoff.service import Service
from signoff.web.email_links import email_link_router

__all__ = ["CSP", "SecurityHeaders", "static_files", "web_router"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""No inline script or style, nothing from elsewhere, never framed."""

_WEB = resources.files("signoff.web")
_TEMPLATES = {
    name: string.Template(_WEB.joinpath("templates", f"{name}.html").read_text("utf-8"))
    for name in ("page", "login")
}
_FORM_LIMIT = 4096


class SecurityHeaders:
    """Add the CSP and friends to every HTTP response."""

    HEADERS = (
        (b"content-security-policy", CSP.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
        (b"x-frame-options", b"DENY"),
    )

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                # a response that set its own CSP keeps it (only /docs does: apidocs.DOCS_CSP);
                # a second CSP header would apply as well, and the stricter would win
                own = any(name.lower() == b"content-security-policy" for name, _ in headers)
                message["headers"] = [*headers, *(self.HEADERS[1:] if own else self.HEADERS)]
            await send(message)

        await self.app(scope, receive, with_headers)


def static_files() -> StaticFiles:
    """The inbox's scripts and stylesheet, shipped inside the package."""
    return StaticFiles(directory=str(_WEB.joinpath("static")))


def _safe_next(target: str | None) -> str:
    """Only a path on this server: never another host (no open redirect)."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    # browsers drop tabs and newlines from URLs, so "/\t/evil" would become "//evil"
    if any(c == "\\" or ord(c) < 32 or ord(c) == 127 for c in target) or len(target) > 500:
        return "/"
    return target


def _login_page(
    message: str, *, status: int, next_path: str = "/", error: bool = True, form: bool = True
) -> HTMLResponse:
    form_html = ""
    if form:
        form_html = (
            '<form method="post" action="/login">'
            f'<input type="hidden" name="next" value="{html.escape(next_path)}">'
            '<label for="token">API token (approver or admin)</label>'
            '<input id="token" name="token" type="password" autocomplete="off" required>'
            '<button type="submit">Sign in</button></form>'
            "<p class=hint>Make one with <code>signoff token create NAME --role approver</code>; "
            "<code>signoff serve</code> prints a sign-in link on first start.</p>"
        )
    body = _TEMPLATES["login"].substitute(
        refresh="",
        message=html.escape(message),
        message_class="error" if error else "",
        form=form_html,
    )
    return HTMLResponse(body, status_code=status, headers={"Cache-Control": "no-store"})


def _signed_in(session: WebSession, next_path: str, *, secure: bool) -> HTMLResponse:
    """Set the cookie, then move on with a same-site navigation.

    A meta refresh rather than a redirect: a SameSite=Strict cookie set during a redirect
    that started on another site (a link in chat) would not be sent to the next page.
    """
    target = html.escape(next_path)
    body = _TEMPLATES["login"].substitute(
        refresh=f'<meta http-equiv="refresh" content="0;url={target}">',
        message=html.escape(f"Signed in as {session.principal.name}."),
        message_class="",
        form=f'<p><a href="{target}">Continue to the inbox</a></p>',
    )
    response = HTMLResponse(body, headers={"Cache-Control": "no-store"})
    response.set_cookie(
        COOKIE,
        session.cookie,
        max_age=SESSION_MAX_AGE,
        httponly=True,
        samesite="strict",
        secure=secure,
        path="/",
    )
    return response


_UNKNOWN = "Unknown or revoked token."
_AGENT = "Agent tokens cannot sign in to the inbox; use an approver or admin token."


async def _sign_in(request: Request, token: str, next_path: str) -> HTMLResponse:
    service: Service = request.app.state.service
    try:
        session = await open_session(service, session_key(request), token)
    except Unauthenticated:
        return _login_page(_UNKNOWN, status=401, next_path=next_path)
    except NotAllowed:
        return _login_page(_AGENT, status=403, next_path=next_path)
    return _signed_in(session, next_path, secure=cookie_secure(request))


async def _confirm(service: Service, token: str, next_path: str) -> HTMLResponse:
    """The page a sign-in link opens: who the token is, and a button that signs in.

    Signing in takes this click (a POST from this page), so a link or an image on another
    site cannot sign a browser in as someone else (login CSRF).
    """
    record = None
    if 0 < len(token) <= 200:
        record = await service.store.find_token(hash_token(token.strip()))
    if record is None or record.revoked_at is not None:
        return _login_page(_UNKNOWN, status=401, next_path=next_path)
    if record.role not in DECIDER_ROLES:
        return _login_page(_AGENT, status=403, next_path=next_path)
    form_html = (
        '<form method="post" action="/login">'
        f'<input type="hidden" name="next" value="{html.escape(next_path)}">'
        f'<input type="hidden" name="token" value="{html.escape(token)}">'
        '<button type="submit" id="confirm-sign-in">Sign in</button></form>'
        "<p class=hint>Only continue if you opened this link yourself: you will act as "
        "this user in the inbox.</p>"
    )
    who = f"{record.name} ({record.role})"
    body = _TEMPLATES["login"].substitute(
        refresh="",
        message=html.escape(f"Sign in as {who}?"),
        message_class="",
        form=form_html,
    )
    return HTMLResponse(body, headers={"Cache-Control": "no-store"})


def web_router() -> APIRouter:
    """Sign-in, sign-out and the inbox's pages."""
    router = APIRouter(include_in_schema=False)

    async def session_of(request: Request) -> WebSession | None:
        service: Service = request.app.state.service
        return await read_session(service, session_key(request), request.cookies.get(COOKIE))

    async def page(
        request: Request,
        name: str,
        title: str,
        request_id: str = "",
        task_id: str = "",
        keep: str = "",
    ) -> Response:
        session = await session_of(request)
        if session is None:
            # keep: the part of the query the page needs after signing in
            target = quote(request.url.path + keep, safe="/")
            return RedirectResponse(f"/login?next={target}", status_code=303)
        service: Service = request.app.state.service
        status = 200
        if task_id:
            # another person's conversation, or none: 404, as its stream answers
            try:
                await service.get_conversation(task_id, session.principal)
            except TaskNotFound:
                status = 404
        seq = await service.store.last_event_seq()
        body = _TEMPLATES["page"].substitute(
            csrf=html.escape(session.csrf),
            seq=seq,
            user=html.escape(session.principal.name),
            role=html.escape(session.principal.role),
            title=html.escape(title),
            page=name,
            request_id=html.escape(request_id),
            task_id=html.escape(task_id),
        )
        return HTMLResponse(body, status_code=status, headers={"Cache-Control": "no-store"})

    @router.get("/")
    async def inbox(request: Request) -> Response:
        """The pending queue."""
        return await page(request, "inbox", "Inbox")

    @router.get("/history")
    async def history(request: Request) -> Response:
        """Decided and executed requests."""
        return await page(request, "history", "History")

    @router.get("/grants")
    async def grants(request: Request) -> Response:
        """Standing grants, with revoke buttons."""
        return await page(request, "grants", "Grants")

    @router.get("/requests/{request_id}")
    async def one_request(
        request: Request, request_id: Annotated[str, Path(max_length=100)]
    ) -> Response:
        """One request: its controls while pending, its decision, result and audit trail.

        ``?via=mcp-url`` (the link ``signoff mcp-proxy`` gives an MCP client) survives
        signing in; the page then records its decisions ``via: mcp-url``.
        """
        keep = "?via=mcp-url" if request.query_params.get("via") == "mcp-url" else ""
        return await page(request, "request", "Request", request_id, keep=keep)

    @router.get("/chat")
    async def chat(request: Request) -> Response:
        """The person's conversations with hosted agents, and a box to start one."""
        return await page(request, "chat", "Chat")

    @router.get("/chat/{task_id}")
    async def conversation(
        request: Request, task_id: Annotated[str, Path(max_length=128)]
    ) -> Response:
        """One conversation: its AG-UI stream as messages, tool cards and decision boxes.

        Another person's conversation, or none, is a 404 (the shell then says so): the same
        answer as its stream gives, so an id tells nothing about whose it is.
        """
        return await page(request, "conversation", "Chat", task_id=task_id)

    @router.get("/login")
    async def login(
        request: Request,
        token: Annotated[str | None, Query(max_length=200)] = None,
        next_: Annotated[str | None, Query(alias="next", max_length=500)] = None,
    ) -> Response:
        """A link carrying a token (as Jupyter's does) asks to confirm; else the form."""
        next_path = _safe_next(next_)
        if token is not None:
            return await _confirm(request.app.state.service, token, next_path)
        if await session_of(request) is not None:
            return RedirectResponse(next_path, status_code=303)
        return _login_page(
            "Sign in with an API token.", status=200, next_path=next_path, error=False
        )

    @router.post("/login")
    async def login_form(request: Request) -> Response:
        """Sign in from the form or the link's confirm button; never from another site."""
        try:
            check_login_origin(request)
        except NotAllowed as exc:
            return _login_page(exc.message, status=403, form=False)
        body = await request.body()
        if len(body) > _FORM_LIMIT:
            return _login_page("The form is too large.", status=413)
        fields = parse_qs(body.decode("utf-8", "replace"))
        token = (fields.get("token") or [""])[0]
        return await _sign_in(request, token, _safe_next((fields.get("next") or ["/"])[0]))

    @router.post("/logout")
    async def logout(request: Request) -> Response:
        """Sign out: the form must carry the session's CSRF token; the session ends for good."""
        session = await session_of(request)
        body = await request.body()
        fields = parse_qs(body[:_FORM_LIMIT].decode("utf-8", "replace"))
        sent = (fields.get("csrf") or [""])[0]
        if session is not None:
            if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
                return _login_page("Missing or wrong CSRF token.", status=403, form=False)
            await end_session(request.app.state.service, session)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(
            COOKIE, path="/", httponly=True, samesite="strict", secure=cookie_secure(request)
        )
        return response

    router.include_router(email_link_router())  # the confirm pages of emailed links
    return router
