"""The email sender: one plain-text and HTML message per recipient, with signed links.

It speaks SMTP with the standard library (``smtplib``, in a worker thread so the event
loop never blocks): no extra to install. Each address on a route gets its own message,
because each carries links signed for that address only (``notify/links.py``): Approve
and Reject open a confirm page on this server, which decides as the person the address is
linked to (``signoff people link ADDRESS NAME``). An address linked to nobody gets the
request's page in the inbox instead, where they sign in. Choice and questions requests
always go to the inbox (a link cannot carry a choice or an answer).

Everything the agent wrote (tool, arguments, its name) is data: escaped in the HTML part,
kept out of headers but for a one-line, length-capped subject.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import smtplib
import ssl
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Literal, TypeAlias

from pydantic import JsonValue

from signoff.domain.notify import EmailTarget, Notice, Route
from signoff.domain.requests import ApprovalRequest, ChoiceRequest, Request
from signoff.notify import SendFailed
from signoff.notify.links import LinkDecision, link_expiry, sign_link
from signoff.service import Service

__all__ = [
    "ENV_SMTP_PASSWORD",
    "EmailSender",
    "Mailed",
    "SmtpSettings",
    "SmtpTls",
    "render_message",
]

ENV_SMTP_PASSWORD = "SIGNOFF_SMTP_PASSWORD"  # noqa: S105 - the variable's name
"""Where the SMTP password comes from: the environment only, never a command line."""

SmtpTls: TypeAlias = Literal["starttls", "tls", "none"]

_log = logging.getLogger("signoff.notify")
_ARGS_SHOWN = 4000
_SUBJECT = 150


@dataclass(frozen=True, kw_only=True)
class SmtpSettings:
    """How to reach the SMTP server, and whom mail comes from."""

    host: str
    """The SMTP server's host name."""
    port: int = 587
    """Its port: 587 for STARTTLS, 465 for TLS, 25 (or a test server's) for none."""
    tls: SmtpTls = "starttls"
    """``starttls`` (upgrade after connecting), ``tls`` (TLS from the start) or ``none``."""
    user: str | None = None
    """The login name, if the server wants one."""
    password: str | None = field(default=None, repr=False)
    """The password (``signoff serve`` reads it from ``$SIGNOFF_SMTP_PASSWORD`` only)."""
    sender: str = "signoff@localhost"
    """The From address."""
    timeout: float = 30.0
    """Seconds for each SMTP exchange."""


def _one_line(text: str, limit: int) -> str:
    flat = "".join(c if c.isprintable() else " " for c in text)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


_HEADLINE = {
    "new": "Approval needed",
    "escalation": "Still waiting (escalated)",
    "warning": "About to expire",
    "digest": "Waiting for you",
}


@dataclass(frozen=True, kw_only=True)
class Mailed:
    """One request in a message, with where its reader acts on it."""

    request: Request
    """The request."""
    page: str
    """Its page in the inbox."""
    approve: str | None = None
    """Its signed Approve link (a linked reader, an approval request)."""
    reject: str | None = None
    """Its signed Reject link."""


def _what(request: Request) -> tuple[str, str]:
    """A request's title and its details, as plain text (agent text: data)."""
    if isinstance(request, ApprovalRequest):
        args = json.dumps(request.tool_args, indent=2, ensure_ascii=False)
        if len(args) > _ARGS_SHOWN:
            args = args[:_ARGS_SHOWN] + "\n… (shortened; the full call is in the inbox)"
        return request.tool_name, args
    if isinstance(request, ChoiceRequest):
        return "a choice", request.prompt + "\n\n" + "\n".join(f"- {o}" for o in request.options)
    asked = "\n".join(f"- {q.text}" for q in request.questions)
    return "answers", f"{request.prompt or ''}\n\n{asked}".strip()


_ONCE = "Each link opens a page to confirm on; it works once, for you only."
_BUTTON = "padding:8px 16px;color:#fff;text-decoration:none;border-radius:4px;background:"


def _text_part(item: Mailed) -> list[str]:
    request = item.request
    title, details = _what(request)
    expires = request.expires_at.isoformat() if request.expires_at else "never"
    lines = [f"{request.requested_by} asks for {title}.", "", details, ""]
    lines += [f"Request: {request.id}", f"Expires: {expires}"]
    if item.approve and item.reject:
        lines += [f"Approve: {item.approve}", f"Reject:  {item.reject}"]
    return [*lines, f"Open in the inbox: {item.page}", ""]


def _html_part(item: Mailed) -> str:
    e = html.escape
    request = item.request
    title, details = _what(request)
    expires = request.expires_at.isoformat() if request.expires_at else "never"
    buttons = ""
    if item.approve and item.reject:
        buttons = (
            f'<p><a href="{e(item.approve)}" style="{_BUTTON}#1a7f37">Approve</a> '
            f'<a href="{e(item.reject)}" style="{_BUTTON}#cf222e">Reject</a></p>'
        )
    return (
        f"<p>{e(request.requested_by)} asks for <code>{e(title)}</code>.</p>"
        f"<pre>{e(details)}</pre>"
        f"<p>Request <code>{e(request.id)}</code>, expires {e(expires)}.</p>"
        f'{buttons}<p><a href="{e(item.page)}">Open in the inbox</a></p>'
    )


