"""The notification dispatcher on a fake clock, on every store backend: new requests reach
their routes, escalation and expiry warnings happen once, digests gather, and a route that
cannot send shows as failing and in the log."""

from __future__ import annotations

import logging

import pytest
from pydantic import JsonValue

from signoff.domain.decisions import Approve
from signoff.domain.notify import Notice, Route
from signoff.domain.requests import Request
from signoff.errors import SendFailed
from signoff.notify.dispatcher import NotifyDispatcher
from signoff.service import Service
from signoff.testing import ADMIN, AGENT, APPROVER, FakeClock


class RecordingSender:
    """A webhook-channel sender that keeps what it was asked to send (a real Sender: the
    dispatcher's extension point), failing while ``failing`` is set."""

    channel = "webhook"

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, list[str]]] = []
        self.updated: list[tuple[str, str]] = []
        self.failing: str | None = None

    async def send(
        self, notice: Notice, request: Request, route: Route
    ) -> dict[str, JsonValue] | None:
        """Record (route, purpose, request ids), or fail."""
        if self.failing is not None:
            raise SendFailed(self.failing)
        self.sent.append((route.name, notice.purpose, list(notice.request_ids)))
        return {"seen": request.id}

    async def update(self, notice: Notice, request: Request, route: Route) -> None:
        """Record (route, the request's status)."""
        self.updated.append((route.name, request.status))


def hook(name: str, **more: object) -> dict[str, object]:
    """A webhook route's spec."""
    return {
        "name": name,
        "channel": {"type": "webhook", "url": f"http://127.0.0.1:9/{name}"},
        **more,
    }


async def add(service: Service, *specs: dict[str, object]) -> None:
    """Add routes as the admin (private URLs allowed: nothing is sent to them)."""
    for spec in specs:
        await service.add_route(spec, ADMIN, allow_private=True)


async def submit(service: Service, tool: str = "deploy", **more: object) -> Request:
    """A new approval request from the agent."""
    body = {"session_id": "s1", "tool_name": tool, "tool_args": {"env": "prod"}, **more}
    return (await service.submit(body, AGENT)).request


async def catch_up(service: Service, dispatcher: NotifyDispatcher, since: int = 0) -> int:
    """Hand the dispatcher every event after ``since``; the last seq."""
    for event in await service.store.list_events(after_seq=since):
        await dispatcher.handle(event)
        since = event.seq
    return since


