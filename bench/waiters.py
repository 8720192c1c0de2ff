"""10,000 agents long-polling ``wait`` at once on one ``signoff serve``, then woken.

Starts ``signoff serve`` on a fresh SQLite file and files ``--waiters`` pending requests
(spread over ``--agents`` agent tokens). Then, from ``--procs`` client processes on raw
sockets, each request's agent opens ``GET /requests/{id}/wait?timeout=300`` on its own
connection, all at once. Prints the server's resident memory per idle waiter (RSS with them
all waiting minus before, over the count) and, with ``--ws`` idle WebSocket clients opened
as well, per idle WebSocket. The WebSockets close, and ``--deciders`` approvers approve
every request, one decision call each; for every waiter it prints p50 / p99 from its
decision's acknowledgement (and from its sending) until its ``wait`` returned.

    python bench/waiters.py [--waiters 10000] [--ws 1000] [--procs 4] [--deciders 16]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import multiprocessing
import re
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TypeVar

from serving import (
    API,
    HOST,
    Http,
    Served,
    WsCounter,
    cpu_seconds,
    make_token,
    open_ws,
    pct,
    raise_open_files,
    rss_bytes,
    start_server,
)

T = TypeVar("T")

_STATUS = re.compile(rb'"status": ?"(\w+)"')


class Waiter(asyncio.Protocol):
    """One agent's long poll on its own connection: sends ``wait`` and times the answer."""

    def __init__(self, request: bytes, done: list[tuple[int, float, bytes]], n: int) -> None:
        self._request = request
        self._done = done
        self._n = n
        self._buffer = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        transport.write(self._request)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", self._buffer[:end])
        if length is None or len(self._buffer) < end + 4 + int(length[1]):
            return
        status = _STATUS.search(self._buffer)
        self._done.append((self._n, time.monotonic(), status[1] if status else self._buffer[:12]))
        self._transport.close()


def waiters(port: int, polls: list[tuple[str, str]], rate: float, pipe: Connection) -> None:
    """A process holding one long poll per (request id, token) (multiprocessing's target)."""
    asyncio.run(_waiters(port, polls, rate, pipe))


async def _waiters(port: int, polls: list[tuple[str, str]], rate: float, pipe: Connection) -> None:
    """Open every poll (``rate`` a second, or all at once with 0), say so, then send back
    when each answered, once all did (or 120 s passed) and the main process asks."""
    loop = asyncio.get_running_loop()
    done: list[tuple[int, float, bytes]] = []
    began = loop.time()
    for n, (request_id, token) in enumerate(polls):
        if rate > 0 and (due := began + n / rate - loop.time()) > 0:
            await asyncio.sleep(due)
        request = (
            f"GET {API}/requests/{request_id}/wait?timeout=300 HTTP/1.1\r\nHost: {HOST}\r\n"
            f"Authorization: Bearer {token}\r\n\r\n"
        ).encode()
        await loop.create_connection(functools.partial(Waiter, request, done, n), HOST, port)
    pipe.send(len(polls))
    await loop.run_in_executor(None, pipe.recv)  # decisions are over
    for _ in range(6000):
        if len(done) == len(polls):
            break
        await asyncio.sleep(0.02)
    pipe.send([(polls[n][0], at, status.decode()) for n, at, status in done])


def ws_idle(port: int, token: str, count: int, pipe: Connection) -> None:
    """A process holding ``count`` idle WebSockets until told to close them."""
    asyncio.run(_ws_idle(port, token, count, pipe))


async def _ws_idle(port: int, token: str, count: int, pipe: Connection) -> None:
    loop = asyncio.get_running_loop()
    sockets: list[WsCounter] = [await open_ws(port, token) for _ in range(count)]
    pipe.send(len(sockets))
    await loop.run_in_executor(None, pipe.recv)
    for ws in sockets:
        ws.close()
    await asyncio.sleep(0.2)
    pipe.send(None)


async def settled(server: Served) -> int:
    """The server's RSS once it has been idle (under 2% of a core) for half a second."""
    for _ in range(120):
        cpu = cpu_seconds(server.pid)
        await asyncio.sleep(0.5)
        if cpu_seconds(server.pid) - cpu < 0.01:
            break
    return rss_bytes(server.pid)


def spread(items: list[T], parts: int) -> list[list[T]]:
    """``items`` dealt into ``parts`` lists."""
    return [items[n::parts] for n in range(parts)]


async def file_requests(port: int, tokens: list[str], count: int) -> list[tuple[str, str]]:
    """``count`` pending requests, filed over one connection per token; (id, its token)."""

    async def agent(token: str, n: int, share: int) -> list[tuple[str, str]]:
        http = await Http.open(port, token)
        body = {"session_id": f"s{n}", "tool_name": "shell", "tool_args": {"command": "x"}}
        made = [
            ((await http.call("POST", f"{API}/requests", body))["id"], token) for _ in range(share)
        ]
        http.close()
        return made

    shares = [len(part) for part in spread(list(range(count)), len(tokens))]
    filed = await asyncio.gather(*(agent(tokens[n], n, share) for n, share in enumerate(shares)))
    return [made for part in filed for made in part]