def render_message(
    items: list[Mailed], purpose: str, *, recipient: str, linked: bool
) -> tuple[str, str, str]:
    """The subject, plain text and HTML of one recipient's message about ``items``."""
    headline = _HEADLINE.get(purpose, "Approval needed")
    first = items[0].request
    about = f"{_what(first)[0]} ({first.requested_by})"
    if len(items) > 1:
        about = f"{len(items)} requests"
    subject = _one_line(f"[signoff] {headline}: {about}", _SUBJECT)
    text = [f"{headline}.", ""]
    for item in items:
        text += _text_part(item)
    notes: list[str] = []
    if any(item.approve for item in items):
        notes.append(_ONCE)
    if not linked:
        notes.append(
            f"{recipient} is not linked to a signoff person, so there are no one-click "
            "links: decide in the inbox."
        )
    text += notes
    body = "".join(
        [
            f"<!doctype html><html><body><p><strong>{html.escape(headline)}</strong></p>",
            "<hr>".join(_html_part(item) for item in items),
            "".join(f"<p>{html.escape(note)}</p>" for note in notes),
            "</body></html>",
        ]
    )
    return subject, "\n".join(text) + "\n", body


class EmailSender:
    """Sends a route's notices by SMTP (the ``email`` channel of ``signoff.notify``)."""

    channel = "email"

    def __init__(
        self, settings: SmtpSettings, *, service: Service, public_url: str, key: bytes
    ) -> None:
        """Mail through ``settings``; links point at ``public_url``, signed with ``key``
        (the server secret's key, the one the confirm pages check with)."""
        self.settings = settings
        self.service = service
        self.public_url = public_url.rstrip("/")
        self._key = key

    def _link(self, request: Request, decision: LinkDecision, recipient: str) -> str:
        token = sign_link(
            self._key,
            request_id=request.id,
            decision=decision,
            recipient=recipient,
            expires_at=link_expiry(request.expires_at, self.service.clock()),
        )
        return f"{self.public_url}/links/{token}"

    async def message_for(
        self, requests: list[Request], purpose: str, recipient: str
    ) -> EmailMessage:
        """The message ``recipient`` is sent about ``requests`` (one, or a digest's)."""
        address = recipient.strip().lower()
        linked = await self.service.person_for("email", address) is not None
        items = [
            Mailed(
                request=request,
                page=f"{self.public_url}/requests/{request.id}",
                approve=self._link(request, "approve", address) if linkable else None,
                reject=self._link(request, "reject", address) if linkable else None,
            )
            for request in requests
            for linkable in [linked and request.kind == "approval"]
        ]
        subject, text, body = render_message(items, purpose, recipient=address, linked=linked)
        message = EmailMessage()
        message["Subject"] = subject
        message["From"] = self.settings.sender
        message["To"] = recipient
        message["Date"] = formatdate(localtime=False)
        message["Message-ID"] = make_msgid(domain="signoff")
        message.set_content(text)
        message.add_alternative(body, subtype="html")
        return message

    def _deliver(self, messages: list[EmailMessage]) -> None:
        s = self.settings
        smtp: smtplib.SMTP
        if s.tls == "tls":
            smtp = smtplib.SMTP_SSL(
                s.host, s.port, timeout=s.timeout, context=ssl.create_default_context()
            )
        else:
            smtp = smtplib.SMTP(s.host, s.port, timeout=s.timeout)
        with smtp:
            if s.tls == "starttls":
                smtp.starttls(context=ssl.create_default_context())
            if s.user:
                smtp.login(s.user, s.password or "")
            for message in messages:
                smtp.send_message(message)

    async def send(
        self, notice: Notice, request: Request, route: Route
    ) -> dict[str, JsonValue] | None:
        """Mail each of the route's addresses its own message; SendFailed if SMTP refuses."""
        target = route.channel
        if not isinstance(target, EmailTarget):
            raise SendFailed(f"route {route.name} is not an email route")
        requests = [request]
        for other in notice.request_ids:
            if other != request.id:  # a digest's others, as they are now
                found = await self.service.get(other)
                if found.status == "pending":
                    requests.append(found)
        messages = [await self.message_for(requests, notice.purpose, to) for to in target.to]
        try:
            await asyncio.to_thread(self._deliver, messages)
        except (OSError, smtplib.SMTPException) as exc:
            raise SendFailed(
                f"SMTP {self.settings.host}:{self.settings.port}: {exc}"[:500]
            ) from None
        _log.info(
            "email sent for %s to %d address(es) on route %s",
            request.id,
            len(messages),
            route.name,
        )
        return {"to": [str(m["To"]) for m in messages]}

    async def update(self, notice: Notice, request: Request, route: Route) -> None:
        """Nothing: a sent email cannot change (its links say "already decided by …")."""
