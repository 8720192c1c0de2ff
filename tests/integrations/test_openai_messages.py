"""A real ``openai.AsyncOpenAI`` loop asks signoff before tools run and sees only plain results."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

pytest.importorskip("openai", reason="needs the openai extra: pip install 'signoff[openai]'")

import openai

from signoff.backends import Backend
from signoff.domain.requests import ApprovalRequest, Request
from signoff.errors import InvalidDecision
from signoff.integrations import openai_messages
from signoff.integrations.openai_messages import (
    HUMAN_INTERVENTION_TOOL,
    INTERNAL_MARK,
    INTERNAL_ROLE,
    NO_ANSWER,
    resolve_tool_calls,
    run_tools_with_approval,
    strip_signoff,
)
from signoff.store.base import RequestQuery
from signoff.testing import AGENT, APPROVER, memory_service
from tests.integrations.conftest import Sides

EDIT_NOTE = "Note: a person edited the arguments before approving."
Turn = list[tuple[str, str, str]] | str
"""What the fake model answers: tool calls as (id, name, JSON arguments), or final text."""


def call(call_id: str, name: str, args: dict[str, Any] | str) -> tuple[str, str, str]:
    """One tool call of the fake model, arguments as the JSON string the API carries."""
    return call_id, name, args if isinstance(args, str) else json.dumps(args)


class FakeChat:
    """An in-process chat-completions endpoint: answers a script of turns, keeps every body."""

    def __init__(self, *turns: Turn) -> None:
        self.turns = list(turns)
        self.raw: list[str] = []

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """Every request body received, parsed."""
        return [json.loads(raw) for raw in self.raw]

    def handle(self, request: httpx.Request) -> httpx.Response:
        """Answer one POST /v1/chat/completions with the next turn of the script."""
        assert request.url.path == "/v1/chat/completions"
        self.raw.append(request.content.decode())
        turn = self.turns.pop(0) if self.turns else "done"
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if isinstance(turn, str):
            message["content"] = turn
        else:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in turn
            ]
        body = {
            "id": f"chatcmpl-{len(self.raw)}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "fake-model",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop" if isinstance(turn, str) else "tool_calls",
                    "message": message,
                }
            ],
        }
        return httpx.Response(200, json=body)

    def tool_messages(self, body_index: int = -1) -> dict[str, str]:
        """The tool messages' contents the model was sent in one request, by call id."""
        return {
            m["tool_call_id"]: m["content"]
            for m in self.bodies[body_index]["messages"]
            if m["role"] == "tool"
        }


Http = Callable[[FakeChat], openai.AsyncOpenAI]
"""Makes a real AsyncOpenAI client that talks to a FakeChat."""


@pytest.fixture
async def http() -> AsyncIterator[Http]:
    """A factory of real AsyncOpenAI clients whose HTTP goes to a FakeChat, not the network."""
    opened: list[httpx.AsyncClient] = []

    def client_for(fake: FakeChat) -> openai.AsyncOpenAI:
        transport = httpx.MockTransport(fake.handle)
        http_client = httpx.AsyncClient(transport=transport)
        opened.append(http_client)
        # openai 3 types http_client as httpx2's client and takes httpx's at run time
        return openai.AsyncOpenAI(
            api_key="test",
            base_url="http://fake/v1",
            http_client=http_client,  # type: ignore[arg-type]
            max_retries=0,
        )

    yield client_for
    for http_client in opened:
        await http_client.aclose()


