"""Conversations over AG-UI on a real ``signoff serve``, against the same ones through the JSON API.

Starts ``signoff serve --agent demo=signoff.chat.hosted:agent`` (the scripted demo model, no
LLM) on a fresh SQLite file, its files in a temporary ``$SIGNOFF_WORKSPACE``, under a policy
that asks a person about ``write_file``. One client, one thing at a time:

1. **Round trip.** Per conversation K, over AG-UI: POST a ``RunAgentInput`` saying "create
   notes-K.md saying hello" and read its stream until the ``RUN_FINISHED`` interrupt; then
   POST the resume (``{"type": "approve"}`` for the interrupt) and time its ``RUN_STARTED``
   and its ``RUN_FINISHED`` success. Through the JSON API, in the same round: POST
   ``{"prompt"}`` (201, Paused), then ``POST /resume/{request_id}?action=approve``
   (Completed). Prints p50 / p99 of each step and the ratio AG-UI/JSON per step.
2. **A decision made elsewhere.** A follower reads ``GET /tasks/{id}/stream`` of a paused
   conversation started by alice; 50 ms after it has read the first run, the admin decides
   through ``POST /requests/{id}/decision``; time from that POST until the follower reads the
   resumed run's ``RUN_STARTED``.
3. **Replay.** ``GET /tasks/{id}/stream`` of every finished conversation of 1, read whole:
   events and bytes per conversation, replays per second; then again with
   ``Last-Event-ID`` set to the id of its middle event.
4. **The server's CPU.** The server process's user+system time (``/proc/PID/stat``, all its
   threads) over each step above, per conversation or per replay.

    python bench/chat_stream.py [--conversations 100] [--warmup 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

API = "/api/v1"
AGENT = "demo"
POLICY = '[tools]\nneed_approval = ["write_file"]\n'
"""People decide file writes, the only calls these conversations make."""
TICK = os.sysconf("SC_CLK_TCK")

T = TypeVar("T")


def pct(samples: list[float], q: float) -> float:
    """The q-quantile of samples (seconds), in milliseconds."""
    ordered = sorted(samples)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Serve:
    """A running ``signoff serve`` hosting the demo agent."""

    process: subprocess.Popen[bytes]
    base: str
    admin: str

    def cpu(self) -> float:
        """The server process's user+system CPU seconds so far (all its threads)."""
        stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def stop(self) -> None:
        """Stop the server and wait for it."""
        self.process.terminate()
        self.process.wait(timeout=20)


def start(home: Path) -> Serve:
    """``signoff serve --agent demo=...`` on ``home/serve.db``, ``home`` its config home and
    working directory (so ``POLICY`` is its only policy), ``home/workspace`` its agent's files;
    its output goes to files in ``home`` (a pipe nobody reads would block it)."""
    workspace = home / "workspace"
    workspace.mkdir()
    (home / ".signoff").mkdir()
    (home / ".signoff" / "tools.toml").write_text(POLICY)
    env = {**os.environ, "XDG_CONFIG_HOME": str(home), "SIGNOFF_WORKSPACE": str(workspace)}
    port = free_port()
    command = [sys.executable, "-m", "signoff", "serve", "--port", str(port)]
    command += ["--db", f"sqlite:///{home / 'serve.db'}"]
    command += ["--agent", f"{AGENT}=signoff.chat.hosted:agent"]
    out, err = home / "serve.out", home / "serve.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(  # noqa: S603 - this interpreter running signoff, our own arguments
            command, stdout=stdout, stderr=stderr, env=env, cwd=home
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"serve exited: {err.read_text()}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.1)
    else:
        process.kill()
        raise SystemExit("serve did not come up")
    while time.monotonic() < deadline:
        for line in out.read_text().splitlines():
            if line.startswith("admin token: "):
                return Serve(process, base, line.split(": ", 1)[1].strip())
        time.sleep(0.05)
    process.kill()
    raise SystemExit(f"no admin token in serve's output: {out.read_text()}")


