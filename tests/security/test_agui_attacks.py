"""Attacks on the AG-UI routes of a real ``signoff serve --agent``: reading or resuming
someone else's conversation, taking over a thread by naming it, approving what governance
forbids through a resume entry, and odd or huge inputs.

Its policy counts the person who starts a run as the requester of its ``write_file`` calls
(``starter_may_approve = false``): another person must approve them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from signoff.server.app import API
from tests.server.agui_agent import runs
from tests.server.agui_serving import (
    Chat,
    interrupts,
    lines_until_ended,
    post_run,
    read_frames,
    resolved,
    run_input,
    serve_chat,
    stored,
)
from tests.serving import agent_token, api_as

POLICY = '[[rules]]\ntool = "write_file"\naction = "ask"\nstarter_may_approve = false\n'


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chat]:
    """One server for the module, hosting the scripted ``chat`` agent under :data:`POLICY`."""
    yield from serve_chat(tmp_path_factory.mktemp("agui-attacks"), POLICY)


async def _paused(chat: Chat, thread: str) -> dict[str, Any]:
    """Alice's conversation ``thread``, paused on one write_file call: its interrupt."""
    async with api_as(chat.server, chat.person("alice")) as alice:
        frames = await post_run(alice, run_input(thread, f"write {thread}.txt=x"))
        assert (await stored(alice, thread))["status"] == "Paused"
    (interrupt,) = interrupts(frames)
    return interrupt


async def _unchanged(chat: Chat, thread: str, interrupt: dict[str, Any]) -> None:
    """The conversation is still paused on its pending request, and nothing was written."""
    async with api_as(chat.server, chat.tokens["admin"]) as admin:
        task = (await admin.get(f"{API}/tasks/{thread}")).json()
        assert task["status"] == "Paused" and task["user"] == "alice", task
        request = (await admin.get(f"{API}/requests/{interrupt['id']}")).json()
        assert request["status"] == "pending", request
    assert not [r for r in runs(chat.workspace) if r.startswith(thread)]


def _refused(answer: httpx.Response, status: int) -> None:
    assert answer.status_code == status, answer.text
    assert set(answer.json()) == {"error", "detail"}


async def test_an_agent_token_cannot_read_resume_or_take_over_a_persons_conversation(
    chat: Chat,
) -> None:
    """403 for an agent on a person's stream, resume, follow-up and thread; nothing moves."""
    interrupt = await _paused(chat, "attack-agent")
    bot = agent_token(chat.server, "bot")
    approve = [resolved(interrupt["id"], {"approved": True})]
    async with api_as(chat.server, bot) as agent:
        runs_url = f"{API}/agents/chat/runs"
        _refused(await agent.get(f"{API}/tasks/attack-agent/stream"), 403)
        _refused(await agent.post(runs_url, json=run_input("attack-agent", resume=approve)), 403)
        _refused(
            await agent.post(runs_url, json=run_input("attack-agent", "write mine.txt=y")), 403
        )
        _refused(
            await agent.post(f"{API}/tasks/attack-agent/messages", json={"content": "hi"}), 403
        )
        forged_type = [resolved(interrupt["id"], {"type": "approve"})]
        _refused(
            await agent.post(runs_url, json=run_input("attack-agent", resume=forged_type)), 403
        )
    await _unchanged(chat, "attack-agent", interrupt)


async def test_a_person_cannot_read_resume_or_take_over_another_persons_conversation(
    chat: Chat,
) -> None:
    """Bob (an approver) gets 404 for Alice's conversation however he names it, even with a
    new message under her thread id; the admin may read it."""
    interrupt = await _paused(chat, "attack-person")
    approve = [resolved(interrupt["id"], {"approved": True})]
    async with api_as(chat.server, chat.person("bob")) as bob:
        runs_url = f"{API}/agents/chat/runs"
        _refused(await bob.get(f"{API}/tasks/attack-person/stream"), 404)
        _refused(await bob.post(runs_url, json=run_input("attack-person", resume=approve)), 404)
        _refused(await bob.post(runs_url, json=run_input("attack-person", "write b.txt=b")), 404)
        _refused(await bob.post(f"{API}/tasks/attack-person/messages", json={"content": "x"}), 404)
        unknown = await bob.get(f"{API}/tasks/attack-nobody/stream")
        assert (
            unknown.json()["detail"].replace("nobody", "person")
            == ((await bob.get(f"{API}/tasks/attack-person/stream")).json()["detail"])
        )
    await _unchanged(chat, "attack-person", interrupt)
    async with api_as(chat.server, chat.tokens["admin"]) as admin:
        url = f"{API}/tasks/attack-person/stream"
        async with admin.stream("GET", url, params={"after": "999-0"}) as got:
            assert got.status_code == 200


