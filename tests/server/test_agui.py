"""A task's conversation over AG-UI, against a real ``signoff serve --agent``: runs streamed
with ids, interrupts that are signoff requests, resume entries that become decisions, the
whole stream again (or the rest of it) for a reader, and follow-up messages."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from signoff.server.app import API
from tests.server.agui_agent import COLOURS, runs
from tests.server.agui_serving import (
    Chat,
    Frame,
    ended,
    interrupts,
    lines_until_ended,
    order,
    post_run,
    read_frames,
    resolved,
    run_input,
    serve_chat,
    stored,
)
from tests.serving import api_as

EVENT_STREAM = {"Accept": "text/event-stream"}


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chat]:
    """One server hosting the scripted ``chat`` agent (and ``demo``) for the whole module,
    with no tools.toml: every tool call is asked about (fail closed), a question to a person
    is asked as itself."""
    yield from serve_chat(tmp_path_factory.mktemp("agui"))


def _types(frames: list[Frame]) -> list[str]:
    return [f.type for f in frames]


def _text(frames: list[Frame], role: str = "assistant") -> list[str]:
    """The deltas of the messages of ``role``."""
    roles = {f.data["messageId"]: f.data["role"] for f in frames if f.type == "TEXT_MESSAGE_START"}
    return [
        f.data["delta"]
        for f in frames
        if f.type == "TEXT_MESSAGE_CONTENT" and roles.get(f.data["messageId"]) == role
    ]


def _of(frames: list[Frame], kind: str) -> list[dict[str, Any]]:
    return [f.data for f in frames if f.type == kind]


def _user_messages(frames: list[Frame]) -> dict[str, str]:
    """Each user message of ``frames``: its id and its text."""
    users = {f.data["messageId"] for f in frames if f.type == "TEXT_MESSAGE_START"}
    users &= {f.data["messageId"] for f in frames if f.data.get("role") == "user"}
    return {
        f.data["messageId"]: f.data["delta"]
        for f in frames
        if f.type == "TEXT_MESSAGE_CONTENT" and f.data["messageId"] in users
    }


async def _first_run(http: httpx.AsyncClient, thread: str) -> list[Frame]:
    """The first run of the task's stream (GET /tasks/{id}/stream)."""
    async with http.stream("GET", f"{API}/tasks/{thread}/stream") as got:
        return await read_frames(got, ended)


def _ids_increase(frames: list[Frame]) -> None:
    ids = [order(f.id) for f in frames]
    assert all(a < b for a, b in itertools.pairwise(ids)), ids


async def _paused(http: httpx.AsyncClient, thread: str, prompt: str) -> list[Frame]:
    frames = await post_run(http, run_input(thread, prompt))
    assert interrupts(frames), _types(frames)
    assert (await stored(http, thread))["status"] == "Paused"
    return frames


async def test_a_json_run_answers_the_task_or_its_stream(chat: Chat) -> None:
    """``{"prompt"}`` gets 201 and the TaskView, as before; asking for ``text/event-stream``,
    the run's AG-UI events."""
    async with api_as(chat.server, chat.person("alice")) as alice:
        done = await alice.post(f"{API}/agents/chat/runs", json={"prompt": "hello"})
        assert done.status_code == 201, done.text
        assert done.headers["content-type"].startswith("application/json")
        task = done.json()
        assert task["status"] == "Completed" and task["output"] == "turn 1, you said: hello"
        assert "events" not in task
        url = f"{API}/agents/chat/runs"
        async with alice.stream("POST", url, json={"prompt": "hi"}, headers=EVENT_STREAM) as got:
            frames = await read_frames(got)
        assert frames[0].type == "RUN_STARTED" and _text(frames, "user") == ["hi"]
        assert "".join(_text(frames)) == "turn 1, you said: hi"
        assert frames[-1].data["outcome"] == {"type": "success"}