@dataclass(frozen=True)
class Frame:
    """One AG-UI event as it arrived."""

    at: float
    """``time.perf_counter()`` when its blank line was read."""
    id: str | None
    data: dict[str, Any]

    @property
    def type(self) -> str:
        """The AG-UI event type."""
        kind: str = self.data["type"]
        return kind


async def frames(response: httpx.Response) -> AsyncGenerator[Frame]:
    """The events of an SSE answer, each timed as it arrives."""
    if response.status_code not in (200, 201, 202):
        raise SystemExit(f"{response.status_code}: {(await response.aread()).decode()}")
    event_id: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line == "" and data:
            yield Frame(time.perf_counter(), event_id, json.loads("\n".join(data)))
            event_id, data = None, []


def ends_run(frame: Frame) -> bool:
    """Whether ``frame`` ends a run."""
    return frame.type in ("RUN_FINISHED", "RUN_ERROR")


def outcome(frame: Frame) -> str:
    """How a run ended: "interrupt", "success", ... or "error"."""
    if frame.type == "RUN_ERROR":
        return f"error: {frame.data.get('message')}"
    kind: str = (frame.data.get("outcome") or {}).get("type", "?")
    return kind


def run_input(thread: str, text: str | None, resume: list[dict[str, Any]] | None = None) -> Any:
    """An AG-UI ``RunAgentInput``."""
    messages = [{"id": f"m-{thread}", "role": "user", "content": text}] if text else []
    body: dict[str, Any] = {"threadId": thread, "runId": f"run-{os.urandom(4).hex()}"}
    body["messages"] = messages
    if resume is not None:
        body["resume"] = resume
    return body


async def one_run(http: httpx.AsyncClient, body: Any) -> list[Frame]:
    """POST a run and read its stream until the run ends."""
    got: list[Frame] = []
    async with http.stream("POST", f"{API}/agents/{AGENT}/runs", json=body) as response:
        async for frame in frames(response):
            got.append(frame)
            if ends_run(frame):
                break
    return got


@dataclass
class Steps:
    """Seconds per step, per conversation, and the server's CPU seconds over them."""

    times: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    count: dict[str, int] = field(default_factory=dict)

    def add(self, step: str, seconds: float) -> None:
        """One sample of ``step``."""
        self.times.setdefault(step, []).append(seconds)

    async def charged(self, serve: Serve, what: str, work: Awaitable[T]) -> T:
        """``work`` awaited (not started before), its server CPU time charged to ``what``."""
        before = serve.cpu()
        result = await work
        self.cpu[what] = self.cpu.get(what, 0.0) + serve.cpu() - before
        self.count[what] = self.count.get(what, 0) + 1
        return result

    def cpu_ms(self, what: str) -> float:
        """Mean server CPU milliseconds per ``what``."""
        return 1000 * self.cpu[what] / self.count[what]


async def agui_conversation(http: httpx.AsyncClient, k: int, steps: Steps | None) -> str:
    """Conversation K over AG-UI: pause, resume with an approval. Its thread id."""
    thread = f"agui-{k}"
    sent = time.perf_counter()
    first = await one_run(http, run_input(thread, f"create notes-{k}.md saying hello"))
    if outcome(first[-1]) != "interrupt":
        raise SystemExit(f"{thread}: first run ended {outcome(first[-1])}")
    (interrupt,) = first[-1].data["outcome"]["interrupts"]
    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"type": "approve"}}
    resumed = time.perf_counter()
    second = await one_run(http, run_input(thread, None, [entry]))
    if second[0].type != "RUN_STARTED" or outcome(second[-1]) != "success":
        raise SystemExit(f"{thread}: resumed run {second[0].type} ... {outcome(second[-1])}")
    if steps is not None:
        steps.add("agui pause", first[-1].at - sent)
        steps.add("agui resume started", second[0].at - resumed)
        steps.add("agui resume", second[-1].at - resumed)
    return thread


