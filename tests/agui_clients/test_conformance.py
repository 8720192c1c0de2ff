"""signoff's AG-UI streams pass ``ag-ui-validate``, a conformance checker signoff did not write.

Against a real ``signoff serve`` hosting the demo chat agent, this records byte for byte the
stream of a first run that ends in an interrupt, the stream of the run its resume starts, and
``GET /api/v1/tasks/{id}/stream`` replaying the whole conversation; each file passes
``ag-ui-validate`` (its CLI, as a CI job would run it) with no error and no warning (its
per-run AGUI207 is checked across the runs here instead: see :data:`ACROSS_RUNS`), and so
does a run the validator starts itself on the live endpoint. A recording with one frame cut
out fails it, so the check can fail.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.server.app import API
from tests.agui_clients.hosted_demo import runs_url, serve_demo
from tests.serving import Server, bearer

VALIDATOR = Path(sys.executable).parent / "ag-ui-validate"
"""The validator's console script (``ag-ui-validate`` is in the ``dev`` extra)."""

SSE = "text/event-stream"

ACROSS_RUNS = ("--off", "AGUI207")
"""ag-ui-validate scopes tool calls to one run, so to it a resumed run's ``TOOL_CALL_RESULT``
for the call the paused run announced is AGUI207, "never started". That is how a resume
answers a call (pydantic-ai's own AG-UI adapter does the same; re-announcing the call in the
new run is reported as a bug, ag-ui-protocol/ag-ui#2014), so streams holding a resumed run are
validated without AGUI207 and :func:`orphan_results` checks that rule across the runs."""


@dataclass(frozen=True)
class Frame:
    """One SSE frame of a recorded stream: its ``id:`` and its event."""

    id: str | None
    event: dict[str, Any]
    raw: str
    """The frame's text, without the blank line that ends it."""


def frames(recording: str) -> list[Frame]:
    """The event frames of an SSE recording (comments such as keepalives left out)."""
    found = []
    for raw in recording.split("\n\n"):
        fields = [line.split(":", 1) for line in raw.split("\n") if line and ":" in line]
        data = [value.removeprefix(" ") for name, value in fields if name == "data"]
        ids = [value.removeprefix(" ") for name, value in fields if name == "id"]
        if data:
            found.append(Frame(ids[-1] if ids else None, json.loads("\n".join(data)), raw))
    return found


