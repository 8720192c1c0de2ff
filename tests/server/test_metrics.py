"""``GET /metrics`` on a real ``signoff serve``, read with prometheus-client's own parser:
a lifecycle moves the request counters, the decision histogram and the pending gauge; a
WebSocket and an event stream show in their gauges; webhook deliveries are counted by
outcome; the pending gauge is right after a restart."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.asyncio.client import connect

from signoff.client import API
from tests.server.lifecycle import lifecycle
from tests.serving import Server, agent_token, bearer, free_port, run_receiver, start_server

Samples = dict[str, float]


def start(home: Path) -> Server:
    """A real server on ``home``'s database (webhooks to loopback allowed)."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(home)}
    db = f"sqlite:///{home / 'serve.db'}"
    return start_server(db, free_port(), env, "--allow-private-webhooks")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module."""
    running = start(tmp_path_factory.mktemp("metrics"))
    yield running
    if running.process.poll() is None:
        running.stop()


def scrape(server: Server, token: str | None = None) -> Samples:
    """Every sample, as ``name{label=value,...}`` (labels sorted) to its value."""
    answer = httpx.get(f"{server.base}/metrics", headers=bearer(token or admin(server)))
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}"] = sample.value
    return samples


def admin(server: Server) -> str:
    assert server.admin_token is not None
    return server.admin_token


def until(server: Server, check: Callable[[Samples], bool]) -> Samples:
    """Scrape until ``check`` holds (the event follower counts a moment after a commit)."""
    deadline = time.monotonic() + 15
    while not check(found := scrape(server)):
        assert time.monotonic() < deadline, found
        time.sleep(0.05)
    return found


async def test_a_lifecycle_moves_the_counters_and_a_websocket_the_gauge(server: Server) -> None:
    """Submit, approve, claim, report (and one left pending): each status' counter, the
    decision histogram, the pending gauge, HTTP answers and webhook outcomes move; a
    WebSocket client and an SSE reader are in their gauges while connected."""
    before = scrape(server)
    assert "process_cpu_seconds_total{}" in before
    async with run_receiver() as receiver:
        receiver.fail_next = 1  # the first delivery fails once: a retry, then delivered
        async with httpx.AsyncClient(base_url=server.base, headers=bearer(admin(server))) as http:
            added = await http.post(f"{API}/webhooks", json={"url": receiver.url})
            assert added.status_code == 201, added.text
        ws_url = server.base.replace("http", "ws") + f"{API}/ws"
        async with (
            connect(ws_url, additional_headers=bearer(admin(server))),
            httpx.AsyncClient(base_url=server.base, headers=bearer(admin(server))) as reader,
            reader.stream("GET", f"{API}/events") as stream,
        ):
            assert stream.status_code == 200

            def both(s: Samples) -> bool:
                return s["signoff_websocket_clients{}"] == 1 and s["signoff_sse_clients{}"] == 1

            await asyncio.to_thread(until, server, both)
            agent = agent_token(server, "metrics-bot")
            await asyncio.to_thread(lifecycle, server, agent, {"command": "ls"})
            async with httpx.AsyncClient(base_url=server.base, headers=bearer(agent)) as bot:
                left = await bot.post(
                    f"{API}/requests", json={"session_id": "m", "tool_name": "t", "tool_args": {}}
                )
                assert left.status_code == 201

        def moved(s: Samples) -> bool:
            return (
                s.get("signoff_requests_total{kind=approval,status=completed}") == 1
                and s.get("signoff_webhook_deliveries_total{outcome=delivered}", 0) >= 4
                and s["signoff_websocket_clients{}"] == 0
                and s["signoff_sse_clients{}"] == 0
            )

        after = await asyncio.to_thread(until, server, moved)
    for status, count in (("pending", 2), ("approved", 1), ("executing", 1), ("completed", 1)):
        name = f"signoff_requests_total{{kind=approval,status={status}}}"
        assert after[name] - before.get(name, 0) == count
    assert after["signoff_decision_seconds_count{kind=approval}"] == 1
    assert after["signoff_decision_seconds_bucket{kind=approval,le=+Inf}"] == 1
    assert after["signoff_requests_pending{}"] == before["signoff_requests_pending{}"] + 1
    assert after["signoff_webhook_deliveries_total{outcome=retry}"] == 1
    posted = "signoff_http_requests_total{method=POST,status=201}"
    assert after[posted] - before.get(posted, 0) >= 3
    assert after["signoff_http_requests_total{method=WS,status=101}"] >= 1


def test_a_new_server_counts_pending_from_the_store(server: Server) -> None:
    """A server started on a database with requests waiting (as after a restart) has them
    in its gauge at once, though it saw none of them submitted."""
    agent = agent_token(server, "restart-bot")
    for n in range(2):
        created = httpx.post(
            f"{server.base}{API}/requests",
            json={"session_id": "r", "tool_name": f"t{n}", "tool_args": {}},
            headers=bearer(agent),
        )
        assert created.status_code == 201
    listed = httpx.get(
        f"{server.base}{API}/requests",
        params={"status": "pending", "limit": 200},
        headers=bearer(admin(server)),
    )
    waiting = len(listed.json()["items"])
    assert waiting >= 2
    env = {**server.env, "SIGNOFF_LOG_LEVEL": "warning"}
    second = start_server(server.db, free_port(), env)
    try:
        assert scrape(second, admin(server))["signoff_requests_pending{}"] == waiting
    finally:
        second.stop()