async def json_conversation(http: httpx.AsyncClient, k: int, steps: Steps | None) -> None:
    """Conversation K through the JSON API: 201 Paused, then resume to Completed."""
    sent = time.perf_counter()
    paused = await http.post(
        f"{API}/agents/{AGENT}/runs", json={"prompt": f"create json-{k}.md saying hello"}
    )
    answered = time.perf_counter()
    if paused.status_code != 201 or paused.json()["status"] != "Paused":
        raise SystemExit(f"json run {k}: {paused.status_code} {paused.text}")
    request_id = paused.json()["request_id"]
    resumed = time.perf_counter()
    done = await http.post(f"{API}/resume/{request_id}", params={"action": "approve"})
    finished = time.perf_counter()
    if done.status_code != 200 or done.json()["status"] != "Completed":
        raise SystemExit(f"json resume {k}: {done.status_code} {done.text}")
    if steps is not None:
        steps.add("json pause", answered - sent)
        steps.add("json resume", finished - resumed)


async def decided_elsewhere(
    http: httpx.AsyncClient, decider: httpx.AsyncClient, k: int, steps: Steps
) -> None:
    """A follower of paused conversation K sees the run go on once someone else decides."""
    thread = f"follow-{k}"
    first = await one_run(http, run_input(thread, f"create follow-{k}.md saying hello"))
    (interrupt,) = first[-1].data["outcome"]["interrupts"]
    async with http.stream("GET", f"{API}/tasks/{thread}/stream") as response:
        stream = frames(response)
        async for frame in stream:
            if ends_run(frame):
                break
        # The follower has the stored run; let it settle into waiting for the live one.
        await asyncio.sleep(0.05)
        decided = time.perf_counter()
        answer = await decider.post(
            f"{API}/requests/{interrupt['id']}/decision", json={"type": "approve"}
        )
        if answer.status_code != 200:
            raise SystemExit(f"{thread}: decision {answer.status_code} {answer.text}")
        started: float | None = None
        async for frame in stream:
            if frame.type == "RUN_STARTED" and started is None:
                started = frame.at
            if ends_run(frame):
                if outcome(frame) != "success":
                    raise SystemExit(f"{thread}: resumed run ended {outcome(frame)}")
                break
        await stream.aclose()
    if started is None:
        raise SystemExit(f"{thread}: the follower never saw the run go on")
    steps.add("follower sees the run go on", started - decided)


async def replay(http: httpx.AsyncClient, thread: str, after: str | None = None) -> bytes:
    """The whole stream of a finished conversation (after ``after``), as sent."""
    headers = {"Last-Event-ID": after} if after is not None else {}
    async with http.stream("GET", f"{API}/tasks/{thread}/stream", headers=headers) as response:
        if response.status_code != 200:
            raise SystemExit(f"replay {thread}: {response.status_code}")
        return b"".join([chunk async for chunk in response.aiter_bytes()])


def event_ids(body: bytes) -> list[str]:
    """The ``id:`` of every event of an SSE body."""
    return [line[3:].strip().decode() for line in body.splitlines() if line.startswith(b"id:")]


def line(label: str, samples: list[float], baseline: list[float] | None = None) -> str:
    """One figure: p50 / p99, and the ratio to ``baseline``'s when given."""
    text = f"{label:<54} p50 {pct(samples, 0.5):7.1f} ms  p99 {pct(samples, 0.99):7.1f} ms"
    if baseline is not None:
        text += (
            f"  AG-UI/JSON p50 {pct(samples, 0.5) / pct(baseline, 0.5):.2f}"
            f" p99 {pct(samples, 0.99) / pct(baseline, 0.99):.2f}"
        )
    return text