async def test_an_agui_run_streams_the_prompt_the_calls_and_ends_on_its_requests(
    chat: Chat,
) -> None:
    """RUN_STARTED, parallel tool calls, RUN_FINISHED whose interrupts are the task's pending
    requests, each linking to it on the server; every frame has an id, ids strictly
    increasing. The client's own message is not echoed back; the task's stream has it,
    under the client's id."""
    async with api_as(chat.server, chat.person("alice")) as alice:
        body = run_input("thread-parallel", "write p1.txt=one, p2.txt=two")
        async with alice.stream("POST", f"{API}/agents/chat/runs", json=body) as got:
            assert got.headers["content-type"].startswith("text/event-stream")
            assert got.headers["cache-control"] == "no-store"
            assert got.headers["x-accel-buffering"] == "no"
            frames = await read_frames(got)
        assert frames[0].type == "RUN_STARTED"
        assert frames[0].data["threadId"] == "thread-parallel"
        assert frames[0].data["runId"] == body["runId"]
        assert _text(frames, "user") == []
        replay = await _first_run(alice, "thread-parallel")
        message = body["messages"][0]
        assert _user_messages(replay) == {message["id"]: message["content"]}
        starts = _of(frames, "TOOL_CALL_START")
        assert [s["toolCallName"] for s in starts] == ["write_file", "write_file"]
        assert frames[-1].type == "RUN_FINISHED"
        _ids_increase(frames)
        task = await stored(alice, "thread-parallel")
        assert task["status"] == "Paused"
        waiting = {p["request_id"]: p["tool_call_id"] for p in task["pending"]}
        found = interrupts(frames)
        assert {i["id"]: i["toolCallId"] for i in found} == waiting
        assert {i["toolCallId"] for i in found} == {s["toolCallId"] for s in starts}
        for interrupt in found:
            assert interrupt["reason"] == "tool_call"
            request = (await alice.get(f"{API}/requests/{interrupt['id']}")).json()
            assert request["status"] == "pending" and request["tool_name"] == "write_file"
            signoff = interrupt["metadata"]["signoff"]
            assert signoff["requestId"] == interrupt["id"] and "approve" in signoff["actions"]
            assert signoff["url"] == f"{chat.server.base}/requests/{interrupt['id']}"
    assert runs(chat.workspace) == []


@pytest.mark.parametrize(
    ("thread", "payload"),
    [("thread-approved", {"approved": True}), ("thread-approve", {"type": "approve"})],
)
async def test_a_resume_approves_and_the_next_run_streams_to_success(
    chat: Chat, thread: str, payload: dict[str, Any]
) -> None:
    """pydantic-ai's and signoff's approval alike: the tool ran once, on disk; the next run
    carries the resume's runId, says who decided, streams the reply in several deltas and
    ends in success."""
    async with api_as(chat.server, chat.person("alice")) as alice:
        first = await _paused(alice, thread, f"write {thread}.txt=yes")
        (interrupt,) = interrupts(first)
        body = run_input(thread, resume=[resolved(interrupt["id"], payload)])
        second = await post_run(alice, body)
        assert second[0].type == "RUN_STARTED"
        assert second[0].data["runId"] == second[-1].data["runId"] == body["runId"]
        (decision,) = [d["value"] for d in _of(second, "CUSTOM") if d["name"] == "signoff.decision"]
        assert decision["requestId"] == interrupt["id"] and decision["status"] == "approved"
        assert decision["by"] == "alice"
        (result,) = _of(second, "TOOL_CALL_RESULT")
        assert result["toolCallId"] == interrupt["toolCallId"]
        assert "wrote" in result["content"]
        deltas = _text(second)
        assert len(deltas) > 1 and "".join(deltas) == f"done: wrote {thread}.txt"
        assert second[-1].data["outcome"] == {"type": "success"}
        _ids_increase(first + second)
    assert (chat.workspace / f"{thread}.txt").read_text() == "yes"
    assert runs(chat.workspace).count(f"{thread}.txt=yes") == 1


