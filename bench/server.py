"""Load on a real ``signoff serve``: agents, approvers and 1,000 WebSocket clients at once.

Starts ``signoff serve`` on a fresh SQLite file. Agents loop over HTTP: create a request,
long-poll ``wait``, claim, report the result; approvers approve each request as its
``created`` event reaches them over a WebSocket. First a baseline of ``--baseline``
lifecycles runs with no other WebSocket client (the server's CPU per lifecycle on its own);
then ``--ws`` WebSocket clients, each receiving every event, connect from ``--procs``
separate processes, and two phases run with them:

- **flat out**: ``--lifecycles`` lifecycles, each agent starting its next as soon as its last
  ends: the most the server sustains (its latency is that of a saturated server: requests
  queue behind each other);
- **paced**: ``--lifecycles`` more, started at ``--rate`` a second in all (lifecycle k no
  sooner than k / rate seconds after the phase began; an agent behind schedule starts at
  once, so a server that cannot keep up shows a lower rate): the latency at that load.

Per phase it prints lifecycles per second and p50 / p99 from the moment an approver sends
its decision until the agent's ``wait`` returns and until the ``decided`` event reaches each
WebSocket client (all clients' arrivals: the kernel's receive time of the data, read with
``SO_TIMESTAMPNS``, and, for comparison, when the client process read it); whether every
client got every event once and in order; the server process's own CPU time (from /proc;
with ``--sqlite-writer process``, its writer process's added) per 1,000 deliveries, gross
and net of what the lifecycles cost in the baseline; and the client processes' CPU, to show
they were not the bottleneck (they parse raw frames, see bench/serving.py).

The 1,000 clients stand in for browsers on other machines. Here they share the server's two
cores, so their processes run at nice 10: they take the CPU the server leaves instead of
delaying it, and their own scheduling delay is not counted as delivery time (the kernel's
timestamp is).

    python bench/server.py [--ws 1000] [--agents 20] [--approvers 4] [--lifecycles 400]
        [--rate 60] [--sqlite-writer thread|process]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import multiprocessing
import os
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
    make_token,
    open_ws,
    pct,
    raise_open_files,
    start_server,
    tree_cpu_seconds,
)

PEGGED = 0.9
"""A client process using more than this share of a core may be slowing the measurement."""

SATURATED = 0.9
"""The share of the machine's cores busy past which its processes queue for one."""

CLIENT_NICE = 10
"""The WebSocket client processes' niceness: below the server, which they stand in front of."""


def ws_clients(port: int, token: str, count: int, pipe: Connection) -> None:
    """A process holding ``count`` WebSocket clients (the target of multiprocessing)."""
    os.nice(CLIENT_NICE)
    asyncio.run(_ws_clients(port, token, count, pipe))


async def _ws_clients(port: int, token: str, count: int, pipe: Connection) -> None:
    """Connect, say ready, count frames from "go" until every socket has seen the last seq
    the main process names (or the timeout it gives passes), then send back what was seen
    and the process's CPU and wall time at "go", at "paced" and at the end."""
    loop = asyncio.get_running_loop()
    sockets = [await open_ws(port, token) for _ in range(count)]
    pipe.send(len(sockets))
    await loop.run_in_executor(None, pipe.recv)  # go
    marks = [(time.process_time(), time.monotonic())]
    await loop.run_in_executor(None, pipe.recv)  # paced
    marks.append((time.process_time(), time.monotonic()))
    last_seq, timeout = await loop.run_in_executor(None, pipe.recv)
    for _ in range(int(timeout / 0.02)):  # every socket's counters, polled until caught up
        if not any(_behind(s, last_seq) for s in sockets):
            break
        await asyncio.sleep(0.02)
    marks.append((time.process_time(), time.monotonic()))
    for ws in sockets:
        ws.close()
    pipe.send(([ws.stats for ws in sockets], marks))


def _shares(marks: list[tuple[float, float]]) -> list[float]:
    """The share of a core used between each two marks ``(cpu, wall)``."""
    return [
        (cpu - cpu_before) / max(wall - wall_before, 1e-9)
        for (cpu_before, wall_before), (cpu, wall) in itertools.pairwise(marks)
    ]


