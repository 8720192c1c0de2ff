"""Load on a real ``signoff serve``: agents, approvers and 1,000 WebSocket clients at once.

Starts ``signoff serve`` on a fresh SQLite file. Agents loop over HTTP: create a request,
long-poll ``wait``, claim, report the result; approvers approve each request as its
``created`` event reaches them over a WebSocket. First a baseline of ``--baseline``
lifecycles runs with no other WebSocket client (the server's CPU per lifecycle on its own);
then ``--ws`` WebSocket clients, each receiving every event, connect from ``--procs``
separate processes and ``--lifecycles`` more run.

Prints lifecycles per second; p50 / p99 from the moment an approver sends its decision until
the agent's ``wait`` returns and until the ``decided`` event reaches each WebSocket client
(all clients' arrivals); whether every client got every event once and in order; the server
process's own CPU time (from /proc) per 1,000 deliveries, gross and net of what the
lifecycles cost in the baseline; and the client processes' CPU, to show they were not the
bottleneck (they parse raw frames, see bench/serving.py).

    python bench/server.py [--ws 1000] [--agents 20] [--approvers 4] [--lifecycles 400]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from serving import (
    API,
    Http,
    Served,
    WsCounter,
    WsStats,
    cpu_seconds,
    make_token,
    open_ws,
    pct,
    raise_open_files,
    start_server,
)

PEGGED = 0.9
"""A client process using more than this share of a core may be slowing the measurement."""


def ws_clients(port: int, token: str, count: int, pipe: Connection) -> None:
    """A process holding ``count`` WebSocket clients (the target of multiprocessing)."""
    asyncio.run(_ws_clients(port, token, count, pipe))


async def _ws_clients(port: int, token: str, count: int, pipe: Connection) -> None:
    """Connect, say ready, count frames from "go" until every socket has seen the last seq
    the main process names (or the timeout it gives passes), then send back what was seen."""
    loop = asyncio.get_running_loop()
    sockets = [await open_ws(port, token) for _ in range(count)]
    pipe.send(len(sockets))
    await loop.run_in_executor(None, pipe.recv)  # go
    cpu, wall = time.process_time(), time.monotonic()
    last_seq, timeout = await loop.run_in_executor(None, pipe.recv)
    for _ in range(int(timeout / 0.02)):  # every socket's counters, polled until caught up
        if not any(_behind(s, last_seq) for s in sockets):
            break
        await asyncio.sleep(0.02)
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    for ws in sockets:
        ws.close()
    pipe.send(([ws.stats for ws in sockets], cpu, wall))


def _behind(ws: WsCounter, last_seq: int) -> bool:
    return ws.stats.last_seq < last_seq and not ws.stats.closed_by_server


@dataclass
class Load:
    """What the agents, approvers and the approvers' feed share."""

    agents: list[str]
    approver: str
    port: int
    decided_sent: dict[str, float] = field(default_factory=dict)
    wait_latency: list[float] = field(default_factory=list)
    created: asyncio.Queue[str] = field(default_factory=asyncio.Queue)
    completed: int = 0  # lifecycles the agents finished
    completed_seen: int = 0  # "result" events (a lifecycle's last) the feed saw
    events_seen: int = 0
    last_seq: int = 0
    approvers: list[asyncio.Task[None]] = field(default_factory=list)
    feed_socket: WsCounter | None = None

    def feed(self, payload: bytes) -> None:
        """One event reaching the approvers' WebSocket."""
        message = json.loads(payload)
        self.events_seen += 1
        self.last_seq = max(self.last_seq, message["seq"])
        if message["type"] == "created":
            self.created.put_nowait(message["request"]["id"])
        elif message["type"] == "result":
            self.completed_seen += 1

    def start_approvers(self, count: int) -> None:
        """Start ``count`` approvers."""
        self.approvers = [asyncio.create_task(self.approve()) for _ in range(count)]

    async def approve(self) -> None:
        """Approve each request as its ``created`` event arrives, timing the decision."""
        http = await Http.open(self.port, self.approver)
        while True:
            request_id = await self.created.get()
            self.decided_sent[request_id] = time.monotonic()
            await http.call("POST", f"{API}/requests/{request_id}/decision", {"type": "approve"})

    async def agent(self, token: str, n: int, target: int) -> None:
        """Run lifecycles until ``target`` are done in all."""
        http = await Http.open(self.port, token)
        args: dict[str, Any] = {"command": f"job {n}"}
        body = {"session_id": f"s{n}", "tool_name": "shell", "tool_args": args}
        while self.completed < target:
            request_id = (await http.call("POST", f"{API}/requests", body))["id"]
            waited = await http.call("GET", f"{API}/requests/{request_id}/wait?timeout=60")
            returned = time.monotonic()
            feed = self.feed_socket.stats if self.feed_socket else None
            assert waited["status"] == "approved", (waited["status"], request_id, feed)
            self.wait_latency.append(returned - self.decided_sent[request_id])
            await http.call("POST", f"{API}/requests/{request_id}/claim", {"args": args})
            await http.call("POST", f"{API}/requests/{request_id}/result", {"ok": True})
            self.completed += 1
        http.close()

    async def lifecycles(self, count: int) -> float:
        """Run ``count`` more lifecycles; the seconds they took. Returns once the feed has
        seen each one's last event too."""
        target = self.completed + count
        start = time.monotonic()
        agents = asyncio.gather(*(self.agent(t, n, target) for n, t in enumerate(self.agents)))
        running: list[asyncio.Future[Any]] = [agents, *self.approvers]
        await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        for task in self.approvers:
            if task.done():
                agents.cancel()
                task.result()  # approvers end only by failing: the error, not a stall
        await agents
        elapsed = time.monotonic() - start
        deadline = time.monotonic() + 60
        while self.completed_seen < self.completed:
            assert time.monotonic() < deadline, "the feed missed lifecycles' last events"
            await asyncio.sleep(0.01)
        return elapsed