async def test_a_rejection_reason_is_what_the_model_was_told_and_the_tool_never_ran(
    chat: Chat,
) -> None:
    """``{"approved": false, "reason"}``: no file, the reason in the TOOL_CALL_RESULT, and the
    run goes on to success."""
    async with api_as(chat.server, chat.person("alice")) as alice:
        (interrupt,) = interrupts(await _paused(alice, "thread-reject", "write no.txt=x"))
        answer = {"approved": False, "reason": "not on a Friday"}
        frames = await post_run(
            alice, run_input("thread-reject", resume=[resolved(interrupt["id"], answer)])
        )
        (result,) = _of(frames, "TOOL_CALL_RESULT")
        assert "not on a Friday" in result["content"]
        assert "not on a Friday" in "".join(_text(frames))
        assert frames[-1].data["outcome"] == {"type": "success"}
    assert not (chat.workspace / "no.txt").exists()
    assert not [r for r in runs(chat.workspace) if r.startswith("no.txt")]


async def test_an_edit_runs_the_edited_args(chat: Chat) -> None:
    """``editedArgs`` (and signoff's approve with args): what ran is the edited call."""
    async with api_as(chat.server, chat.person("alice")) as alice:
        (interrupt,) = interrupts(await _paused(alice, "thread-edit", "write edit.txt=draft"))
        answer = {"approved": True, "editedArgs": {"path": "edit.txt", "content": "final"}}
        frames = await post_run(
            alice, run_input("thread-edit", resume=[resolved(interrupt["id"], answer)])
        )
        (decision,) = [d["value"] for d in _of(frames, "CUSTOM")]
        assert decision["edited"] is True and decision["args"]["content"] == "final"
        assert frames[-1].data["outcome"] == {"type": "success"}
    assert (chat.workspace / "edit.txt").read_text() == "final"
    assert "edit.txt=draft" not in runs(chat.workspace)