async def test_a_resume_cannot_approve_what_governance_forbids(chat: Chat) -> None:
    """Alice started the run, and policy counts her as the requester: her resume approving
    it (either shape) is 403 and nothing is decided; a rejection by her is allowed."""
    interrupt = await _paused(chat, "attack-self")
    async with api_as(chat.server, chat.person("alice")) as alice:
        runs_url = f"{API}/agents/chat/runs"
        for payload in ({"approved": True}, {"type": "approve", "scope": "always"}):
            entry = [resolved(interrupt["id"], payload)]
            _refused(await alice.post(runs_url, json=run_input("attack-self", resume=entry)), 403)
        await _unchanged(chat, "attack-self", interrupt)
        no = [resolved(interrupt["id"], {"approved": False, "reason": "changed my mind"})]
        frames = await post_run(alice, run_input("attack-self", resume=no))
        assert frames[-1].data["outcome"] == {"type": "success"}
    assert not [r for r in runs(chat.workspace) if r.startswith("attack-self")]


async def test_one_bad_entry_decides_nothing(chat: Chat) -> None:
    """Two waiting calls, one entry fine and one forged: 422, both requests still pending."""
    async with api_as(chat.server, chat.person("alice")) as alice:
        frames = await post_run(alice, run_input("attack-two", "write t1.txt=1, t2.txt=2"))
        first, second = interrupts(frames)
        entries = [
            {"interruptId": first["id"], "status": "cancelled"},
            resolved(second["id"], {"type": "choose", "choice": "yes"}),
        ]
        runs_url = f"{API}/agents/chat/runs"
        _refused(await alice.post(runs_url, json=run_input("attack-two", resume=entries)), 422)
        for interrupt in (first, second):
            request = (await alice.get(f"{API}/requests/{interrupt['id']}")).json()
            assert request["status"] == "pending"


