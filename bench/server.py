"""Load on a real ``signoff serve``: agents, approvers and 1,000 WebSocket clients at once.

Starts a server process on a fresh SQLite file, connects ``--ws`` WebSocket clients (all
receiving every event), then runs ``--agents`` agents, each looping: create a request,
long-poll ``wait``, claim, report the result; while ``--approvers`` approvers approve each
request as its ``created`` event reaches them. Prints lifecycles per second and, measured
from the moment an approver sends its decision, p50 / p99 latency until the waiting agent's
``wait`` returns and until the ``decided`` event reaches the WebSocket clients.

    python bench/server.py [--ws 1000] [--agents 20] [--approvers 4] [--lifecycles 400]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.serving import free_port, start_server

API = "/api/v1"


def pct(samples: list[float], q: float) -> float:
    """The q-quantile of samples, in milliseconds."""
    ordered = sorted(samples)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def make_token(base: str, admin: str, name: str, role: str) -> str:
    """A new token made through the API."""
    async with httpx.AsyncClient(base_url=base) as http:
        response = await http.post(
            f"{API}/tokens",
            json={"name": name, "role": role},
            headers={"Authorization": f"Bearer {admin}"},
        )
        response.raise_for_status()
        token: str = response.json()["token"]
        return token


async def run(opts: argparse.Namespace) -> None:
    """Set up, load, measure, print."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_CONFIG_HOME": tmp}
        server = start_server(f"sqlite:///{Path(tmp) / 'bench.db'}", free_port(), env)
        try:
            await measure(server.base, server.admin_token or "", opts)
        finally:
            server.stop()


async def measure(base: str, admin: str, opts: argparse.Namespace) -> None:
    """The load itself."""
    agent_tokens = [await make_token(base, admin, f"agent{n}", "agent") for n in range(opts.agents)]
    approver = await make_token(base, admin, "approver", "approver")
    ws_url = base.replace("http", "ws") + f"{API}/ws"
    headers = {"Authorization": f"Bearer {admin}"}

    decided_sent: dict[str, float] = {}
    wait_latency: list[float] = []
    ws_latency: list[float] = []
    done = asyncio.Event()
    completed = 0

    sockets: list[ClientConnection] = []
    for _ in range(opts.ws):
        sockets.append(await connect(ws_url, additional_headers=headers, max_queue=None))
    print(f"{len(sockets)} WebSocket clients connected")

    async def listen(ws: ClientConnection) -> None:
        async for raw in ws:
            arrived = time.perf_counter()
            # Parse only what is measured: 1,000 clients share this one process.
            if '"type": "decided"' not in str(raw):
                continue
            sent = decided_sent.get(json.loads(raw)["request"]["id"])
            if sent is not None:
                ws_latency.append(arrived - sent)

    listeners = [asyncio.create_task(listen(ws)) for ws in sockets]

    async def approve_loop(http: httpx.AsyncClient, queue: asyncio.Queue[str]) -> None:
        while True:
            request_id = await queue.get()
            decided_sent[request_id] = time.perf_counter()
            response = await http.post(
                f"{API}/requests/{request_id}/decision", json={"type": "approve"}
            )
            response.raise_for_status()

    async def feed(queue: asyncio.Queue[str]) -> None:
        async with connect(ws_url, additional_headers=headers, max_queue=None) as ws:
            async for raw in ws:
                message = json.loads(raw)
                if message.get("type") == "created":
                    await queue.put(message["request"]["id"])

    async def agent(token: str, n: int) -> None:
        nonlocal completed
        auth = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=base, headers=auth, timeout=120) as http:
            while completed < opts.lifecycles:
                args: dict[str, Any] = {"command": f"job {n}"}
                created = await http.post(
                    f"{API}/requests",
                    json={"session_id": f"s{n}", "tool_name": "shell", "tool_args": args},
                )
                request_id = created.json()["id"]
                waited = await http.get(f"{API}/requests/{request_id}/wait?timeout=60")
                returned = time.perf_counter()
                assert waited.json()["status"] == "approved", waited.text
                wait_latency.append(returned - decided_sent[request_id])
                await http.post(f"{API}/requests/{request_id}/claim", json={"args": args})
                await http.post(f"{API}/requests/{request_id}/result", json={"ok": True})
                completed += 1
        if completed >= opts.lifecycles:
            done.set()

    queue: asyncio.Queue[str] = asyncio.Queue()
    approver_http = httpx.AsyncClient(
        base_url=base, headers={"Authorization": f"Bearer {approver}"}, timeout=60
    )
    feeder = asyncio.create_task(feed(queue))
    await asyncio.sleep(0.5)
    approvers = [
        asyncio.create_task(approve_loop(approver_http, queue)) for _ in range(opts.approvers)
    ]
    start = time.perf_counter()
    await asyncio.gather(*(agent(t, n) for n, t in enumerate(agent_tokens)))
    elapsed = time.perf_counter() - start
    await asyncio.sleep(1.0)  # let the last events reach every socket
    for task in [feeder, *approvers, *listeners]:
        task.cancel()
    await approver_http.aclose()
    for ws in sockets:
        await ws.close()

    print(
        f"agents {opts.agents}, approvers {opts.approvers}, WebSocket clients {opts.ws}, "
        f"lifecycles {completed}"
    )
    print(f"lifecycles per second: {completed / elapsed:.1f}")
    print(
        f"decision -> agent's wait returns: p50 {pct(wait_latency, 0.5):.1f} ms, "
        f"p99 {pct(wait_latency, 0.99):.1f} ms ({len(wait_latency)} samples)"
    )
    expected = completed * len(sockets)
    print(
        f"decision -> WebSocket delivery:   p50 {pct(ws_latency, 0.5):.1f} ms, "
        f"p99 {pct(ws_latency, 0.99):.1f} ms ({len(ws_latency)} of {expected} deliveries)"
    )


def main() -> None:
    """Parse options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ws", type=int, default=1000)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--approvers", type=int, default=4)
    parser.add_argument("--lifecycles", type=int, default=400)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