async def test_the_stream_replays_the_runs_and_resumes_after_an_id(chat: Chat) -> None:
    """GET /tasks/{id}/stream is the runs' events concatenated, with the prompt the client
    sent (its POST's stream left it out); after an id from the middle (header or
    ``?after=``), exactly the rest; a Completed task's stream ends."""
    async with api_as(chat.server, chat.person("alice")) as alice:
        body = run_input("thread-replay", "write replay.txt=r")
        first = await _paused(alice, "thread-replay", "write replay.txt=r")
        (interrupt,) = interrupts(first)
        entry = resolved(interrupt["id"], {"approved": True})
        second = await post_run(alice, run_input("thread-replay", resume=[entry]))
        url = f"{API}/tasks/thread-replay/stream"
        async with alice.stream("GET", url, headers=EVENT_STREAM) as got:
            assert got.headers["content-type"].startswith("text/event-stream")
            streamed = await read_frames(got)
        prompt = body["messages"][0]["id"]
        assert [f for f in streamed if f.data.get("messageId") != prompt] == first + second
        assert _user_messages(streamed) == {prompt: "write replay.txt=r"}
        middle = streamed[len(streamed) // 2].id
        assert middle is not None
        async with alice.stream("GET", url, headers={"Last-Event-ID": middle}) as got:
            assert await read_frames(got) == streamed[len(streamed) // 2 + 1 :]
        async with alice.stream("GET", url, params={"after": first[-1].id}) as got:
            assert await read_frames(got) == second


async def test_a_follower_of_a_paused_task_sees_a_decision_made_elsewhere(chat: Chat) -> None:
    """Connected while paused, a reader gets the next run once someone decides through
    ``POST /requests/{id}/decision``, and the stream ends with the task."""
    async with (
        api_as(chat.server, chat.person("alice")) as alice,
        api_as(chat.server, chat.tokens["admin"]) as admin,
    ):
        first = await _paused(alice, "thread-elsewhere", "write elsewhere.txt=e")
        (interrupt,) = interrupts(first)
        url = f"{API}/tasks/thread-elsewhere/stream"
        async with alice.stream("GET", url, headers={"Last-Event-ID": str(first[-1].id)}) as got:
            assert got.status_code == 200
            reading = asyncio.create_task(read_frames(got))
            await asyncio.sleep(0.3)
            assert not reading.done()
            decided = await admin.post(
                f"{API}/requests/{interrupt['id']}/decision", json={"type": "approve"}
            )
            assert decided.status_code == 200, decided.text
            frames = await asyncio.wait_for(reading, 30)
        assert frames[0].type == "RUN_STARTED" and frames[-1].data["outcome"] == {"type": "success"}
        (decision,) = [d["value"] for d in _of(frames, "CUSTOM")]
        assert decision["by"] == "admin"
        _ids_increase(first + frames)
    assert runs(chat.workspace).count("elsewhere.txt=e") == 1


async def test_a_follow_up_continues_a_completed_task_with_its_history(chat: Chat) -> None:
    """POST /tasks/{id}/messages (202, or the run's events) and an AG-UI input with a new
    user message: each a new run, the model sees the earlier turns."""
    async with api_as(chat.server, chat.person("alice")) as alice:
        first = await post_run(alice, run_input("thread-more", "hello"))
        assert "".join(_text(first)) == "turn 1, you said: hello"
        url = f"{API}/tasks/thread-more/messages"
        async with alice.stream(
            "POST", url, json={"content": "again"}, headers=EVENT_STREAM
        ) as got:
            assert got.status_code == 200
            second = await read_frames(got)
        assert _text(second, "user") == ["again"]
        assert "".join(_text(second)) == "turn 2, you said: hello / again"
        assert second[-1].data["outcome"] == {"type": "success"}
        third = await post_run(alice, run_input("thread-more", "once more"))
        assert "".join(_text(third)) == "turn 3, you said: hello / again / once more"
        _ids_increase(first + second + third)
        plain = await alice.post(url, json={"content": "last"})
        assert plain.status_code == 202, plain.text
        assert plain.json()["status"] in ("Running", "Completed")


async def test_a_choice_refuses_a_forged_option_and_takes_a_real_one(chat: Chat) -> None:
    """A choice interrupt lists its options; a resume naming another one is 422 with nothing
    decided; one of the options goes to the model as the call's result."""
    async with api_as(chat.server, chat.person("alice")) as alice:
        (interrupt,) = interrupts(await _paused(alice, "thread-choice", "choose a colour"))
        assert interrupt["reason"] == "choice"
        assert interrupt["metadata"]["signoff"]["options"] == COLOURS
        forged = resolved(interrupt["id"], {"type": "choose", "choice": "green"})
        refused = await alice.post(
            f"{API}/agents/chat/runs", json=run_input("thread-choice", resume=[forged])
        )
        assert refused.status_code == 422, refused.text
        assert set(refused.json()) == {"error", "detail"}
        request = (await alice.get(f"{API}/requests/{interrupt['id']}")).json()
        assert request["status"] == "pending"
        chosen = resolved(interrupt["id"], {"type": "choose", "choice": "blue"})
        frames = await post_run(alice, run_input("thread-choice", resume=[chosen]))
        (result,) = _of(frames, "TOOL_CALL_RESULT")
        assert "blue" in result["content"]
        assert frames[-1].data["outcome"] == {"type": "success"}


async def test_a_question_to_a_person_is_not_gated_as_an_approval(chat: Chat) -> None:
    """With no tools.toml (every tool asked about), the demo agent's question is its run's
    one interrupt, a choice: no approval is filed before asking a person."""
    async with api_as(chat.server, chat.person("alice")) as alice:
        frames = await post_run(
            alice, run_input("thread-ask", "ask me which database to use"), agent="demo"
        )
        (interrupt,) = interrupts(frames)
        assert interrupt["reason"] == "choice", interrupt
        assert interrupt["metadata"]["signoff"]["toolName"] == "human_intervention_request"
        filed = (await alice.get(f"{API}/requests", params={"session_id": "thread-ask"})).json()
        assert [r["kind"] for r in filed["items"]] == ["choice"]


async def test_bad_requests_are_refused_before_the_stream_starts(chat: Chat) -> None:
    """Unknown agent 404, bad threadId 422, no user message 422, a resume naming a request
    the task does not wait on 422, a malformed Last-Event-ID 400: each plain JSON."""
    async with api_as(chat.server, chat.person("alice")) as alice:
        (interrupt,) = interrupts(await _paused(alice, "thread-errors", "write errors.txt=x"))
        waits = interrupt["id"]
        runs_url = f"{API}/agents/chat/runs"
        answers = {
            "unknown agent": await alice.post(
                f"{API}/agents/nobody/runs", json=run_input("thread-x", "hi")
            ),
            "unknown agent, json": await alice.post(
                f"{API}/agents/nobody/runs", json={"prompt": "hi"}
            ),
            "bad thread": await alice.post(runs_url, json=run_input("bad thread!", "hi")),
            "long thread": await alice.post(runs_url, json=run_input("t" * 129, "hi")),
            "no user message": await alice.post(runs_url, json=run_input("thread-new")),
            "not waiting": await alice.post(
                runs_url,
                json=run_input("thread-errors", resume=[resolved("req_nope", {"approved": True})]),
            ),
            "bad payload": await alice.post(
                runs_url, json=run_input("thread-errors", resume=[resolved(waits, "yes")])
            ),
            "bad decision": await alice.post(
                runs_url,
                json=run_input(
                    "thread-errors",
                    resume=[
                        resolved(waits, {"type": "approve"}),
                        resolved(waits, {"type": "approve", "args": "x"}),
                    ],
                ),
            ),
            "paused, no resume": await alice.post(runs_url, json=run_input("thread-errors")),
        }
        expected = {
            "unknown agent": 404,
            "unknown agent, json": 404,
            "bad thread": 422,
            "long thread": 422,
            "no user message": 422,
            "not waiting": 422,
            "bad payload": 422,
            "bad decision": 422,
            "paused, no resume": 409,
        }
        for what, answer in answers.items():
            assert answer.status_code == expected[what], (what, answer.text)
            assert answer.headers["content-type"].startswith("application/json"), what
            assert set(answer.json()) == {"error", "detail"}, what
        stream = f"{API}/tasks/thread-errors/stream"
        for bad in ("abc", "1-x", "-1-2", "1-2-3", "99999999999999999999-1"):
            got = await alice.get(stream, headers={"Last-Event-ID": bad})
            assert got.status_code == 400, (bad, got.text)
            assert got.json()["error"] == "InvalidHeader"
        got = await alice.get(stream, params={"after": "nope"})
        assert got.status_code == 400, got.text
        missing = await alice.get(f"{API}/tasks/task_nobody/stream")
        assert missing.status_code == 404
        task = (await alice.get(f"{API}/tasks/thread-errors")).json()
        assert task["status"] == "Paused"
        request = (await alice.get(f"{API}/requests/{waits}")).json()
        assert request["status"] == "pending"


async def test_a_stopping_server_ends_its_streams(chat: Chat) -> None:
    """SIGTERM ends a follower's stream at once with a comment saying why, and the server
    exits promptly (this test stops the module's server, so it runs last)."""
    async with api_as(chat.server, chat.person("alice")) as alice:
        first = await _paused(alice, "thread-stop", "write stop.txt=s")

        async def stop() -> None:
            chat.server.process.terminate()

        url = f"{API}/tasks/thread-stop/stream"
        lines = await lines_until_ended(alice, url, stop, after=first[-1].id)
        assert ": stream ended: the server is stopping" in lines
        chat.server.process.communicate(timeout=10)