class Tools:
    """Tool implementations that record what actually ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

    async def deploy(self, service: str, version: str) -> str:
        """Deploy a version."""
        self.ran.append(("deploy", {"service": service, "version": version}))
        return f"deployed {service} {version}"

    def write_file(self, path: str, text: str) -> dict[str, Any]:
        """Write a file (a blocking tool returning JSON)."""
        self.ran.append(("write_file", {"path": path, "text": text}))
        return {"path": path, "bytes": len(text)}

    async def delete_table(self, table: str) -> str:
        """Drop a table."""
        self.ran.append(("delete_table", {"table": table}))
        return "dropped"

    async def send_email(self, to: str, body: str) -> str:
        """Send mail."""
        self.ran.append(("send_email", {"to": to, "body": body}))
        return "sent"

    async def explode(self) -> str:
        """Always fails."""
        self.ran.append(("explode", {}))
        raise RuntimeError("disk full")

    def table(self) -> dict[str, Callable[..., Any]]:
        """The implementations by tool name."""
        return {
            "deploy": self.deploy,
            "write_file": self.write_file,
            "delete_table": self.delete_table,
            "send_email": self.send_email,
            "explode": self.explode,
        }


def schema(name: str, *params: str) -> dict[str, Any]:
    """A chat-completions function tool taking string parameters."""
    props = {p: {"type": "string"} for p in params}
    return {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {"type": "object", "properties": props, "required": list(params)},
        },
    }


TOOLS = [
    schema("deploy", "service", "version"),
    schema("write_file", "path", "text"),
    schema("delete_table", "table"),
    schema("send_email", "to", "body"),
    schema("explode"),
    HUMAN_INTERVENTION_TOOL,
]

MIXED = [
    call("call_deploy", "deploy", {"service": "api", "version": "1.2"}),
    call("call_write", "write_file", {"path": "notes.txt", "text": "hello"}),
    call("call_drop", "delete_table", {"table": "users"}),
    call("call_mail", "send_email", {"to": "all@example.com", "body": "hi"}),
]

DBS = ["Postgres", "SQLite", "MySQL"]


async def pending(person: Backend, count: int, wait_s: float = 5.0) -> list[Request]:
    """The pending requests, once the agent has opened ``count`` of them."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while loop.time() < deadline:
        page = await person.list_requests(RequestQuery(status="pending"))
        if len(page.items) >= count:
            assert len(page.items) == count
            return page.items
        await asyncio.sleep(0.01)
    raise AssertionError(f"the agent never opened {count} requests")


def by_call_id(requests: list[Request]) -> dict[str, Request]:
    """Approval requests keyed by the model's call id."""
    return {r.tool_call_id or "": r for r in requests if isinstance(r, ApprovalRequest)}


async def decide_mixed(person: Backend) -> None:
    """A person approves one call, edits one, rejects one and answers one in words."""
    asked = by_call_id(await pending(person, 4))
    await person.decide(asked["call_deploy"].id, {"type": "approve"})
    edited = {"path": "notes.txt", "text": "hello, reviewed"}
    await person.decide(asked["call_write"].id, {"type": "approve", "args": edited})
    await person.decide(asked["call_drop"].id, {"type": "reject", "reason": "prod data"})
    await person.decide(asked["call_mail"].id, {"type": "respond", "feedback": "Use the list."})


async def run_loop(
    sides: Sides,
    client: openai.AsyncOpenAI,
    tools: Tools,
    person: Callable[[Backend], Awaitable[None]] | None,
    *,
    timeout: float = 10.0,
) -> list[dict[str, Any]]:
    """Run the loop while the person decides over their own transport; the final history."""
    loop = run_tools_with_approval(
        client,
        "fake-model",
        [{"role": "user", "content": "Ship it."}],
        TOOLS,
        tools.table(),
        signoff=sides.agent,
        session_id="sess-1",
        timeout=timeout,
    )
    if person is None:
        return await loop
    history: list[dict[str, Any]]
    history, _ = await asyncio.gather(loop, person(sides.person))
    return history


def assert_clean(fake: FakeChat) -> None:
    """No request id, state or envelope of signoff's reached the model; only the edit note."""
    for raw in fake.raw:
        assert "req_" not in raw
        assert "status" not in raw
        assert "signoff" not in raw


