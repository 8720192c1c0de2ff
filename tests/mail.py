"""A real SMTP server (aiosmtpd) for the email tests, and reading what it received."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

import pytest

from signoff.config import open_store, server_secret
from signoff.domain.notify import EmailTarget, Notice, Route
from signoff.domain.principals import Principal
from signoff.notify.email import EmailSender, SmtpSettings
from signoff.service import Service
from tests.serving import Server, free_port

LINK = re.compile(r"https?://[^\s\"<>]+/links/[A-Za-z0-9_.-]+")
"""A signed link in a message's text."""


@dataclass
class Mailbox:
    """What the SMTP server on ``port`` has received, newest last."""

    port: int
    messages: list[EmailMessage] = field(default_factory=list)

    def last_to(self, address: str) -> EmailMessage:
        """The newest message to ``address``."""
        found = [m for m in self.messages if str(m["To"]) == address]
        assert found, f"no message to {address} in {len(self.messages)}"
        newest: EmailMessage = found[-1]
        return newest


def parts(message: EmailMessage) -> tuple[str, str]:
    """A message's plain-text and HTML parts."""
    text = message.get_body(("plain",))
    page = message.get_body(("html",))
    assert text is not None and page is not None, "both a text and an HTML part"
    return str(text.get_content()), str(page.get_content())


def links(message: EmailMessage) -> dict[str, str]:
    """The Approve and Reject links of a message's text part, by decision."""
    text, _ = parts(message)
    found: dict[str, str] = {}
    for line in text.splitlines():
        for word, decision in (("Approve:", "approve"), ("Reject:", "reject")):
            if line.startswith(word):
                match = LINK.search(line)
                assert match is not None, line
                found[decision] = match.group(0)
    return found


@contextmanager
def smtp_server() -> Iterator[Mailbox]:
    """An aiosmtpd server on a free local port, in its own thread, for the block."""
    controller_module = pytest.importorskip("aiosmtpd.controller", reason="pip install aiosmtpd")
    box = Mailbox(port=free_port())

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            parsed = message_from_bytes(envelope.content, policy=policy.default)
            assert isinstance(parsed, EmailMessage)
            box.messages.append(parsed)
            return "250 OK"

    controller = controller_module.Controller(Handler(), hostname="127.0.0.1", port=box.port)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()


async def _mail(server: Server, mailbox: Mailbox, request_id: str, to: str) -> None:
    service = Service(open_store(server.db))
    await service.open()
    try:
        sender = EmailSender(
            SmtpSettings(host="127.0.0.1", port=mailbox.port, tls="none"),
            service=service,
            public_url=server.base,
            key=server_secret(server.db).key,
        )
        now = datetime.now(UTC)
        route = Route(
            id="route_mail",
            name="mail",
            channel=EmailTarget(to=[to]),
            created_by="admin",
            created_at=now,
        )
        notice = Notice(
            id="notice_1",
            route_id=route.id,
            request_id=request_id,
            purpose="new",
            status="pending",
            attempts=0,
            next_attempt_at=now,
            created_at=now,
        )
        await sender.send(notice, await service.get(request_id), route)
    finally:
        await service.close()


def mail_links(server: Server, mailbox: Mailbox, request_id: str, to: str) -> dict[str, str]:
    """Mail ``request_id`` to ``to`` with the sender as ``server`` builds it (its database,
    its secret), through ``mailbox``'s SMTP server; the message's links."""
    before = len(mailbox.messages)
    asyncio.run(_mail(server, mailbox, request_id, to))
    assert len(mailbox.messages) == before + 1
    return links(mailbox.last_to(to))


async def _link(server: Server, address: str, name: str) -> None:
    service = Service(open_store(server.db))
    await service.open()
    try:
        await service.link_person("email", address, name, Principal(name="admin", role="admin"))
    finally:
        await service.close()


def link_person(server: Server, address: str, name: str) -> None:
    """Make ``address`` stand for ``name`` (who holds a decider token) on ``server``."""
    asyncio.run(_link(server, address, name))