def validate(path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    """``ag-ui-validate PATH --json --max-warnings 0``: its exit code and its report."""
    done = subprocess.run(
        [str(VALIDATOR), str(path), "--json", "--max-warnings", "0", *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 1), f"ag-ui-validate failed to run: {done.stderr}"
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def orphan_results(stream: list[Frame]) -> list[str]:
    """The call ids of tool results that no earlier ``TOOL_CALL_START`` in ``stream``
    announced (AGUI207 over a whole conversation rather than one run)."""
    started: set[str] = set()
    orphans: list[str] = []
    for frame in stream:
        kind = frame.event["type"]
        if kind == "TOOL_CALL_START":
            started.add(frame.event["toolCallId"])
        elif kind == "TOOL_CALL_RESULT" and frame.event["toolCallId"] not in started:
            orphans.append(frame.event["toolCallId"])
    return orphans


def findings(report: dict[str, Any]) -> list[str]:
    """The report's errors and warnings, one line each."""
    return [
        f"{d['rule']} {d['severity']} at event {d['eventIndex']}: {d['message']}"
        for d in report["diagnostics"]
        if d["severity"] != "info"
    ]


# --- recording a conversation ---------------------------------------------------------------


@dataclass(frozen=True)
class Recordings:
    """The three streams of one conversation, as the server sent them."""

    first: Path
    resumed: Path
    replay: Path


def _run_input(thread_id: str, **more: Any) -> dict[str, Any]:
    """An AG-UI ``RunAgentInput`` asking for a file."""
    prompt = {"id": "user-1", "role": "user", "content": "create notes.md saying hello"}
    return {
        "threadId": thread_id,
        "runId": f"run-{uuid.uuid4().hex}",
        "state": {},
        "messages": [prompt],
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **more,
    }


def _record(http: httpx.Client, method: str, url: str, into: Path, **kwargs: Any) -> list[Frame]:
    """Send one request, keep its whole event stream byte for byte in ``into``; its frames."""
    with http.stream(method, url, headers={"Accept": SSE}, **kwargs) as response:
        body = response.read()
        assert response.status_code == 200, body[:2000]
        assert response.headers["content-type"].startswith(SSE), response.headers
    into.write_bytes(body)
    return frames(body.decode())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The module's ``signoff serve`` hosting the demo chat agent."""
    yield from serve_demo(tmp_path_factory.mktemp("agui-conformance"))


@pytest.fixture(scope="module")
def recordings(server: Server, person: str, tmp_path_factory: pytest.TempPathFactory) -> Recordings:
    """A person's conversation: the first run (an interrupt), the resumed run (approved,
    pydantic-ai's resume payload) and the whole conversation replayed, each in a file."""
    into = tmp_path_factory.mktemp("agui-recordings")
    saved = Recordings(into / "first.sse", into / "resumed.sse", into / "replay.sse")
    thread = f"conformance-{uuid.uuid4().hex}"
    with httpx.Client(headers=bearer(person), timeout=60) as http:
        first = _record(http, "POST", runs_url(server), saved.first, json=_run_input(thread))
        finished = first[-1].event
        assert finished["type"] == "RUN_FINISHED", finished
        assert finished["outcome"]["type"] == "interrupt", finished
        resume = [
            {"interruptId": i["id"], "status": "resolved", "payload": {"approved": True}}
            for i in finished["outcome"]["interrupts"]
        ]
        again = _run_input(thread, resume=resume)
        resumed = _record(http, "POST", runs_url(server), saved.resumed, json=again)
        assert resumed[-1].event["outcome"]["type"] == "success", resumed[-1]
        whole = f"{server.base}{API}/tasks/{thread}/stream"
        replay = _record(http, "GET", whole, saved.replay)
    # the replay is both runs, with the prompt the first one's stream did not echo back
    prompt = [f.id for f in replay if f.event.get("messageId") == "user-1"]
    assert len(prompt) == 3
    assert [f.id for f in replay if f.id not in prompt] == [f.id for f in first + resumed]
    return saved


# --- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stream", "rules"), [("first", ()), ("resumed", ACROSS_RUNS), ("replay", ACROSS_RUNS)]
)
def test_a_recorded_stream_passes_ag_ui_validate(
    recordings: Recordings, stream: str, rules: tuple[str, ...]
) -> None:
    """The first run, the resumed run and the replay of both: no error, no warning."""
    recording: Path = getattr(recordings, stream)
    code, report = validate(recording, *rules)
    assert findings(report) == [] and code == 0, recording.read_text()
    assert report["internalErrors"] == []
    assert report["eventCount"] == len(frames(recording.read_text()))
    assert report["features"]["human-in-the-loop"] == (
        "not-exercised" if stream == "resumed" else "exercised"
    )


def test_every_tool_result_answers_a_call_announced_earlier_in_the_conversation(
    recordings: Recordings,
) -> None:
    """AGUI207 across runs: the resumed run's result names the call the first run announced,
    in the replay too; with that announcement cut out, it names none."""
    first = frames(recordings.first.read_text())
    resumed = frames(recordings.resumed.read_text())
    replay = frames(recordings.replay.read_text())
    (result,) = [f.event for f in resumed if f.event["type"] == "TOOL_CALL_RESULT"]
    assert orphan_results(resumed) == [result["toolCallId"]]
    assert orphan_results(first + resumed) == [] and orphan_results(replay) == []
    unannounced = [f for f in replay if f.event["type"] != "TOOL_CALL_START"]
    assert orphan_results(unannounced) == [result["toolCallId"]]


@pytest.mark.parametrize(
    ("stream", "cut", "rule"),
    [
        ("first", "TOOL_CALL_START", "AGUI201"),  # its args arrive with no call started
        ("replay", "RUN_FINISHED", "AGUI002"),  # the next run starts inside the unfinished one
    ],
)
def test_a_stream_with_one_frame_cut_out_fails_ag_ui_validate(
    recordings: Recordings, tmp_path: Path, stream: str, cut: str, rule: str
) -> None:
    """Cutting one frame out of a stream that passes makes the validator fail it."""
    recording: Path = getattr(recordings, stream)
    text = recording.read_text()
    (victim, *_) = [f for f in frames(text) if f.event["type"] == cut]
    assert text.count(victim.raw + "\n\n") == 1
    broken = tmp_path / f"{stream}-without-{cut}.sse"
    broken.write_text(text.replace(victim.raw + "\n\n", "", 1))
    code, report = validate(broken)
    assert code == 1, report
    assert rule in {d["rule"] for d in report["diagnostics"] if d["severity"] == "error"}, report


def test_the_validator_passes_a_run_it_starts_on_the_live_endpoint(
    server: Server, person: str
) -> None:
    """``ag-ui-validate URL`` posts its own RunAgentInput as the person and checks the live
    stream, transport rules (Content-Type, framing, an abrupt end) included."""
    done = subprocess.run(
        [
            str(VALIDATOR),
            runs_url(server),
            "--header",
            f"Authorization: Bearer {person}",
            "--timeout",
            "60",
            "--json",
            "--max-warnings",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    report = json.loads(done.stdout)
    assert findings(report) == [] and done.returncode == 0, (report, done.stderr)
    assert report["eventCount"] > 2
    assert report["features"]["agentic-chat"] == "exercised"