async def decide(port: int, token: str, ids: list[str]) -> dict[str, tuple[float, float]]:
    """Approve ``ids`` one call each on one connection: (sent, acknowledged) per id."""
    http = await Http.open(port, token)
    times: dict[str, tuple[float, float]] = {}
    for request_id in ids:
        sent = time.monotonic()
        await http.call("POST", f"{API}/requests/{request_id}/decision", {"type": "approve"})
        times[request_id] = (sent, time.monotonic())
    http.close()
    return times


async def measure(server: Served, opts: argparse.Namespace) -> None:
    """File, hold, measure memory, decide, measure wake-ups."""
    port, admin = server.port, server.admin
    tokens = [await make_token(port, admin, f"agent{n}", "agent") for n in range(opts.agents)]
    approver = await make_token(port, admin, "approver", "approver")
    began = time.monotonic()
    polls = await file_requests(port, tokens, opts.waiters)
    print(f"{len(polls)} pending requests filed in {time.monotonic() - began:.1f} s")

    context = multiprocessing.get_context("spawn")
    loop = asyncio.get_running_loop()
    before = await settled(server)
    wait_pipes: list[Connection] = []
    for part in spread(polls, opts.procs):
        ours, theirs = context.Pipe()
        rate = opts.rate / opts.procs
        context.Process(target=waiters, args=(port, part, rate, theirs), daemon=True).start()
        wait_pipes.append(ours)
    held = sum([await loop.run_in_executor(None, pipe.recv) for pipe in wait_pipes])
    waiting = await settled(server)
    per_waiter = (waiting - before) / held
    print(
        f"{held} long polls waiting from {opts.procs} processes: server RSS "
        f"{before / 2**20:.1f} MB before, {waiting / 2**20:.1f} MB with them: "
        f"{per_waiter / 1024:.1f} KB per idle waiter"
    )

    ws_pipes: list[Connection] = []
    if opts.ws:
        for count in (len(part) for part in spread(list(range(opts.ws)), opts.procs)):
            ours, theirs = context.Pipe()
            context.Process(target=ws_idle, args=(port, admin, count, theirs), daemon=True).start()
            ws_pipes.append(ours)
        opened = sum([await loop.run_in_executor(None, pipe.recv) for pipe in ws_pipes])
        with_ws = await settled(server)
        print(
            f"{opened} idle WebSockets as well: server RSS {with_ws / 2**20:.1f} MB: "
            f"{(with_ws - waiting) / opened / 1024:.1f} KB per idle WebSocket"
        )
        for pipe in ws_pipes:
            pipe.send("close")
        for pipe in ws_pipes:
            await loop.run_in_executor(None, pipe.recv)

    cpu, began = cpu_seconds(server.pid), time.monotonic()
    ids = [request_id for request_id, _ in polls]
    decided: dict[str, tuple[float, float]] = {}
    for times in await asyncio.gather(
        *(decide(port, approver, part) for part in spread(ids, opts.deciders))
    ):
        decided.update(times)
    elapsed = time.monotonic() - began
    for pipe in wait_pipes:
        pipe.send("decided")
    woken = [w for pipe in wait_pipes for w in await loop.run_in_executor(None, pipe.recv)]
    cpu = cpu_seconds(server.pid) - cpu
    approved = sum(1 for _, _, status in woken if status == "approved")
    after_ack = [at - decided[request_id][1] for request_id, at, _ in woken]
    after_sent = [at - decided[request_id][0] for request_id, at, _ in woken]
    print(
        f"{len(decided)} decisions by {opts.deciders} approvers in {elapsed:.1f} s "
        f"({len(decided) / elapsed:.0f}/s; server CPU {1000 * cpu / len(decided):.2f} ms each)"
    )
    print(
        f"woken: {len(woken)} of {held} waits returned, {approved} approved; "
        f"after its decision was acknowledged p50 {pct(after_ack, 0.5):.1f} ms, "
        f"p99 {pct(after_ack, 0.99):.1f} ms, max {pct(after_ack, 1.0):.1f} ms; "
        f"after it was sent p50 {pct(after_sent, 0.5):.1f} ms, p99 {pct(after_sent, 0.99):.1f} ms"
    )


async def run(opts: argparse.Namespace) -> None:
    """Start the server, measure, stop it."""
    raise_open_files()
    connections = opts.waiters + opts.ws + opts.agents + opts.deciders + 100
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp), "--max-connections", str(connections))
        try:
            await measure(server, opts)
        finally:
            server.stop()


def main() -> None:
    """Parse options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiters", type=int, default=10_000)
    parser.add_argument("--ws", type=int, default=1000, help="idle WebSocket clients")
    parser.add_argument("--procs", type=int, default=4, help="client processes")
    parser.add_argument("--agents", type=int, default=20, help="agent tokens filing requests")
    parser.add_argument("--deciders", type=int, default=16)
    parser.add_argument(
        "--rate",
        type=float,
        default=0,
        help="long polls opened a second, over all processes (0: all at once)",
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