async def measure(serve: Serve, opts: argparse.Namespace) -> None:
    """Every figure, printed as it is known."""
    auth = {"Authorization": f"Bearer {serve.admin}"}
    async with httpx.AsyncClient(base_url=serve.base, headers=auth, timeout=60) as admin:
        made = await admin.post(f"{API}/tokens", json={"name": "alice", "role": "approver"})
        made.raise_for_status()
        alice_auth = {"Authorization": f"Bearer {made.json()['token']}"}
    async with (
        httpx.AsyncClient(base_url=serve.base, headers=alice_auth, timeout=60) as http,
        httpx.AsyncClient(base_url=serve.base, headers=auth, timeout=60) as decider,
    ):
        for k in range(opts.warmup):
            await agui_conversation(http, -1 - k, None)
            await json_conversation(http, -1 - k, None)

        steps = Steps()
        threads: list[str] = []
        began = time.perf_counter()
        for k in range(opts.conversations):
            threads.append(await steps.charged(serve, "agui", agui_conversation(http, k, steps)))
            await steps.charged(serve, "json", json_conversation(http, k, steps))
        print(
            f"1. round trip: {opts.conversations} conversations each way, one at a time, "
            f"taking turns ({time.perf_counter() - began:.1f} s)"
        )
        times = steps.times
        print(
            line("AG-UI POST -> RUN_FINISHED interrupt", times["agui pause"], times["json pause"])
        )
        print(line("JSON  POST {prompt} -> 201 Paused", times["json pause"]))
        print(line("AG-UI resume POST -> RUN_STARTED", times["agui resume started"]))
        print(
            line(
                "AG-UI resume POST -> RUN_FINISHED success",
                times["agui resume"],
                times["json resume"],
            )
        )
        print(line("JSON  POST /resume?action=approve -> Completed", times["json resume"]))

        for k in range(opts.conversations):
            await steps.charged(serve, "follow", decided_elsewhere(http, decider, k, steps))
        print(
            f"2. decision elsewhere: {opts.conversations} paused conversations, one follower each"
        )
        print(
            line(
                "POST /requests/{id}/decision -> follower's RUN_STARTED",
                steps.times["follower sees the run go on"],
            )
        )

        bodies = [await replay(http, thread) for thread in threads]
        middles = [event_ids(body)[len(event_ids(body)) // 2] for body in bodies]
        began = time.perf_counter()
        for thread in threads:
            await steps.charged(serve, "replay", replay(http, thread))
        whole = time.perf_counter() - began
        began = time.perf_counter()
        rests = [
            await steps.charged(serve, "rest", replay(http, thread, middle))
            for thread, middle in zip(threads, middles, strict=True)
        ]
        rest = time.perf_counter() - began
        events = [len(event_ids(body)) for body in bodies]
        rest_events = [len(event_ids(body)) for body in rests]
        print(f"3. replay of {len(threads)} finished conversations, one at a time")
        print(
            f"whole stream: {sum(events) / len(events):.1f} events, "
            f"{sum(map(len, bodies)) / len(bodies):,.0f} bytes per conversation; "
            f"{len(threads) / whole:.1f} replays/s"
        )
        print(
            f"after Last-Event-ID from the middle: {sum(rest_events) / len(rests):.1f} events, "
            f"{sum(map(len, rests)) / len(rests):,.0f} bytes; {len(threads) / rest:.1f} replays/s"
        )

    print("4. server CPU (user+system, all threads of the signoff serve process)")
    print(
        f"AG-UI conversation (pause + resume):  {steps.cpu_ms('agui'):6.1f} ms"
        f"  JSON: {steps.cpu_ms('json'):6.1f} ms"
        f"  AG-UI/JSON {steps.cpu_ms('agui') / steps.cpu_ms('json'):.2f}"
    )
    print(f"followed conversation (pause, follower, decision): {steps.cpu_ms('follow'):6.1f} ms")
    print(
        f"replay, whole: {steps.cpu_ms('replay'):5.1f} ms; "
        f"after the middle: {steps.cpu_ms('rest'):5.1f} ms"
    )


async def run(opts: argparse.Namespace) -> None:
    """Start the server, measure, stop it."""
    with tempfile.TemporaryDirectory() as tmp:
        serve = start(Path(tmp))
        try:
            await measure(serve, opts)
        finally:
            serve.stop()


def main() -> None:
    """Parse options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
