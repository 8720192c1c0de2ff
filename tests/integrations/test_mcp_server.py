"""signoff mcp-server driven by the official MCP client, against a real signoff server.

The client launches ``signoff mcp-server`` over stdio (or reaches it over streamable HTTP);
the person decides over the HTTP API of a real ``signoff serve``, or with the CLI on a local
database.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp", reason="needs the MCP SDK: pip install 'signoff[mcp]'")

import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from signoff.server.app import API
from tests.integrations.mcp_testing import (
    decide,
    guarded_http_server,
    listed,
    pending_request,
    text,
)
from tests.serving import Server, agent_token, bearer, free_port

ASK = "human_intervention_request"
INPUT = "request_human_input"
AWAIT = "signoff_await"

PROMPT_HOLD = "30"
"""Long enough that a call decided promptly never reaches its hold."""


def server_args(base: str, token: str, *extra: str) -> list[str]:
    """``signoff mcp-server`` filing requests on ``base`` as the agent ``token``."""
    return ["-m", "signoff", "mcp-server", "--server", base, "--token", token, *extra]


@asynccontextmanager
async def asking(server: Server, hold: str = PROMPT_HOLD) -> AsyncIterator[Client]:
    """An MCP client session with ``signoff mcp-server`` (an agent of ``server``) over stdio."""
    params = StdioServerParameters(
        command=sys.executable,
        args=server_args(server.base, agent_token(server), "--hold", hold),
        env=server.env,
    )
    async with Client(params, mode="auto", cache=None) as client:
        yield client


async def ask_and_decide(
    client: Client, api: httpx.AsyncClient, tool: str, args: dict[str, Any], body: dict[str, Any]
) -> tuple[types.CallToolResult, dict[str, Any]]:
    """Call ``tool``, decide the request it files with ``body``; its result and the request."""
    call = asyncio.create_task(client.call_tool(tool, args))
    request = await pending_request(api)
    await decide(api, request["id"], body)
    return await call, request


async def test_the_three_tools_are_listed_with_their_schemas(server: Server) -> None:
    """The tools come with strict input schemas naming their required arguments."""
    async with asking(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert list(tools) == [ASK, INPUT, AWAIT]
    ask = tools[ASK].input_schema
    assert ask["required"] == ["prompt", "options"]
    assert set(ask["properties"]) == {
        "prompt",
        "options",
        "context",
        "multi_select",
        "allow_other",
        "timeout_s",
    }
    assert ask["properties"]["options"] == {
        "type": "array",
        "items": {"type": "string"},
        "minItems": 1,
        "description": "Distinct, short options in the order to show them.",
    }
    assert ask["properties"]["timeout_s"]["exclusiveMinimum"] == 0
    assert tools[INPUT].input_schema["required"] == ["questions"]
    assert tools[AWAIT].input_schema["required"] == ["request_id"]
    for tool in tools.values():
        assert tool.input_schema["additionalProperties"] is False
        assert tool.description and tool.title


async def test_a_choice_decided_in_the_inbox_returns_exactly_the_option_text(
    server: Server, api: httpx.AsyncClient
) -> None:
    """The person's option comes back as the whole text, and the inbox shows what was asked."""
    args = {
        "prompt": "Which region?",
        "options": ["eu-west-1", "us-east-1"],
        "context": "Latency matters more than cost.",
        "timeout_s": 120,
    }
    async with asking(server) as client:
        result, request = await ask_and_decide(
            client, api, ASK, args, {"type": "choose", "choice": "us-east-1"}
        )
    assert not result.is_error
    assert text(result) == "us-east-1"
    assert result.structured_content == {"choice": "us-east-1"}
    assert request["kind"] == "choice"
    assert request["prompt"] == "Which region?"
    assert request["options"] == ["eu-west-1", "us-east-1"]
    assert request["context"] == "Latency matters more than cost."
    assert request["requested_by"] == "bot"
    assert request["expires_at"] is not None


async def test_a_multi_select_choice_returns_one_option_per_line(
    server: Server, api: httpx.AsyncClient
) -> None:
    """Multi-select: each chosen option on its own line, and the list as structured content."""
    args = {"prompt": "Which checks?", "options": ["lint", "types", "tests"], "multi_select": True}
    async with asking(server) as client:
        result, _ = await ask_and_decide(
            client, api, ASK, args, {"type": "choose", "choices": ["lint", "tests"]}
        )
    assert not result.is_error
    assert text(result) == "lint\ntests"
    assert result.structured_content == {"choice": ["lint", "tests"]}


async def test_allow_other_returns_the_persons_free_text(
    server: Server, api: httpx.AsyncClient
) -> None:
    """With allow_other, a free-text answer outside the options comes back as given."""
    args = {"prompt": "Name the release", "options": ["v2.0"], "allow_other": True}
    async with asking(server) as client:
        result, _ = await ask_and_decide(
            client, api, ASK, args, {"type": "choose", "choice": "v2.0-rc1"}
        )
    assert not result.is_error and text(result) == "v2.0-rc1"


