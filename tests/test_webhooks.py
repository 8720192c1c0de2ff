"""Webhooks: signed POSTs to a real receiver, retries with backoff, the log, redelivery."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from signoff import webhooks
from signoff.domain.webhooks import MAX_ATTEMPTS, Delivery, verify_signature
from signoff.errors import InvalidRequest, NotAllowed, StoreUnavailable
from signoff.service import Service
from signoff.testing import ADMIN, AGENT, APPROVER, FakeClock
from signoff.webhooks import WebhookDispatcher, redeliver
from tests.serving import Receiver


@pytest.fixture
async def dispatcher(service: Service) -> AsyncIterator[WebhookDispatcher]:
    """A dispatcher polling every 20 ms, sending to the receiver on 127.0.0.1."""
    running = WebhookDispatcher(
        service, base_url="http://signoff.example", poll=0.02, allow_private=True
    )
    await running.start()
    yield running
    await running.stop()


async def delivery_in(service: Service, status: str, timeout: float = 10) -> Delivery:
    """Wait until some delivery reaches ``status``."""
    for _ in range(int(timeout / 0.02)):
        found = await service.store.list_deliveries(status=status)  # type: ignore[arg-type]
        if found:
            return found[0]
        await asyncio.sleep(0.02)
    raise AssertionError(f"no delivery became {status}")


async def attempts_reach(service: Service, attempts: int, timeout: float = 10) -> None:
    """Wait until the first delivery has been tried ``attempts`` times."""
    for _ in range(int(timeout / 0.02)):
        found = await service.store.list_deliveries()
        if found and found[0].attempts >= attempts:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"the delivery was not tried {attempts} times")


async def test_every_event_arrives_signed(
    service: Service, receiver: Receiver, dispatcher: WebhookDispatcher
) -> None:
    """A submit and a decision each arrive as a POST whose HMAC signature verifies."""
    hook = await service.add_webhook(receiver.url, ADMIN, secret="s3cret-value", allow_private=True)
    request = (await service.submit({"session_id": "s", "tool_name": "t"}, AGENT)).request
    await service.decide(request.id, {"type": "approve"}, APPROVER)
    for _ in range(500):
        if len(receiver.received) == 2:
            break
        await asyncio.sleep(0.01)
    assert [json.loads(body)["type"] for _, body in receiver.received] == ["created", "decided"]
    headers, body = receiver.received[0]
    now = int(service.clock().timestamp())
    signature, delivery_id = headers["x-signoff-signature"], headers["x-signoff-delivery"]

    def verifies(secret: str, body: bytes, delivery_id: str, event_type: str) -> bool:
        return verify_signature(
            secret, signature, body, delivery_id=delivery_id, event_type=event_type, now=now
        )

    assert verifies(hook.secret, body, delivery_id, "created")
    assert not verifies("wrong", body, delivery_id, "created")
    assert not verifies(hook.secret, body + b" ", delivery_id, "created")
    assert not verifies(hook.secret, body, delivery_id + "x", "created")
    assert not verifies(hook.secret, body, delivery_id, "decided")
    assert headers["x-signoff-event"] == "created"
    for _ in range(500):  # the receiver answers before the outcome is recorded
        log = await service.store.list_deliveries(status="delivered")
        if len(log) == 2:
            break
        await asyncio.sleep(0.01)
    assert len(log) == 2 and all(d.attempts == 1 for d in log)


async def test_failures_are_retried_with_backoff(
    service: Service, clock: FakeClock, receiver: Receiver, dispatcher: WebhookDispatcher
) -> None:
    """Two 500s are retried after 2 s and 4 s; the third attempt delivers."""
    receiver.fail_next = 2
    await service.add_webhook(receiver.url, ADMIN, allow_private=True)
    await service.submit({"session_id": "s", "tool_name": "t"}, AGENT)
    await attempts_reach(service, 1)
    first = (await service.store.list_deliveries())[0]
    assert first.last_error == "HTTP 500"
    assert (first.next_attempt_at - clock()).total_seconds() == 2
    clock.advance(2)
    await attempts_reach(service, 2)
    clock.advance(4)
    delivered = await delivery_in(service, "delivered")
    assert delivered.attempts == 3 and len(receiver.received) == 1


async def test_gives_up_then_redelivers_by_hand(
    service: Service, clock: FakeClock, receiver: Receiver, dispatcher: WebhookDispatcher
) -> None:
    """After MAX_ATTEMPTS failures a delivery is failed; redeliver sends it again."""
    receiver.fail_next = MAX_ATTEMPTS
    await service.add_webhook(receiver.url, ADMIN, allow_private=True)
    await service.submit({"session_id": "s", "tool_name": "t"}, AGENT)
    for attempt in range(1, MAX_ATTEMPTS):
        await attempts_reach(service, attempt)  # advancing sooner would skip an attempt
        clock.advance(3600)
    failed = await delivery_in(service, "failed")
    assert failed.attempts == MAX_ATTEMPTS and receiver.received == []
    with pytest.raises(NotAllowed):
        await redeliver(service, APPROVER, failed.id)
    again = await redeliver(service, ADMIN, failed.id, allow_private=True)
    assert again.status == "delivered" and len(receiver.received) == 1


async def test_slack_format_links_and_escapes(
    service: Service, receiver: Receiver, dispatcher: WebhookDispatcher
) -> None:
    """Slack messages link to the request and escape agent text."""
    await service.add_webhook(receiver.url, ADMIN, fmt="slack", allow_private=True)
    request = (
        await service.submit(
            {"session_id": "s", "tool_name": "t", "tool_args": {"x": "<img src=x>"}}, AGENT
        )
    ).request
    await asyncio.wait_for(receiver.arrived.wait(), 10)
    message: dict[str, Any] = json.loads(receiver.received[0][1])
    assert f"<http://signoff.example/requests/{request.id}|Open in signoff>" in message["text"]
    assert "<img" not in message["text"] and "&lt;img src=x&gt;" in message["text"]


async def test_only_admins_manage_webhooks(service: Service, receiver: Receiver) -> None:
    """Adding needs an admin and an http(s) URL; a removed webhook gets nothing more."""
    with pytest.raises(NotAllowed):
        await service.add_webhook(receiver.url, APPROVER)
    with pytest.raises(InvalidRequest):
        await service.add_webhook("ftp://example.com", ADMIN)
    hook = await service.add_webhook(receiver.url, ADMIN, allow_private=True)
    removed = await service.remove_webhook(hook.id, ADMIN)
    assert removed.active is False
    with pytest.raises(InvalidRequest):
        await service.remove_webhook(hook.id, ADMIN)


async def test_the_dispatcher_outlives_a_store_outage(
    service: Service, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """StoreUnavailable while queuing and sending: it waits, goes on, and still delivers."""
    monkeypatch.setattr(webhooks, "_STORE_RETRY", 0.01)
    await service.add_webhook(receiver.url, ADMIN, allow_private=True)
    failures = {"list_webhooks": 2, "due_deliveries": 2}

    def flaky(name: str) -> Any:
        real = getattr(service.store, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            if failures[name]:
                failures[name] -= 1
                raise StoreUnavailable(f"{name}: the database is restarting")
            return await real(*args, **kwargs)

        return call

    for name in failures:
        monkeypatch.setattr(service.store, name, flaky(name))
    running = WebhookDispatcher(
        service, base_url="http://signoff.example", poll=0.02, allow_private=True
    )
    await running.start()
    try:
        await service.submit({"session_id": "s", "tool_name": "t"}, AGENT)
        for _ in range(500):
            if receiver.received:
                break
            await asyncio.sleep(0.01)
    finally:
        await running.stop()
    assert failures == {"list_webhooks": 0, "due_deliveries": 0}
    assert [json.loads(body)["type"] for _, body in receiver.received] == ["created"]


async def test_private_targets_are_refused_unless_allowed(service: Service) -> None:
    """Loopback, metadata and private URLs (and names resolving there) are refused by default."""
    for url in ("http://127.0.0.1:9/hook", "http://169.254.169.254/", "http://localhost/"):
        with pytest.raises(InvalidRequest, match="allow-private-webhooks"):
            await service.add_webhook(url, ADMIN)
    with pytest.raises(InvalidRequest, match="does not resolve"):
        await service.add_webhook("http://no-such-host.invalid/hook", ADMIN)
    assert await service.store.list_webhooks() == []
    hook = await service.add_webhook("http://127.0.0.1:9/hook", ADMIN, allow_private=True)
    assert hook.url == "http://127.0.0.1:9/hook"


async def test_a_private_target_is_refused_again_when_sending(
    service: Service, receiver: Receiver
) -> None:
    """A webhook that points at a private address by send time is not sent to: the check repeats."""
    await service.add_webhook(receiver.url, ADMIN, allow_private=True)
    running = WebhookDispatcher(service, base_url="http://signoff.example", poll=0.02)
    await running.start()
    try:
        await service.submit({"session_id": "s", "tool_name": "t"}, AGENT)
        for _ in range(500):
            tried = [d for d in await service.store.list_deliveries() if d.attempts]
            if tried:
                break
            await asyncio.sleep(0.01)
    finally:
        await running.stop()
    assert tried[0].last_error is not None and tried[0].last_error.startswith("refused: ")
    assert "loopback" in tried[0].last_error
    assert receiver.received == []
