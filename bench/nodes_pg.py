"""Does it scale out: lifecycles per second with 1, 2 and 3 servers on one PostgreSQL.

For each count, starts that many real ``signoff serve`` processes on a fresh database, as
docs/deployment.md says to run them: the first sends webhooks and notifications, the others
run with ``--no-webhooks`` (else every event would be delivered once per server), each
with its default pool of connections (``--db-pool N`` starts each with ``--db-pool N``). It runs
``--agents`` HTTP agents spread round-robin over them, each looping: submit, a person
approves (on another node), long-poll ``wait``, claim, report. The agents are raw
keep-alive HTTP connections (bench/serving.py's ``Http``), so that the client takes as
little of the machine as it can. Prints lifecycles per second and the ratio to one server,
measured in the same run; the CPU time the servers (all of them together, from /proc) spent
per lifecycle, and PostgreSQL's (every ``postgres`` process on this machine); and how busy
the machine's cores were (from /proc/stat), since on a 2-core machine the servers,
PostgreSQL and this client share them, which bounds what more servers can add.

``--ceiling`` also runs each count above one with every server on its own database, the
agents' lifecycles each staying on one server: the same work with nothing shared and
nothing to follow, so what that many processes reach on this machine at all. Then it runs
that count on one database with every agent on the first server and the others only
following it: their CPU, and PostgreSQL's beyond one server's (it sends each NOTIFY to
every listener), is what following costs.

Every layout runs ``--rounds`` times (default 3), in turns, the order rotating each round,
and each line pools its runs: all their lifecycles over all their time, each cost per
lifecycle over all their lifecycles. The ratio is the pooled rate's over the first
count's; with more than one round the line also gives each round's ratio to that round's
run of the first count. On a host whose speed drifts (one seen here took 0.16 to 0.38 s of
CPU for the same loop, seconds apart), one run of each in a row measures the drift as much
as the servers.

    python bench/nodes_pg.py [--lifecycles 300] [--agents 24] [--servers 1,2,3] [--db-pool N]
                             [--ceiling] [--rounds 3] [--dsn URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_pg import DEFAULT_DSN, drop_database, fresh_database
from tests.serving import Server, free_port, start_server

from serving import Http, cpu_seconds, make_token

API = "/api/v1"


def machine_busy() -> tuple[float, float]:
    """The machine's busy and total CPU time so far (all cores, from /proc/stat), seconds."""
    fields = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    ticks = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - idle) / ticks, sum(fields) / ticks


def database_cpu() -> float:
    """The CPU time every PostgreSQL process on this machine has used so far (those alive
    now: a backend that exited meanwhile is not counted)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() in ("postgres", "postmaster"):
                total += cpu_seconds(int(entry.name))
        except (OSError, ValueError):
            continue  # it exited meanwhile
    return total


@dataclass
class Figures:
    """One count of servers' figures."""

    pool: int | None
    """Each server's ``--db-pool`` (None: its default)."""
    rate: float
    """Lifecycles per second."""
    servers_cpu: float
    """The servers' CPU milliseconds per lifecycle."""
    busy: float
    """The share of the machine's cores in use while it ran."""
    client_cpu: float
    """This process's (the agents') CPU milliseconds per lifecycle."""
    database_cpu: float
    """PostgreSQL's processes' CPU milliseconds per lifecycle (it runs on this machine)."""
    done: int
    """How many lifecycles ran (the agents finish the ones they started: a few more than
    asked)."""
    followers_cpu: float = 0.0
    """The servers that only followed (``--ceiling``'s third run): their CPU milliseconds
    per lifecycle, all of them together."""
    deadlocks: int = 0
    """The deadlocks PostgreSQL found in the run's databases (each breaks one by failing a
    write, or sending a group of writes again one by one): none is due."""