async def test_a_choice_outside_the_options_is_refused_and_the_call_keeps_waiting(
    server: Server, api: httpx.AsyncClient
) -> None:
    """A choice not among the options gets 422, the request stays pending, the call waits."""
    args = {"prompt": "Deploy now?", "options": ["yes", "no"]}
    async with asking(server) as client:
        call = asyncio.create_task(client.call_tool(ASK, args))
        request = await pending_request(api)
        path = f"{API}/requests/{request['id']}/decision"
        refused = await api.post(path, json={"type": "choose", "choice": "maybe"})
        assert refused.status_code == 422, refused.text
        assert "not one of the options" in refused.text
        several = await api.post(path, json={"type": "choose", "choices": ["yes", "no"]})
        assert several.status_code == 422, several.text
        assert (await api.get(f"{API}/requests/{request['id']}")).json()["status"] == "pending"
        await asyncio.sleep(0.3)
        assert not call.done(), "a refused decision must not end the call"
        await decide(api, request["id"], {"type": "choose", "choice": "no"})
        result = await call
    assert not result.is_error and text(result) == "no"


async def test_a_declined_choice_says_so_with_the_reason(
    server: Server, api: httpx.AsyncClient
) -> None:
    """Rejected: a sentence that the person declined, with their reason, and no choice."""
    args = {"prompt": "Pick a color", "options": ["red", "blue"]}
    async with asking(server) as client:
        result, _ = await ask_and_decide(
            client, api, ASK, args, {"type": "reject", "reason": "not my call"}
        )
    assert not result.is_error
    assert text(result) == "The person declined to choose. Their reason: not my call"
    assert result.structured_content is None


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        (
            {
                "type": "answer",
                "feedback": "keep it short",
                "answers": {"q1": "Postgres", "q2": "Friday"},
            },
            "The person answered. Continue the task using their reply.\n"
            "Feedback: keep it short\n"
            "Q: Which database?\nA: Postgres\n"
            "Q: When can it ship?\nA: Friday",
        ),
        (
            {"type": "approve"},
            "The person approved. Finish the task now; do not ask them again.",
        ),
        (
            {"type": "reject", "reason": "wrong project"},
            "The person rejected this. Stop the task and do not continue. "
            "Their reason: wrong project",
        ),
    ],
    ids=["answered", "approved", "rejected"],
)
async def test_questions_tell_the_model_to_continue_finish_or_stop(
    server: Server, api: httpx.AsyncClient, decision: dict[str, Any], expected: str
) -> None:
    """Answered gives the Q/A lines, approved says finish, rejected says stop with the reason."""
    questions = ["Which database?", "When can it ship?"]
    async with asking(server) as client:
        call = asyncio.create_task(client.call_tool(INPUT, {"questions": questions}))
        request = await pending_request(api)
        assert request["kind"] == "questions"
        assert [(q["id"], q["text"]) for q in request["questions"]] == [
            ("q1", "Which database?"),
            ("q2", "When can it ship?"),
        ]
        await decide(api, request["id"], decision)
        result = await call
    assert not result.is_error
    assert text(result) == expected


async def test_an_unanswered_call_returns_its_id_and_signoff_await_gets_the_answer(
    server: Server, api: httpx.AsyncClient
) -> None:
    """Past the hold: a non-error result with the id; once decided, signoff_await answers."""
    async with asking(server, hold="2") as client:
        first = await client.call_tool(ASK, {"prompt": "Ship it?", "options": ["ship", "wait"]})
        assert not first.is_error
        assert first.structured_content is not None
        request_id = first.structured_content["request_id"]
        assert first.structured_content == {"status": "pending", "request_id": request_id}
        assert request_id in text(first)
        assert f'call the tool {AWAIT} with {{"request_id": "{request_id}"}}' in text(first)
        assert (await pending_request(api))["id"] == request_id, "it stays open in the inbox"
        waiting = asyncio.create_task(client.call_tool(AWAIT, {"request_id": request_id}))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        await decide(api, request_id, {"type": "choose", "choice": "ship"})
        done = await waiting
        assert not done.is_error and text(done) == "ship"
        again = await client.call_tool(AWAIT, {"request_id": f"  {request_id} "})
        assert text(again) == "ship", "a settled request answers at once, every time"


async def test_a_question_nobody_answers_within_timeout_s_expires_with_no_answer(
    server: Server, api: httpx.AsyncClient
) -> None:
    """timeout_s bounds the request: once it expires the call says there is no answer."""
    async with asking(server, hold="5") as client:
        result = await client.call_tool(ASK, {"prompt": "Now?", "options": ["a"], "timeout_s": 1})
    assert not result.is_error
    assert text(result) == "The person did not answer in time, so there is no answer to act on."
    assert result.structured_content is None
    [request] = await listed(api)
    assert request["status"] == "expired"


async def test_signoff_await_on_an_unknown_or_missing_id_is_a_tool_error(server: Server) -> None:
    """An unknown or missing request_id gives an isError result and the session serves on."""
    async with asking(server) as client:
        unknown = await client.call_tool(AWAIT, {"request_id": "req_nope"})
        assert unknown.is_error
        assert "req_nope" in text(unknown)
        missing = await client.call_tool(AWAIT, {})
        assert missing.is_error
        assert text(missing) == "signoff_await needs request_id: the id a waiting call gave you"
        no_tool = await client.call_tool("no_such_tool", {})
        assert no_tool.is_error and "no_such_tool" in text(no_tool)
        assert len((await client.list_tools()).tools) == 3