def _behind(ws: WsCounter, last_seq: int) -> bool:
    return ws.stats.last_seq < last_seq and not ws.stats.closed_by_server


@dataclass
class Load:
    """What the agents, approvers and the approvers' feed share."""

    agents: list[str]
    approver: str
    port: int
    decided_sent: dict[str, float] = field(default_factory=dict)
    """When each request's decision was sent (``time.time()``)."""
    phase_of: dict[str, str] = field(default_factory=dict)
    """The phase each request was filed in."""
    wait_latency: dict[str, list[float]] = field(default_factory=dict)
    """Per phase, seconds from the decision's sending to its agent's ``wait`` returning."""
    phase: str = "baseline"
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
            self.decided_sent[request_id] = time.time()
            await http.call("POST", f"{API}/requests/{request_id}/decision", {"type": "approve"})

    async def agent(self, token: str, n: int, tickets: Tickets) -> None:
        """Run lifecycles while ``tickets`` has some left, each no sooner than its ticket says."""
        http = await Http.open(self.port, token)
        args: dict[str, Any] = {"command": f"job {n}"}
        body = {"session_id": f"s{n}", "tool_name": "shell", "tool_args": args}
        latencies = self.wait_latency.setdefault(self.phase, [])
        while (start_at := tickets.take()) is not None:
            if (delay := start_at - time.monotonic()) > 0:
                await asyncio.sleep(delay)
            request_id = (await http.call("POST", f"{API}/requests", body))["id"]
            self.phase_of[request_id] = self.phase
            waited = await http.call("GET", f"{API}/requests/{request_id}/wait?timeout=60")
            returned = time.time()
            feed = self.feed_socket.stats if self.feed_socket else None
            assert waited["status"] == "approved", (waited["status"], request_id, feed)
            latencies.append(returned - self.decided_sent[request_id])
            await http.call("POST", f"{API}/requests/{request_id}/claim", {"args": args})
            await http.call("POST", f"{API}/requests/{request_id}/result", {"ok": True})
            self.completed += 1
        http.close()

    async def lifecycles(self, phase: str, count: int, rate: float) -> float:
        """Run ``count`` lifecycles as ``phase``, started at ``rate`` a second in all (0: each
        agent's next as soon as its last ends); the seconds they took. Returns once the feed
        has seen each one's last event too."""
        self.phase = phase
        tickets = Tickets(count, rate, time.monotonic())
        agents = asyncio.gather(*(self.agent(t, n, tickets) for n, t in enumerate(self.agents)))
        running: list[asyncio.Future[Any]] = [agents, *self.approvers]
        await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        for task in self.approvers:
            if task.done():
                agents.cancel()
                task.result()  # approvers end only by failing: the error, not a stall
        await agents
        elapsed = time.monotonic() - tickets.began
        deadline = time.monotonic() + 60
        while self.completed_seen < self.completed:
            assert time.monotonic() < deadline, "the feed missed lifecycles' last events"
            await asyncio.sleep(0.01)
        return elapsed


@dataclass
class Tickets:
    """The lifecycles of a phase left to start, and when each may start."""

    left: int
    rate: float
    began: float
    taken: int = 0

    def take(self) -> float | None:
        """The next lifecycle's earliest start (``time.monotonic()``); None once all are taken."""
        if self.taken >= self.left:
            return None
        self.taken += 1
        if self.rate <= 0:
            return self.began
        return self.began + (self.taken - 1) / self.rate


def connect_clients(port: int, admin: str, opts: argparse.Namespace) -> list[Connection]:
    """Start the WebSocket client processes; the pipes to them."""
    context = multiprocessing.get_context("spawn")
    procs = min(opts.procs, opts.ws)
    pipes: list[Connection] = []
    for n in range(procs):
        ours, theirs = context.Pipe()
        count = opts.ws // procs + (1 if n < opts.ws % procs else 0)
        worker = context.Process(target=ws_clients, args=(port, admin, count, theirs), daemon=True)
        worker.start()
        pipes.append(ours)
    return pipes