async def test_a_new_request_reaches_matching_routes_and_is_updated_when_decided(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    """Only routes whose globs match are sent the request; deciding it updates what was sent."""
    sender = RecordingSender()
    dispatcher = NotifyDispatcher(service, [sender])
    await add(service, hook("deploys", tool="deploy*"), hook("shell", tool="shell"))
    request = await submit(service)
    seen = await catch_up(service, dispatcher)
    caplog.set_level(logging.INFO, logger="signoff.notify")
    assert await dispatcher.send_due() == 1
    assert sender.sent == [("deploys", "new", [request.id])]
    assert "sent new notice" in caplog.text and "deploys" in caplog.text
    (notice,) = await service.list_notices(ADMIN, request_id=request.id)
    assert notice.status == "sent" and notice.ref == {"seen": request.id}
    await catch_up(service, dispatcher, seen)  # the same events again: announced once
    assert await dispatcher.send_due() == 0
    await service.decide(request.id, Approve(), APPROVER)
    await catch_up(service, dispatcher, seen)
    assert sender.updated == [("deploys", "approved")]


async def test_requests_made_while_no_dispatcher_ran_are_announced_once(
    service: Service, clock: FakeClock
) -> None:
    """At start, pending requests no route was sent are announced (a digest gathers them),
    and the events that made them do not announce them again."""
    sender = RecordingSender()
    await add(service, hook("team"), hook("daily", digest=60))
    request = await submit(service)
    dispatcher = NotifyDispatcher(service, [sender])
    await dispatcher.catch_up()
    await dispatcher.catch_up()
    await catch_up(service, dispatcher)
    clock.advance(60)
    await dispatcher.send_due()
    assert sorted(sender.sent) == [("daily", "digest", [request.id]), ("team", "new", [request.id])]


async def test_escalation_happens_once(service: Service, clock: FakeClock) -> None:
    """Undecided past escalate_after, a request goes to the escalation route, once, even
    across a restart."""
    sender = RecordingSender()
    dispatcher = NotifyDispatcher(service, [sender])
    await add(
        service,
        hook("oncall", tool="nothing"),
        hook("team", escalate_after=600, escalate_to="oncall"),
    )
    request = await submit(service)
    await catch_up(service, dispatcher)
    clock.advance(599)
    await dispatcher.sweep()
    await dispatcher.send_due()
    assert sender.sent == [("team", "new", [request.id])]
    clock.advance(1)
    for _ in range(3):
        await dispatcher.sweep()
        await dispatcher.send_due()
        clock.advance(60)
    assert sender.sent[1:] == [("oncall", "escalation", [request.id])]
    restarted = NotifyDispatcher(service, [sender])  # a restart, or a second server
    await restarted.sweep()
    assert await restarted.send_due() == 0


async def test_a_warning_comes_once_before_expiry(service: Service, clock: FakeClock) -> None:
    """warn_before_expiry seconds before a request expires, its route is warned once."""
    sender = RecordingSender()
    dispatcher = NotifyDispatcher(service, [sender])
    await add(service, hook("team", warn_before_expiry=120))
    request = await submit(service, expires_in=600)
    await catch_up(service, dispatcher)
    await dispatcher.sweep()
    await dispatcher.send_due()
    clock.advance(479)
    await dispatcher.sweep()
    assert await dispatcher.send_due() == 0
    clock.advance(1)
    await dispatcher.sweep()
    await dispatcher.send_due()
    clock.advance(30)
    await dispatcher.sweep()
    await dispatcher.send_due()
    assert sender.sent == [("team", "new", [request.id]), ("team", "warning", [request.id])]


async def test_a_digest_gathers_a_window(service: Service, clock: FakeClock) -> None:
    """A digest route gets one message per window naming every request it gathered."""
    sender = RecordingSender()
    dispatcher = NotifyDispatcher(service, [sender])
    await add(service, hook("daily", digest=300))
    first = await submit(service)
    clock.advance(10)
    second = await submit(service, tool="shell")
    await catch_up(service, dispatcher)
    assert await dispatcher.send_due() == 0
    clock.advance(300)
    await dispatcher.send_due()
    assert sender.sent == [("daily", "digest", [first.id, second.id])]


async def test_a_failing_route_shows_in_the_list_and_the_log(
    service: Service, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A route that cannot send is failing, with its error, in list_routes and the log,
    retried with backoff; once it sends again it is no longer failing."""
    sender = RecordingSender()
    sender.failing = "HTTP 500 from the receiver"
    dispatcher = NotifyDispatcher(service, [sender])
    await add(service, hook("team"))
    await submit(service)
    await catch_up(service, dispatcher)
    caplog.set_level(logging.INFO, logger="signoff.notify")
    await dispatcher.send_due()
    (status,) = await service.list_routes(ADMIN)
    assert status.failing and status.last_error == "HTTP 500 from the receiver"
    assert [s.route.name for s in await service.failing_routes()] == ["team"]
    assert "route team failed" in caplog.text and "HTTP 500" in caplog.text
    assert await dispatcher.send_due() == 0  # backoff: not due yet
    sender.failing = None
    clock.advance(2)
    assert await dispatcher.send_due() == 1
    (status,) = await service.list_routes(ADMIN)
    assert not status.failing and status.last_sent_at == clock()


async def test_a_channel_without_a_sender_is_a_failure(service: Service) -> None:
    """A route whose channel this server cannot send on fails visibly, not silently."""
    dispatcher = NotifyDispatcher(service, [])
    await service.add_route(
        {"name": "chat", "channel": {"type": "slack", "channel": "#ops"}}, ADMIN
    )
    await submit(service)
    await catch_up(service, dispatcher)
    await dispatcher.send_due()
    (status,) = await service.list_routes(ADMIN)
    assert status.failing and status.last_error == "no slack sender is configured on this server"