async def measure(
    servers: list[Server],
    lifecycles: int,
    agents: int,
    pool: int | None = None,
    *,
    shared: bool = True,
) -> Figures:
    """Lifecycles per second over these servers, and what they cost.

    ``shared``: the servers share one database, and a person approves on another server
    than the agent's. Otherwise each server has its own database (the ceiling: nothing is
    shared or followed) and an agent's whole lifecycle stays on its server.
    """
    port = [s.port for s in servers]
    made = servers[:1] if shared else servers
    agent: list[str] = []
    person: list[str] = []
    for server, server_port in zip(made, port, strict=False):
        assert server.admin_token is not None
        agent.append(await make_token(server_port, server.admin_token, "bench-agent", "agent"))
        person.append(await make_token(server_port, server.admin_token, "bench-person", "approver"))
    done = 0

    async def loop(n: int) -> None:
        nonlocal done
        here = n % len(port)
        there = (n + 1) % len(port) if shared else here
        mine = await Http.open(port[here], agent[here % len(agent)])
        waiter = await Http.open(port[here], agent[here % len(agent)])
        other = await Http.open(port[there], person[there % len(person)])
        args = {"command": f"job {n}"}
        body = {"session_id": f"s{n}", "tool_name": "shell", "tool_args": args}
        while done < lifecycles:
            request_id = (await mine.call("POST", f"{API}/requests", body))["id"]
            waiting = asyncio.create_task(
                waiter.call("GET", f"{API}/requests/{request_id}/wait?timeout=60")
            )
            await other.call("POST", f"{API}/requests/{request_id}/decision", {"type": "approve"})
            assert (await waiting)["status"] == "approved"
            await mine.call("POST", f"{API}/requests/{request_id}/claim", {"args": args})
            await mine.call("POST", f"{API}/requests/{request_id}/result", {"ok": True})
            done += 1
        for http in (mine, waiter, other):
            http.close()

    cpu = sum(cpu_seconds(s.process.pid) for s in servers)
    database = database_cpu()
    busy, total = machine_busy()
    own = time.process_time()
    start = time.perf_counter()
    await asyncio.gather(*(loop(n) for n in range(agents)))
    elapsed = time.perf_counter() - start
    cpu = sum(cpu_seconds(s.process.pid) for s in servers) - cpu
    database = database_cpu() - database
    own = time.process_time() - own
    busy_after, total_after = machine_busy()
    return Figures(
        pool,
        done / elapsed,
        cpu * 1000 / done,
        (busy_after - busy) / max(total_after - total, 1e-9),
        own * 1000 / done,
        database * 1000 / done,
        done,
    )


How = Literal["shared", "apart", "following"]
"""How :func:`one_count` lays servers out over databases and agents over servers."""


async def one_count(
    opts: argparse.Namespace, env: dict[str, str], count: int, *, how: How = "shared"
) -> Figures:
    """Start ``count`` servers and measure them, then stop them and drop their databases.

    ``how``: "shared", one database, agents spread over the servers; "apart", each server
    on its own database, each agent on one server; "following", one database, every agent
    on the first server, the others only following it.
    """
    urls = [await fresh_database(opts.dsn) for _ in range(count if how == "apart" else 1)]
    servers: list[Server] = []
    pool = ("--db-pool", str(opts.db_pool)) if opts.db_pool else ()
    try:
        for n in range(count):  # docs/deployment.md: one node sends webhooks
            extra = (*pool, *(("--no-webhooks",) if n and how != "apart" else ()))
            servers.append(start_server(urls[n % len(urls)], free_port(), env, *extra))
        working = servers[:1] if how == "following" else servers
        followers = servers[len(working) :]
        before = sum(cpu_seconds(s.process.pid) for s in followers)
        figures = await measure(
            working, opts.lifecycles, opts.agents, opts.db_pool, shared=how != "apart"
        )
        followed = sum(cpu_seconds(s.process.pid) for s in followers) - before
        for server in servers:
            server.stop()  # their backends end, and report their counts as they do
        await asyncio.sleep(0.5)
        found = sum([await deadlocks(url) for url in urls])
        return replace(figures, followers_cpu=followed * 1000 / figures.done, deadlocks=found)
    finally:
        for server in servers:
            server.stop()
        for url in urls:
            await drop_database(opts.dsn, url)


async def deadlocks(url: str) -> int:
    """The deadlocks PostgreSQL has found in this database."""
    db = await asyncpg.connect(url)
    try:
        found: int = await db.fetchval(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        )
    finally:
        await db.close()
    return found


Config = tuple[How, int]
"""One layout measured: how the servers are laid out, and how many."""