@dataclass
class Phase:
    """One phase's own figures, measured around it."""

    name: str
    lifecycles: int
    elapsed: float
    events: int
    server_cpu: float
    server_wall: float


async def run_phase(load: Load, server: Served, name: str, count: int, rate: float) -> Phase:
    """Run one phase, measuring the server's CPU around it."""
    events, done = load.events_seen, load.completed
    cpu, wall = tree_cpu_seconds(server.pid), time.monotonic()
    elapsed = await load.lifecycles(name, count, rate)
    return Phase(
        name,
        load.completed - done,
        elapsed,
        load.events_seen - events,
        tree_cpu_seconds(server.pid) - cpu,
        time.monotonic() - wall,
    )


def report_phase(
    phase: Phase, load: Load, stats: list[WsStats], clients: int, base_cpu: float, rate: float
) -> None:
    """Print one phase's rate, latencies and server CPU."""
    pace = f"started at {rate:g}/s" if rate > 0 else "flat out"
    print(f"\n{phase.name}: {phase.lifecycles} lifecycles, {pace}")
    print(f"  lifecycles per second: {phase.lifecycles / phase.elapsed:.1f}")
    waits = load.wait_latency.get(phase.name, [])
    print(
        f"  decision -> agent's wait returns: p50 {pct(waits, 0.5):.1f} ms, "
        f"p99 {pct(waits, 0.99):.1f} ms ({len(waits)} samples)"
    )
    arrived: list[float] = []
    read: list[float] = []
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    for s in stats:
        for request_id, at, then in s.decided:
            if load.phase_of.get(request_id) == phase.name and request_id in load.decided_sent:
                latency = at - load.decided_sent[request_id]
                arrived.append(latency)
                read.append(then - load.decided_sent[request_id])
                first[request_id] = min(first.get(request_id, latency), latency)
                last[request_id] = max(last.get(request_id, latency), latency)
    print(
        f"  decision -> WebSocket delivery:   p50 {pct(arrived, 0.5):.1f} ms, "
        f"p99 {pct(arrived, 0.99):.1f} ms (all clients, {len(arrived)} samples; "
        f"as read by the client processes: p50 {pct(read, 0.5):.1f}, p99 {pct(read, 0.99):.1f})"
    )
    firsts, lasts = list(first.values()), list(last.values())
    print(
        f"  per decision, its first client's arrival p50 {pct(firsts, 0.5):.1f} / p99 "
        f"{pct(firsts, 0.99):.1f} ms, its last client's p50 {pct(lasts, 0.5):.1f} / p99 "
        f"{pct(lasts, 0.99):.1f} ms"
    )
    deliveries = phase.events * clients
    net = phase.server_cpu - phase.lifecycles * base_cpu
    print(
        f"  server CPU {phase.server_cpu:.2f} s over {phase.server_wall:.2f} s "
        f"({100 * phase.server_cpu / phase.server_wall:.0f}% of a core): "
        f"{1e6 * phase.server_cpu / max(deliveries, 1):.1f} ms per 1,000 deliveries; net of "
        f"the lifecycles' own cost (baseline) {1e6 * net / max(deliveries, 1):.1f} us per delivery"
    )


