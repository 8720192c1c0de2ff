"""Does it scale out: lifecycles per second with 1, 2 and 3 servers on one PostgreSQL.

For each count, starts that many real ``signoff serve`` processes on a fresh database and
runs ``--agents`` HTTP agents spread round-robin over them, each looping: submit, a person
approves (on another node), long-poll ``wait``, claim, report. Prints lifecycles per second
and the ratio to one server, measured in the same run, and the CPU time the servers (all
of them together, from /proc) spent per lifecycle. On a 2-core machine the servers,
PostgreSQL and this client share the cores, which bounds what more servers can add.

    python bench/nodes_pg.py [--lifecycles 300] [--agents 24] [--servers 1,2,3] [--dsn URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_pg import DEFAULT_DSN, drop_database, fresh_database
from tests.serving import Server, bearer, free_port, start_server

API = "/api/v1"


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(servers: list[Server], lifecycles: int, agents: int) -> tuple[float, float]:
    """Lifecycles per second over these servers, and their CPU milliseconds per lifecycle."""
    admin = servers[0].admin_token
    assert admin is not None
    async with httpx.AsyncClient(base_url=servers[0].base, headers=bearer(admin)) as http:
        made = await http.post(f"{API}/tokens", json={"name": "bench-agent", "role": "agent"})
        agent = made.json()["token"]
        made = await http.post(f"{API}/tokens", json={"name": "bench-person", "role": "approver"})
        person = made.json()["token"]
    clients = [httpx.AsyncClient(base_url=s.base, timeout=120) for s in servers]
    done = 0

    async def loop(n: int) -> None:
        nonlocal done
        mine, other = clients[n % len(clients)], clients[(n + 1) % len(clients)]
        while done < lifecycles:
            args = {"command": f"job {n}"}
            created = await mine.post(
                f"{API}/requests",
                json={"session_id": f"s{n}", "tool_name": "shell", "tool_args": args},
                headers=bearer(agent),
            )
            request_id = created.json()["id"]
            waiting = asyncio.create_task(
                mine.get(f"{API}/requests/{request_id}/wait?timeout=60", headers=bearer(agent))
            )
            await other.post(
                f"{API}/requests/{request_id}/decision",
                json={"type": "approve"},
                headers=bearer(person),
            )
            assert (await waiting).json()["status"] == "approved"
            await mine.post(
                f"{API}/requests/{request_id}/claim", json={"args": args}, headers=bearer(agent)
            )
            await mine.post(
                f"{API}/requests/{request_id}/result", json={"ok": True}, headers=bearer(agent)
            )
            done += 1

    cpu = sum(cpu_seconds(s.process.pid) for s in servers)
    start = time.perf_counter()
    await asyncio.gather(*(loop(n) for n in range(agents)))
    elapsed = time.perf_counter() - start
    cpu = sum(cpu_seconds(s.process.pid) for s in servers) - cpu
    for client in clients:
        await client.aclose()
    return done / elapsed, cpu * 1000 / done


async def run(opts: argparse.Namespace) -> None:
    """Measure each count of servers and print the figures with their ratios."""
    figures: dict[int, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_CONFIG_HOME": tmp}
        for count in opts.servers:
            url = await fresh_database(opts.dsn)
            servers: list[Server] = []
            try:
                servers = [start_server(url, free_port(), env) for _ in range(count)]
                figures[count] = await measure(servers, opts.lifecycles, opts.agents)
            finally:
                for server in servers:
                    server.stop()
                await drop_database(opts.dsn, url)
    base = figures[min(figures)][0]
    for count, (rate, cpu) in figures.items():
        print(
            f"{count} server(s) on one PostgreSQL: {rate:7.1f} lifecycles/s"
            f"  ratio to {min(figures)} server(s) {rate / base:.2f}"
            f"  servers' CPU {cpu:5.1f} ms/lifecycle"
        )


def main() -> None:
    """Parse options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lifecycles", type=int, default=300)
    parser.add_argument("--agents", type=int, default=24)
    parser.add_argument(
        "--servers",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1, 2, 3],
        help="the counts of servers to measure, in order (default 1,2,3)",
    )
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