async def measure(server: Served, opts: argparse.Namespace) -> None:
    """The baseline, then the load with WebSocket clients; prints the figures."""
    port, admin = server.port, server.admin
    agents = [await make_token(port, admin, f"agent{n}", "agent") for n in range(opts.agents)]
    load = Load(agents, await make_token(port, admin, "approver", "approver"), port)
    load.feed_socket = await open_ws(port, admin, load.feed)
    load.start_approvers(opts.approvers)

    cpu = cpu_seconds(server.pid)
    elapsed = await load.lifecycles(opts.baseline)
    base_cpu = (cpu_seconds(server.pid) - cpu) / max(load.completed, 1)
    print(
        f"baseline, no WebSocket client but the approvers': {load.completed} lifecycles, "
        f"{load.completed / elapsed:.1f}/s, server CPU {1000 * base_cpu:.2f} ms per lifecycle"
    )
    base_completed = load.completed
    load.wait_latency.clear()

    context = multiprocessing.get_context("spawn")
    procs = min(opts.procs, opts.ws)
    pipes: list[Connection] = []
    workers = []
    for n in range(procs):
        ours, theirs = context.Pipe()
        count = opts.ws // procs + (1 if n < opts.ws % procs else 0)
        worker = context.Process(target=ws_clients, args=(port, admin, count, theirs), daemon=True)
        worker.start()
        pipes.append(ours)
        workers.append(worker)
    loop = asyncio.get_running_loop()
    connected = sum([await loop.run_in_executor(None, pipe.recv) for pipe in pipes])
    print(f"{connected} WebSocket clients connected from {procs} processes")
    await asyncio.sleep(0.5)

    for pipe in pipes:
        pipe.send("go")
    events_before = load.events_seen
    cpu, wall, own = cpu_seconds(server.pid), time.monotonic(), time.process_time()
    elapsed = await load.lifecycles(opts.lifecycles)
    for pipe in pipes:
        pipe.send((load.last_seq, 60.0))
    results = [await loop.run_in_executor(None, pipe.recv) for pipe in pipes]
    cpu, wall = cpu_seconds(server.pid) - cpu, time.monotonic() - wall
    own = time.process_time() - own
    for worker in workers:
        worker.join()
    for task in load.approvers:
        task.cancel()

    completed = load.completed - base_completed
    stats: list[WsStats] = [s for socket_stats, _, _ in results for s in socket_stats]
    ws_latency = [
        arrived - load.decided_sent[request_id]
        for s in stats
        for request_id, arrived in s.decided
        if request_id in load.decided_sent
    ]
    deliveries = sum(s.events for s in stats)
    expected = (load.events_seen - events_before) * connected
    print(
        f"agents {opts.agents}, approvers {opts.approvers}, WebSocket clients {connected}, "
        f"lifecycles {completed}"
    )
    print(f"lifecycles per second: {completed / elapsed:.1f}")
    print(
        f"decision -> agent's wait returns: p50 {pct(load.wait_latency, 0.5):.1f} ms, "
        f"p99 {pct(load.wait_latency, 0.99):.1f} ms ({len(load.wait_latency)} samples)"
    )
    print(
        f"decision -> WebSocket delivery:   p50 {pct(ws_latency, 0.5):.1f} ms, "
        f"p99 {pct(ws_latency, 0.99):.1f} ms (all clients, {len(ws_latency)} samples)"
    )
    print(
        f"deliveries {deliveries} of {expected} (events x clients); "
        f"gaps {sum(s.gaps for s in stats)}, repeats {sum(s.repeats for s in stats)}, "
        f"closed by the server {sum(s.closed_by_server for s in stats)}"
    )
    net = cpu - completed * base_cpu
    per_thousand = 1000 * cpu / max(deliveries, 1)
    print(
        f"server CPU {cpu:.2f} s over {wall:.2f} s ({100 * cpu / wall:.0f}% of a core): "
        f"{1000 * per_thousand:.1f} ms per 1,000 deliveries; net of the lifecycles' own cost "
        f"(baseline) {1e6 * net / max(deliveries, 1):.1f} us per delivery"
    )
    shares = [proc_cpu / proc_wall for _, proc_cpu, proc_wall in results]
    busiest = max([own / wall, *shares])
    verdict = "PEGGED: the client may be the bottleneck" if busiest > PEGGED else "not pegged"
    print(
        f"client CPU: WebSocket processes {', '.join(f'{100 * s:.0f}%' for s in shares)} "
        f"of a core, agents+approvers process {100 * own / wall:.0f}%: {verdict}"
    )


async def run(opts: argparse.Namespace) -> None:
    """Start the server, measure, stop it."""
    raise_open_files()
    connections = opts.ws + opts.agents + opts.approvers + 100
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp), "--max-connections", str(connections))
        try:
            await measure(server, opts)
        finally:
            server.stop()


def main() -> None:
    """Parse options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ws", type=int, default=1000, help="WebSocket clients")
    parser.add_argument("--procs", type=int, default=4, help="processes they run in")
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--approvers", type=int, default=4)
    parser.add_argument("--lifecycles", type=int, default=400)
    parser.add_argument("--baseline", type=int, default=100, help="lifecycles without clients")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