async def measure(server: Served, opts: argparse.Namespace) -> None:
    """The baseline, then the two phases with WebSocket clients; prints the figures."""
    port, admin = server.port, server.admin
    agents = [await make_token(port, admin, f"agent{n}", "agent") for n in range(opts.agents)]
    load = Load(agents, await make_token(port, admin, "approver", "approver"), port)
    load.feed_socket = await open_ws(port, admin, load.feed)
    load.start_approvers(opts.approvers)

    baseline = await run_phase(load, server, "baseline", opts.baseline, 0)
    base_cpu = baseline.server_cpu / max(baseline.lifecycles, 1)
    print(
        f"baseline, no WebSocket client but the approvers': {baseline.lifecycles} lifecycles, "
        f"{baseline.lifecycles / baseline.elapsed:.1f}/s, server CPU "
        f"{1000 * base_cpu:.2f} ms per lifecycle"
    )

    pipes = connect_clients(port, admin, opts)
    loop = asyncio.get_running_loop()
    connected = sum([await loop.run_in_executor(None, pipe.recv) for pipe in pipes])
    print(
        f"{connected} WebSocket clients connected from {len(pipes)} processes (nice {CLIENT_NICE})"
    )
    await asyncio.sleep(0.5)

    for pipe in pipes:
        pipe.send("go")
    events_before = load.events_seen
    marks = [(time.process_time(), time.monotonic())]
    flat_out = await run_phase(load, server, "flat out", opts.lifecycles, 0)
    marks.append((time.process_time(), time.monotonic()))
    for pipe in pipes:
        pipe.send("paced")
    paced = await run_phase(load, server, "paced", opts.lifecycles, opts.rate)
    phases = [flat_out, paced]
    for pipe in pipes:
        pipe.send((load.last_seq, 60.0))
    results = [await loop.run_in_executor(None, pipe.recv) for pipe in pipes]
    marks.append((time.process_time(), time.monotonic()))
    for task in load.approvers:
        task.cancel()

    stats: list[WsStats] = [s for socket_stats, _ in results for s in socket_stats]
    print(
        f"agents {opts.agents}, approvers {opts.approvers}, WebSocket clients {connected}, "
        f"lifecycles {sum(p.lifecycles for p in phases)}"
    )
    for phase, rate in zip(phases, (0, opts.rate), strict=True):
        report_phase(phase, load, stats, connected, base_cpu, rate)
    deliveries = sum(s.events for s in stats)
    expected = (load.events_seen - events_before) * connected
    print(
        f"\ndeliveries {deliveries} of {expected} (events x clients); "
        f"gaps {sum(s.gaps for s in stats)}, repeats {sum(s.repeats for s in stats)}, "
        f"closed by the server {sum(s.closed_by_server for s in stats)}"
    )
    own = _shares([marks[0], marks[-1]])[0]
    shares = [_shares([client[0], client[-1]])[0] for _, client in results]
    busiest = max([own, *shares])
    verdict = "PEGGED: the client may be the bottleneck" if busiest > PEGGED else "not pegged"
    print(
        f"client CPU: WebSocket processes {', '.join(f'{100 * s:.0f}%' for s in shares)} "
        f"of a core, agents+approvers process {100 * own:.0f}%: {verdict}"
    )
    # no process may be pegged and the machine still be full: then every process, the
    # server's clients included, waits for a core, and that wait is in the latencies
    cores = os.cpu_count() or 1
    by_phase = zip(_shares(marks), *(_shares(client) for _, client in results), strict=True)
    for phase, (own_share, *client_shares) in zip(phases, by_phase, strict=True):
        served = phase.server_cpu / phase.server_wall
        clients = own_share + sum(client_shares)
        busy = served + clients
        full = (
            "FULL: latencies include waiting for a core" if busy > SATURATED * cores else "not full"
        )
        print(
            f"the machine, {phase.name}: server {served:.2f} + clients {clients:.2f} = "
            f"{busy:.2f} of its {cores} cores busy: {full}"
        )


async def run(opts: argparse.Namespace) -> None:
    """Start the server, measure, stop it."""
    raise_open_files()
    connections = opts.ws + opts.agents + opts.approvers + 100
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(
            Path(tmp),
            "--max-connections",
            str(connections),
            "--sqlite-writer",
            opts.sqlite_writer,
        )
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
    parser.add_argument("--lifecycles", type=int, default=400, help="per phase")
    parser.add_argument(
        "--rate", type=float, default=60.0, help="the paced phase's lifecycles started a second"
    )
    parser.add_argument("--baseline", type=int, default=100, help="lifecycles without clients")
    parser.add_argument(
        "--sqlite-writer",
        choices=("thread", "process"),
        default="thread",
        help="the server's SQLite writer (a process's CPU counts as the server's)",
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
