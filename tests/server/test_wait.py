"""Long polls on ``GET /requests/{id}/wait``: each woken by its own decision, at no extra cost."""

from __future__ import annotations

import asyncio

import httpx

from signoff.bus.local import LocalBus
from signoff.client import API
from signoff.server.app import create_app
from signoff.service import Service
from tests.serving import bearer

WAITERS = 40


async def test_many_long_polls_each_woken_by_its_own_decision_with_no_task_of_their_own(
    service: Service,
) -> None:
    """Forty agents long-poll at once: each holds only its own request's task (no helper task
    per poll) and one subscription found by its request id; a decision wakes exactly its own
    waiter with its request; a stopping server answers the rest 503 and leaves nothing."""
    app = create_app(service, sweep=False)
    agent, _ = await service.create_token("bot", "agent")
    approver, _ = await service.create_token("alice", "approver")
    assert isinstance(service.bus, LocalBus)
    subscribed = service.bus.subscriber_count
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://signoff.test", timeout=30
    ) as http:
        ids = []
        for n in range(WAITERS):
            made = await http.post(
                f"{API}/requests",
                json={"session_id": f"s{n}", "tool_name": "t"},
                headers=bearer(agent),
            )
            ids.append(made.json()["id"])
        tasks = len(asyncio.all_tasks())
        polls = [
            asyncio.create_task(
                http.get(f"{API}/requests/{i}/wait?timeout=60", headers=bearer(agent))
            )
            for i in ids
        ]
        for _ in range(400):  # each poll reads its token and request first: a loaded machine
            # (and the store's pool may still be opening connections for those reads, each
            # in a task of asyncpg's for a moment)
            if (
                service.bus.subscriber_count == subscribed + WAITERS
                and len(asyncio.all_tasks()) == tasks + WAITERS
            ):
                break
            await asyncio.sleep(0.05)
        assert not any(poll.done() for poll in polls)
        assert len(asyncio.all_tasks()) == tasks + WAITERS  # the polls' own, nothing more
        assert service.bus.subscriber_count == subscribed + WAITERS

        half = ids[: WAITERS // 2]
        decided = await http.post(
            f"{API}/decisions", json={"ids": half, "type": "approve"}, headers=bearer(approver)
        )
        assert decided.status_code == 200, decided.text
        answers = await asyncio.wait_for(asyncio.gather(*polls[: WAITERS // 2]), 10)
        assert [(a.json()["id"], a.json()["status"]) for a in answers] == [
            (i, "approved") for i in half
        ]
        await asyncio.sleep(0.1)
        assert not any(poll.done() for poll in polls[WAITERS // 2 :])

        app.state.shutdown.begin()
        rest = await asyncio.wait_for(asyncio.gather(*polls[WAITERS // 2 :]), 10)
    assert {a.status_code for a in rest} == {503}
    assert {a.json()["error"] for a in rest} == {"ServerStopping"}
    assert service.bus.subscriber_count == subscribed
    assert len(asyncio.all_tasks()) == tasks