async def _declared_too_large(chat: Chat, token: str, size: int) -> bytes:
    """The answer's head to a run whose headers declare ``size`` bytes, read before sending
    them (an HTTP client would write the whole body first, into a closed connection)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", chat.server.port)
    head = (
        f"POST {API}/agents/chat/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n\r\n"
    )
    writer.write(head.encode() + b'{"threadId": "odd-9", "runId": "r", "messages": [')
    await writer.drain()
    head_in = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    length = next(
        int(line.split(b":")[1])
        for line in head_in.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    answer = head_in + await asyncio.wait_for(reader.readexactly(length), 10)
    writer.close()
    return answer


async def test_odd_and_huge_inputs_get_a_4xx(chat: Chat) -> None:
    """Lone surrogates, NUL, wrong types, deep nesting and 10 MB: a 4xx {error, detail},
    never a 5xx, and no conversation is made of them."""
    token = chat.person("alice")
    runs_url = f"{API}/agents/chat/runs"
    raw = {
        "surrogate in content": b'{"threadId": "odd-1", "runId": "r", "messages": '
        b'[{"id": "m", "role": "user", "content": "hi \\ud800"}]}',
        "surrogate in thread": b'{"threadId": "odd-\\udc00", "runId": "r", "messages": []}',
        "surrogate in payload": b'{"threadId": "odd-2", "runId": "r", "messages": [], '
        b'"resume": [{"interruptId": "x", "status": "resolved", "payload": {"a": "\\ud800"}}]}',
        "NUL in thread": b'{"threadId": "odd\\u0000", "runId": "r", "messages": []}',
        "NUL in run id": b'{"threadId": "odd-3", "runId": "r\\u0000", "messages": '
        b'[{"id": "m", "role": "user", "content": "hi"}]}',
        "messages not a list": b'{"threadId": "odd-4", "runId": "r", "messages": "hi"}',
        "unknown role": b'{"threadId": "odd-5", "runId": "r", "messages": [{"id": "m", '
        b'"role": "root", "content": "hi"}]}',
        "resume not a list": b'{"threadId": "odd-6", "runId": "r", "messages": [], "resume": 1}',
        "not JSON": b'{"threadId": ',
        "an array": b"[1, 2]",
        "deep": b'{"threadId": "odd-7", "runId": "r", "messages": [], "state": '
        + b'{"a": ' * 5000
        + b"1"
        + b"}" * 5000
        + b"}",
        "huge prompt": b'{"threadId": "odd-8", "runId": "r", "messages": [{"id": "m", '
        b'"role": "user", "content": "' + b"y" * 200_000 + b'"}]}',
    }
    async with api_as(chat.server, token) as alice:
        for what, body in raw.items():
            headers = {"Content-Type": "application/json"}
            try:
                answer = await alice.post(runs_url, content=body, headers=headers)
            except httpx.TransportError as exc:
                raise AssertionError(what) from exc
            assert 400 <= answer.status_code < 500, (what, answer.status_code, answer.text)
            assert set(answer.json()) == {"error", "detail"}, what
        ten_megabytes = await _declared_too_large(chat, token, 10_000_000)
        assert ten_megabytes.startswith(b"HTTP/1.1 413 "), ten_megabytes
        assert b'"PayloadTooLarge"' in ten_megabytes
        for what, body in {
            "message NUL": b'{"content": "a\\u0000b", "x": 1}',
            "message surrogate": b'{"content": "\\udfff"}',
            "message empty": b'{"content": ""}',
        }.items():
            answer = await alice.post(
                f"{API}/tasks/odd-1/messages",
                content=body,
                headers={"Content-Type": "application/json"},
            )
            assert 400 <= answer.status_code < 500, (what, answer.text)
        for bad in ("1-1 2", "01-1", "+1-1", "9" * 41):
            answer = await alice.get(f"{API}/tasks/odd-1/stream", headers={"Last-Event-ID": bad})
            assert 400 <= answer.status_code < 500, (bad, answer.text)
        listed = (await alice.get(f"{API}/tasks")).json()["items"]
        assert not [t for t in listed if t["id"].startswith("odd")]


async def test_a_revoked_token_ends_its_stream(chat: Chat) -> None:
    """Following a paused conversation with a token that is then revoked: the stream ends
    within a second or so, saying why."""
    await _paused(chat, "attack-revoke")
    carol = chat.person("carol", "admin")
    async with (
        api_as(chat.server, carol) as follower,
        api_as(chat.server, chat.tokens["admin"]) as admin,
    ):

        async def revoke() -> None:
            tokens = (await admin.get(f"{API}/tokens")).json()["items"]
            (token_id,) = [t["id"] for t in tokens if t["name"] == "carol"]
            revoked = await admin.post(f"{API}/tokens/{token_id}/revoke")
            assert revoked.status_code == 200, revoked.text

        lines = await lines_until_ended(follower, f"{API}/tasks/attack-revoke/stream", revoke)
        assert any(line.startswith(": stream ended:") for line in lines), lines


async def test_a_message_id_cannot_be_markup_or_take_over_an_earlier_message(chat: Chat) -> None:
    """A prompt's message id that is markup, too long, or an id the conversation holds
    already is stored under a server-made id (and so shown back to its sender); the earlier
    message keeps its text, and each reply goes on."""
    async with api_as(chat.server, chat.person("alice")) as alice:
        first = run_input("attack-ids", "hello")
        first["messages"][0]["id"] = "m-1"
        assert (await post_run(alice, first))[-1].data["outcome"] == {"type": "success"}
        for bad in ("m-1", '"><img src=x onerror=alert(1)>', "x" * 129, "a b", ""):
            body = run_input("attack-ids")
            body["messages"] = [{"id": bad, "role": "user", "content": f"more {len(bad)}"}]
            frames = await post_run(alice, body)
            assert frames[-1].data["outcome"] == {"type": "success"}, bad
            echoed = [f.data for f in frames if f.type == "TEXT_MESSAGE_START"]
            assert echoed[0]["role"] == "user" and echoed[0]["messageId"].startswith("msg_")
        async with alice.stream("GET", f"{API}/tasks/attack-ids/stream") as got:
            replay = await read_frames(got)
    users = {f.data["messageId"] for f in replay if f.data.get("role") == "user"}
    said = [
        (f.data["messageId"], f.data["delta"])
        for f in replay
        if f.type == "TEXT_MESSAGE_CONTENT" and f.data["messageId"] in users
    ]
    assert said[0] == ("m-1", "hello") and len(said) == 6
    assert all(message_id.startswith("msg_") for message_id, _ in said[1:]), said