async def test_signoff_await_refuses_a_tool_call_request_at_once(server: Server) -> None:
    """A tool-call request's id is refused at once (only mcp-proxy runs those), no hold."""
    token = agent_token(server)
    async with httpx.AsyncClient(base_url=server.base, headers=bearer(token)) as http:
        made = await http.post(
            f"{API}/requests", json={"session_id": "s", "tool_name": "shell", "tool_args": {}}
        )
        assert made.status_code == 201, made.text
        request_id = made.json()["id"]
    params = StdioServerParameters(
        command=sys.executable,
        args=server_args(server.base, token, "--hold", PROMPT_HOLD),
        env=server.env,
    )
    async with Client(params, mode="auto", cache=None) as client:
        started = asyncio.get_running_loop().time()
        refused = await client.call_tool(AWAIT, {"request_id": request_id})
        waited = asyncio.get_running_loop().time() - started
    assert refused.is_error and "only signoff mcp-proxy runs those" in text(refused)
    assert waited < float(PROMPT_HOLD), "it must not sit out the hold first"


BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    (ASK, {"prompt": "Pick"}, "choice requests need at least one option"),
    (ASK, {"prompt": "Pick", "options": []}, "choice requests need at least one option"),
    (ASK, {"options": ["a"]}, "choice requests need a prompt"),
    (ASK, {"prompt": "Pick", "options": ["a", "a"]}, "options must be distinct"),
    (ASK, {"prompt": "Pick", "options": ["a"], "colour": "red"}, "unknown argument(s): colour"),
    (ASK, {"prompt": "Pick", "options": ["a"], "timeout_s": 0}, "timeout_s must be a positive"),
    (ASK, {"prompt": "Pick", "options": ["a"], "timeout_s": -5}, "timeout_s must be a positive"),
    (ASK, {"prompt": "Pick", "options": ["a"], "timeout_s": "1h"}, "timeout_s must be a positive"),
    (ASK, {"prompt": "Pick", "options": ["a"], "timeout_s": True}, "timeout_s must be a positive"),
    (ASK, {"prompt": "Pick", "options": "a,b"}, "Invalid arguments"),
    (INPUT, {}, "questions requests need at least one question"),
    (INPUT, {"questions": []}, "questions requests need at least one question"),
    (INPUT, {"questions": ["ok?"], "urgent": True}, "unknown argument(s): urgent"),
]


async def test_bad_arguments_are_tool_errors_that_file_nothing(
    server: Server, api: httpx.AsyncClient
) -> None:
    """Missing, unknown or out-of-range arguments: an isError result saying why, no request."""
    async with asking(server) as client:
        for tool, args, message in BAD_CALLS:
            result = await client.call_tool(tool, args)
            assert result.is_error, (tool, args)
            assert message in text(result), (tool, args, text(result))
            assert "Traceback" not in text(result)
    assert await listed(api) == []


async def test_streamable_http_needs_the_bearer_token(
    server: Server, api: httpx.AsyncClient
) -> None:
    """--http serves the tools at /mcp only to a client with the token, and a choice works."""
    port = free_port()
    token = "test-mcp-server-token"
    args = server_args(server.base, agent_token(server), "--http", "--port", str(port))
    async with (
        guarded_http_server([*args, "--http-token", token], server.env, port) as url,
        httpx2.AsyncClient(headers=bearer(token), timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), cache=None) as client,
    ):
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == [ASK, INPUT, AWAIT]
        result, _ = await ask_and_decide(
            client,
            api,
            ASK,
            {"prompt": "Over HTTP?", "options": ["yes", "no"]},
            {"type": "choose", "choice": "yes"},
        )
    assert not result.is_error and text(result) == "yes"


async def test_on_a_local_database_signoff_choose_answers_the_question(tmp_path: Path) -> None:
    """On --db, `signoff choose` from a terminal answers, and signoff_await returns the text."""
    db = f"sqlite:///{tmp_path / 'local.db'}"
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200"}
    args = ["-m", "signoff", "mcp-server", "--db", db, "--hold", "1", "--session", "desk"]
    params = StdioServerParameters(command=sys.executable, args=args, env=env)
    async with Client(params, mode="auto", cache=None) as client:
        ask = {"prompt": "Which checks?", "options": ["lint", "types", "tests"]}
        first = await client.call_tool(ASK, {**ask, "multi_select": True})
        assert not first.is_error and first.structured_content is not None
        request_id = first.structured_content["request_id"]
        chose = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "signoff", "choose", request_id, "types", "tests", "--db", db],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert chose.returncode == 0, chose.stderr
        done = await client.call_tool(AWAIT, {"request_id": request_id})
    assert not done.is_error
    assert text(done) == "types\ntests"
    assert done.structured_content == {"choice": ["types", "tests"]}