WHERE: dict[How, str] = {
    "shared": "on one PostgreSQL",
    "apart": "each on its own database",
    "following": "on one PostgreSQL, the first taking every agent, {followers} following it",
}


def configs(opts: argparse.Namespace) -> list[Config]:
    """What one round measures, in its first order: each count of servers, and with
    ``--ceiling`` each count above one apart and following too."""
    out: list[Config] = []
    for count in opts.servers:
        out.append(("shared", count))
        if opts.ceiling and count > 1:
            out += [("apart", count), ("following", count)]
    return out


def pooled(runs: list[Figures]) -> Figures:
    """Several runs of one layout as one: every lifecycle over all their time, and each
    cost per lifecycle over all their lifecycles."""
    done = sum(f.done for f in runs)
    seconds = [f.done / f.rate for f in runs]

    def per(field: str) -> float:
        return sum(float(getattr(f, field)) * f.done for f in runs) / done

    return Figures(
        runs[0].pool,
        done / sum(seconds),
        per("servers_cpu"),
        sum(f.busy * t for f, t in zip(runs, seconds, strict=True)) / sum(seconds),
        per("client_cpu"),
        per("database_cpu"),
        done,
        per("followers_cpu"),
        sum(f.deadlocks for f in runs),
    )


async def run(opts: argparse.Namespace) -> None:
    """Measure each layout in turns, ``--rounds`` times, and print the figures with their
    ratios to the first count of servers on one database."""
    order = configs(opts)
    runs: dict[Config, list[Figures]] = {config: [] for config in order}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_CONFIG_HOME": tmp}
        for k in range(opts.rounds):
            shift = k % len(order)
            for how, count in order[shift:] + order[:shift]:
                runs[how, count].append(await one_count(opts, env, count, how=how))
    first = min(opts.servers)
    base_config: Config = ("shared", first)
    base = pooled(runs[base_config]).rate
    print(
        f"{opts.rounds} round(s) in turns, {opts.lifecycles} lifecycles each, "
        f"{opts.agents} agents; ratios to {first} server(s) on one PostgreSQL"
    )
    for how, count in order:
        f = pooled(runs[how, count])
        rounds = sorted(
            r.rate / b.rate for r, b in zip(runs[how, count], runs[base_config], strict=True)
        )
        middle = statistics.median(rounds)
        each = (
            f" (each round {rounds[0]:.2f}-{rounds[-1]:.2f}, median {middle:.2f})"
            if opts.rounds > 1 and (how, count) != base_config
            else ""
        )
        print(
            f"{count} server(s) {WHERE[how].format(followers=count - 1)}"
            + (f" (--db-pool {f.pool} each)" if f.pool else "")
            + f": {f.rate:7.1f} lifecycles/s"
            f"  ratio to {first} server(s) {f.rate / base:.2f}{each}"
            f"  servers' CPU {f.servers_cpu:5.1f} ms/lifecycle"
            + (f" (+ followers' {f.followers_cpu:4.2f})" if f.followers_cpu else "")
            + f"  PostgreSQL's CPU {f.database_cpu:4.1f} ms/lifecycle"
            f"  agents' CPU {f.client_cpu:4.1f} ms/lifecycle"
            f"  machine busy {100 * f.busy:3.0f}% of its cores"
            f"  deadlocks {f.deadlocks}"
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
    parser.add_argument(
        "--db-pool",
        type=int,
        default=None,
        help="start each server with --db-pool N (default: the servers' default pool)",
    )
    parser.add_argument(
        "--ceiling",
        action="store_true",
        help="also run each count above one with every server on its own database (the same "
        "lifecycles with nothing shared or followed: what that many processes reach on this "
        "machine at all), and with one server taking every agent while the others only "
        "follow it (what following costs)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="measure every layout this many times, in turns, the order rotating each round "
        "(default 3): on a host whose speed drifts, each layout gets its share of the slow "
        "and the quick spells",
    )
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    opts = parser.parse_args()
    if opts.rounds < 1 or min(opts.servers) < 1:
        parser.error("--rounds and every count of --servers must be at least 1")
    asyncio.run(run(opts))


if __name__ == "__main__":
    main()
