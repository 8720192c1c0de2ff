"""Hosted runs (``signoff serve --agent``): started over HTTP, decided through ``/resume``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from tests.paths.scenarios import Outcome, PathsServer, Scenario
from tests.serving import bearer

DONE = ("Completed", "Failed", "Canceled")


def http(paths: PathsServer) -> httpx.AsyncClient:
    """The API as the admin, who starts the runs and may decide them (starter_may_approve)."""
    return httpx.AsyncClient(base_url=paths.api, headers=bearer(paths.admin_token), timeout=30)


def ran(paths: PathsServer) -> list[dict[str, Any]]:
    """Every run of the hosted agent's tools so far."""
    log = paths.home / "hosted.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


async def start(paths: PathsServer, scenario: Scenario, session_id: str) -> dict[str, Any]:
    """Start a run whose model calls the scenario's tool; the paused task."""
    async with http(paths) as api:
        started = await api.post(
            "/agents/deploy/runs", json={"prompt": scenario.tool, "session_id": session_id}
        )
    assert started.status_code == 201, started.text
    task: dict[str, Any] = started.json()
    assert task["status"] == "Paused", task
    return task


async def resume(paths: PathsServer, request_id: str, decision: dict[str, Any]) -> bool:
    """``POST /resume/{id}`` with the decision's action; True if taken, False on 409."""
    if decision["type"] == "reject":
        body: dict[str, Any] = {"action": "reject", "reason": decision["reason"]}
    elif "args" in decision:
        body = {"action": "edit", "args": decision["args"]}
    else:
        body = {"action": "approve"}
    async with http(paths) as api:
        answer = await api.post(f"/resume/{request_id}", json=body)
    if answer.status_code == 409:
        return False
    assert answer.status_code == 200, answer.text
    return True


async def finish(paths: PathsServer, task: dict[str, Any], before: int) -> Outcome:
    """Wait for the run to end; what its model was told and what its tool ran."""
    async with http(paths) as api:
        for _ in range(600):
            now = (await api.get(f"/tasks/{task['task_id']}")).json()
            if now["status"] in DONE:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"the run never ended: {now}")
    told = [h["text"] for h in now["history"] if h["kind"] == "tool_result"]
    return Outcome(
        task["request_id"],
        told[-1] if told else f"(none: the run is {now['status']})",
        ran(paths)[before:],
    )
