"""A real ``signoff serve --agent chat=...`` for the AG-UI tests, and an SSE reader for it."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from signoff.server.app import API
from tests.serving import DEMO, Server, new_token, serve_hosted


@dataclass(frozen=True)
class Frame:
    """One event of an AG-UI stream: its ``id:`` and its JSON."""

    id: str | None
    data: dict[str, Any]

    @property
    def type(self) -> str:
        """The AG-UI event type."""
        kind: str = self.data["type"]
        return kind


@dataclass
class Chat:
    """The server, its agent's workspace, and a token per person."""

    server: Server
    workspace: Path
    tokens: dict[str, str]

    def person(self, name: str, role: str = "approver") -> str:
        """A token for ``name`` (made once)."""
        if name not in self.tokens:
            self.tokens[name] = new_token(self.server, name, role)[0]
        return self.tokens[name]


def serve_chat(home: Path, tools_toml: str | None = None) -> Iterator[Chat]:
    """Yield ``signoff serve --agent chat=tests.server.agui_agent:agent`` (and the demo chat
    agent as ``demo``) on its own SQLite file in ``home`` (with ``tools_toml`` as its policy
    if given); stopped at the end."""
    server, workspace = serve_hosted(
        home, "chat=tests.server.agui_agent:agent", DEMO, tools_toml=tools_toml
    )
    assert server.admin_token is not None
    yield Chat(server, workspace, {"admin": server.admin_token})
    if server.process.poll() is None:
        server.stop()


def run_input(
    thread: str, text: str | None = None, *, resume: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """An AG-UI ``RunAgentInput``: ``text`` as the last user message, ``resume`` entries."""
    messages = (
        [{"id": f"m-{thread}-{len(text or '')}", "role": "user", "content": text}] if text else []
    )
    body: dict[str, Any] = {
        "threadId": thread,
        "runId": f"run-{os.urandom(4).hex()}",
        "messages": messages,
    }
    if resume is not None:
        body["resume"] = resume
    return body


def resolved(interrupt_id: str, payload: Any) -> dict[str, Any]:
    """A resume entry answering ``interrupt_id`` with ``payload``."""
    return {"interruptId": interrupt_id, "status": "resolved", "payload": payload}


async def read_frames(
    response: httpx.Response, stop: Callable[[Frame], bool] | None = None
) -> list[Frame]:
    """The events of an SSE answer until it ends (or until ``stop`` says so of one)."""
    assert response.status_code in (200, 201, 202), (await response.aread()).decode()
    frames: list[Frame] = []
    event_id: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith(":"):
            continue
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line == "" and data:
            frames.append(Frame(event_id, json.loads("\n".join(data))))
            event_id, data = None, []
            if stop is not None and stop(frames[-1]):
                break
    return frames


async def post_run(
    http: httpx.AsyncClient, body: dict[str, Any], agent: str = "chat", **headers: str
) -> list[Frame]:
    """POST a run and read its whole event stream."""
    async with http.stream("POST", f"{API}/agents/{agent}/runs", json=body, headers=headers) as got:
        return await read_frames(got)


async def lines_until_ended(
    http: httpx.AsyncClient,
    url: str,
    end: Callable[[], Awaitable[object]],
    *,
    after: str | None = None,
) -> list[str]:
    """Every line of the stream at ``url`` (after event id ``after``) until the server ends
    it, ``end`` done once it is read (the server must end it within 10 s)."""
    headers = {"Last-Event-ID": after} if after is not None else {}
    async with http.stream("GET", url, headers=headers) as got:
        assert got.status_code == 200
        lines: list[str] = []

        async def read() -> None:
            async for line in got.aiter_lines():
                lines.append(line)

        reading = asyncio.create_task(read())
        await asyncio.sleep(0.3)
        await end()
        await asyncio.wait_for(reading, 10)
    return lines


def ended(frame: Frame) -> bool:
    """Whether ``frame`` ends a run."""
    return frame.type in ("RUN_FINISHED", "RUN_ERROR")


def interrupts(frames: list[Frame]) -> list[dict[str, Any]]:
    """The interrupts the last run ended on ([] when it did not pause)."""
    outcome = frames[-1].data.get("outcome") or {}
    found: list[dict[str, Any]] = (
        outcome.get("interrupts", []) if outcome.get("type") == "interrupt" else []
    )
    return found


def order(event_id: str | None) -> tuple[int, int]:
    """An event id ``K-N`` as the pair it is ordered by."""
    assert event_id is not None
    k, n = event_id.split("-")
    return int(k), int(n)


async def stored(http: httpx.AsyncClient, thread: str) -> dict[str, Any]:
    """The task as stored, read once: a run's last event reaches a reader only after the
    save that ends its segment, so once a run streamed the task is as it ended."""
    task: dict[str, Any] = (await http.get(f"{API}/tasks/{thread}")).json()
    return task