async def test_mixed_decisions_on_parallel_calls(sides: Sides, http: Http) -> None:
    """Approve runs, edit runs the edit with a note, reject denies, respond gives the text."""
    fake = FakeChat(MIXED, "All handled.")
    tools = Tools()

    history = await run_loop(sides, http(fake), tools, decide_mixed)

    assert history[-1] == {"role": "assistant", "content": "All handled."}
    assert len(fake.bodies) == 2
    sent = fake.tool_messages()
    assert list(sent) == ["call_deploy", "call_write", "call_drop", "call_mail"]
    assert sent["call_deploy"] == "deployed api 1.2"
    assert sent["call_write"] == (
        '{"path": "notes.txt", "bytes": 15}\n\n' + EDIT_NOTE + " The call ran with "
        '{"path": "notes.txt", "text": "hello, reviewed"} instead of '
        '{"path": "notes.txt", "text": "hello"}.'
    )
    assert sent["call_drop"] == "A person rejected this call: prod data. It was not run."
    assert sent["call_mail"] == "Use the list."
    assert tools.ran == [
        ("deploy", {"service": "api", "version": "1.2"}),
        ("write_file", {"path": "notes.txt", "text": "hello, reviewed"}),
    ]
    page = await sides.person.list_requests(RequestQuery(session_id="sess-1"))
    states = {r.tool_call_id: r.status for r in page.items if isinstance(r, ApprovalRequest)}
    assert states == {
        "call_deploy": "completed",
        "call_write": "completed",
        "call_drop": "rejected",
        "call_mail": "rejected",
    }


async def test_history_sent_to_the_model_has_no_protocol(sides: Sides, http: Http) -> None:
    """Every body the model received is free of request ids, states and signoff envelopes."""
    fake = FakeChat(MIXED, "All handled.")
    history = await run_loop(sides, http(fake), Tools(), decide_mixed)

    assert_clean(fake)
    tool_entries = [m for m in history if m["role"] == "tool"]
    assert all(set(m) == {"role", "tool_call_id", "content"} for m in tool_entries)
    assert fake.bodies[1]["messages"][1]["tool_calls"][0]["id"] == "call_deploy"


async def test_choice_tool_returns_only_the_option_text(sides: Sides, http: Http) -> None:
    """An answer outside the options is refused; the model gets only the chosen text."""
    args = {"prompt": "Which database?", "options": DBS, "context": "The nightly job is slow."}
    fake = FakeChat([call("call_pick", "human_intervention_request", args)], "Migrating.")

    async def person(backend: Backend) -> None:
        [request] = await pending(backend, 1)
        assert request.kind == "choice" and request.options == tuple(DBS)
        with pytest.raises(InvalidDecision):
            await backend.decide(request.id, {"type": "choose", "choice": "Oracle"})
        assert (await backend.get(request.id)).status == "pending"
        await backend.decide(request.id, {"type": "choose", "choice": "SQLite"})

    await run_loop(sides, http(fake), Tools(), person)

    assert fake.tool_messages() == {"call_pick": "SQLite"}
    assert "Oracle" not in fake.raw[-1]
    assert_clean(fake)


async def test_multi_select_choice_is_a_json_list(sides: Sides, http: Http) -> None:
    """With multi_select the model gets the chosen options as a JSON list, nothing more."""
    args = {"prompt": "Which regions?", "options": ["eu", "us", "ap"], "multi_select": True}
    fake = FakeChat([call("call_pick", "human_intervention_request", args)], "ok")

    async def person(backend: Backend) -> None:
        [request] = await pending(backend, 1)
        await backend.decide(request.id, {"type": "choose", "choices": ["eu", "ap"]})

    await run_loop(sides, http(fake), Tools(), person)

    assert json.loads(fake.tool_messages()["call_pick"]) == ["eu", "ap"]


async def test_bad_choice_arguments_are_told_to_the_model(sides: Sides, http: Http) -> None:
    """Choice calls with duplicate options or unknown arguments ask nobody; the model hears why."""
    dupes = {"prompt": "Which?", "options": ["a", "a"]}
    extra = {"prompt": "Which?", "options": ["a", "b"], "session_id": "other"}
    turn = [
        call("call_dupes", "human_intervention_request", dupes),
        call("call_extra", "human_intervention_request", extra),
    ]
    fake = FakeChat(turn, "ok")

    await run_loop(sides, http(fake), Tools(), None)

    sent = fake.tool_messages()
    assert "options must be distinct" in sent["call_dupes"]
    assert "takes no argument 'session_id'" in sent["call_extra"]
    assert (await sides.person.list_requests(RequestQuery())).items == []


async def test_bad_json_arguments_are_told_and_not_filed(sides: Sides, http: Http) -> None:
    """Arguments that are not a JSON object reach the model as a message; no request is filed."""
    turn = [
        call("call_bad", "deploy", '{"service": "api", '),
        call("call_list", "deploy", "[1, 2]"),
        call("call_ok", "deploy", {"service": "api", "version": "2"}),
    ]
    fake = FakeChat(turn, "done")

    async def person(backend: Backend) -> None:
        [request] = await pending(backend, 1)
        await backend.decide(request.id, {"type": "approve"})

    tools = Tools()
    await run_loop(sides, http(fake), tools, person)

    sent = fake.tool_messages()
    assert list(sent) == ["call_bad", "call_list", "call_ok"]
    assert sent["call_bad"].startswith("The arguments of deploy were not valid JSON")
    assert sent["call_list"].startswith("The arguments of deploy must be a JSON object")
    assert sent["call_ok"] == "deployed api 2"
    page = await sides.person.list_requests(RequestQuery())
    assert [r.tool_call_id for r in page.items if isinstance(r, ApprovalRequest)] == ["call_ok"]
    assert tools.ran == [("deploy", {"service": "api", "version": "2"})]


async def test_timeout_denies_and_withdraws(sides: Sides, http: Http) -> None:
    """Nobody decides in time: the call does not run, the request is withdrawn, the model told."""
    fake = FakeChat([MIXED[0]], "gave up")
    tools = Tools()

    await run_loop(sides, http(fake), tools, None, timeout=0.3)

    assert fake.tool_messages() == {
        "call_deploy": "No decision came in time, so the call was not run."
    }
    assert tools.ran == []
    [request] = (await sides.person.list_requests(RequestQuery())).items
    assert request.status == "canceled"


async def test_unanswered_choice_times_out(sides: Sides, http: Http) -> None:
    """A choice nobody makes in time tells the model there is no answer."""
    args = {"prompt": "Which?", "options": ["a", "b"]}
    fake = FakeChat([call("call_pick", "human_intervention_request", args)], "ok")

    await run_loop(sides, http(fake), Tools(), None, timeout=0.3)

    assert fake.tool_messages() == {"call_pick": NO_ANSWER}


async def test_tool_error_fails_the_request(sides: Sides, http: Http) -> None:
    """An approved tool that raises is reported failed, and the model hears the error."""
    fake = FakeChat([call("call_boom", "explode", {})], "sorry")

    async def person(backend: Backend) -> None:
        [request] = await pending(backend, 1)
        await backend.decide(request.id, {"type": "approve"})

    await run_loop(sides, http(fake), Tools(), person)

    assert fake.tool_messages() == {
        "call_boom": "The call ran and failed with RuntimeError: disk full"
    }
    [request] = (await sides.person.list_requests(RequestQuery())).items
    assert isinstance(request, ApprovalRequest) and request.status == "failed"
    assert request.result is not None and request.result.error == "RuntimeError: disk full"


async def test_requests_carry_the_tools_parameters_and_a_breaking_edit_is_422(
    sides: Sides, http: Http
) -> None:
    """Each request carries its tool's parameters schema from the tools list; an edit
    breaking it is 422 with the request pending, and a fitting edit then runs."""
    fake = FakeChat([MIXED[0]], "ok")
    tools = Tools()

    async def person(backend: Backend) -> None:
        [request] = await pending(backend, 1)
        assert isinstance(request, ApprovalRequest)
        assert request.args_schema == TOOLS[0]["function"]["parameters"]
        with pytest.raises(InvalidDecision, match="'version' is a required property"):
            await backend.decide(request.id, {"type": "approve", "args": {"service": "api"}})
        assert (await backend.get(request.id)).status == "pending"
        edit = {"service": "api", "version": "1.3"}
        await backend.decide(request.id, {"type": "approve", "args": edit})

    await run_loop(sides, http(fake), tools, person)
    assert tools.ran == [("deploy", {"service": "api", "version": "1.3"})]


async def test_edit_the_tool_cannot_take_is_refused(
    sides: Sides, http: Http, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Edited arguments that do not fit the function, on a request filed without a schema,
    never run; the request is failed."""
    monkeypatch.setattr(openai_messages, "tool_schemas", lambda tools: {})
    fake = FakeChat([MIXED[0]], "ok")
    tools = Tools()

    async def person(backend: Backend) -> None:
        [request] = await pending(backend, 1)
        await backend.decide(request.id, {"type": "approve", "args": {"service": "api"}})

    await run_loop(sides, http(fake), tools, person)

    assert fake.tool_messages()["call_deploy"].startswith(
        "A person approved this call with edited arguments the tool does not accept"
    )
    assert tools.ran == []
    [request] = (await sides.person.list_requests(RequestQuery())).items
    assert request.status == "failed"


async def test_unknown_tool_is_approved_but_never_runs(sides: Sides) -> None:
    """A call with no implementation is filed but, even approved, fails closed."""
    message = {"role": "assistant", "tool_calls": [_raw("call_x", "format_disk", {})]}

    async def person(backend: Backend) -> None:
        [request] = await pending(backend, 1)
        await backend.decide(request.id, {"type": "approve"})

    [sent], _ = await asyncio.gather(
        resolve_tool_calls(message, {}, signoff=sides.agent, session_id="s", timeout=5),
        person(sides.person),
    )
    assert sent["content"].startswith("The arguments do not fit the tool (there is no imp")
    [request] = (await sides.person.list_requests(RequestQuery())).items
    assert request.status == "failed"


def _raw(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A tool call as it appears in an assistant message dict."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


async def test_filing_again_neither_asks_nor_runs_twice() -> None:
    """The same message in the same session finds its requests: one request, one run."""
    service = memory_service()
    tools = Tools()
    message = {
        "role": "assistant",
        "content": "Deploying now.",
        "tool_calls": [_raw("call_deploy", "deploy", {"service": "api", "version": "3"})],
    }
    ids: list[list[str]] = []

    async def record(filed: list[str]) -> None:
        ids.append(filed)
        if len(ids) == 1:
            await service.decide(filed[0], {"type": "approve"}, APPROVER)

    kwargs: dict[str, Any] = {
        "signoff": service,
        "principal": AGENT,
        "session_id": "s",
        "on_submitted": record,
    }
    first = await resolve_tool_calls(message, tools.table(), **kwargs)
    second = await resolve_tool_calls(message, tools.table(), **kwargs)

    assert ids[0] == ids[1]
    assert (
        first
        == second
        == [{"role": "tool", "tool_call_id": "call_deploy", "content": "deployed api 3"}]
    )
    assert len(tools.ran) == 1
    request = await service.get(ids[0][0])
    assert request.context == {"assistant_said": "Deploying now."}


def test_strip_signoff_drops_marked_content_and_keys() -> None:
    """Internal messages, marked parts and signoff keys go; everything else stays as it was."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": INTERNAL_ROLE, "content": '{"request_id": "req_x", "status": "pending"}'},
        {"role": "assistant", "content": "note", INTERNAL_MARK: True},
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "ok",
            "signoff": {"request_id": "req_x", "status": "completed"},
            "signoff_request_id": "req_x",
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "keep", "signoff_seen": True},
                {"type": "text", "text": "req_x pending", INTERNAL_MARK: True},
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "x", INTERNAL_MARK: True}]},
    ]
    before = json.dumps(history)

    clean = strip_signoff(history)

    assert clean == [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "keep"}]},
        {"role": "user", "content": ""},
    ]
    assert json.dumps(history) == before
    assert "req_" not in json.dumps(clean)


async def test_loop_names_the_extra_when_openai_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the openai package the loop helper says which pip install fixes it."""
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ImportError, match=r"pip install 'signoff\[openai\]'"):
        await run_tools_with_approval(
            object(),  # type: ignore[arg-type]
            "m",
            [],
            [],
            {},
            signoff=memory_service(),
            principal=AGENT,
            session_id="s",
        )


def test_module_imports_without_openai() -> None:
    """Everything but the loop helper works with the openai package absent."""
    code = (
        "import sys; sys.modules['openai'] = None\n"
        "from signoff.integrations import openai_messages as m\n"
        "assert m.strip_signoff([{'role': 'signoff'}]) == []\n"
        "assert 'openai' not in [k for k, v in sys.modules.items() if v is not None]\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
