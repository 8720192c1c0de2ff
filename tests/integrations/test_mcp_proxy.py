"""signoff mcp-proxy in front of a real MCP server, driven by the official MCP client.

The client launches ``signoff mcp-proxy`` over stdio; the proxy launches
``tests/integrations/mcp_child.py``, which logs every call it runs. Decisions are made over
the HTTP API of a real ``signoff serve`` (or in the client, by elicitation).
"""

from __future__ import annotations

import asyncio
import json
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
from mcp.client.context import ClientRequestContext
from mcp.client.session import ElicitationFnT
from mcp.client.streamable_http import streamable_http_client

from signoff.server.app import API
from tests.integrations.mcp_testing import decide, guarded_http_server, pending_request, text
from tests.serving import Server, agent_token, bearer, free_port

CHILD = Path(__file__).with_name("mcp_child.py")
README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _readme_proxy_config() -> str:
    """The README's ``mcpServers`` block that wraps the filesystem server in the proxy."""
    blocks = [b.split("```", 1)[0] for b in README.split("```json\n")[1:]]
    return next(b for b in blocks if '"filesystem"' in b and "mcp-proxy" in b)


def calls(log: Path) -> list[dict[str, Any]]:
    """What the wrapped server ran, in order."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def proxy_args(server: Server, token: str, log: Path, *extra: str) -> list[str]:
    """``signoff mcp-proxy`` against ``server`` wrapping the test child."""
    return [
        "-m",
        "signoff",
        "mcp-proxy",
        "--server",
        server.base,
        "--token",
        token,
        *extra,
        "--",
        sys.executable,
        str(CHILD),
        str(log),
    ]


@asynccontextmanager
async def proxied(
    server: Server,
    log: Path,
    *extra: str,
    mode: str = "auto",
    elicit: ElicitationFnT | None = None,
) -> AsyncIterator[Client]:
    """An MCP client session with the proxy (as an agent of ``server``) over stdio."""
    params = StdioServerParameters(
        command=sys.executable,
        args=proxy_args(server, agent_token(server), log, *extra),
        env=server.env,
    )
    async with Client(params, mode=mode, cache=None, elicitation_callback=elicit) as client:
        yield client


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """The file the wrapped server logs its calls to."""
    return tmp_path / "calls.jsonl"


async def test_allowed_tools_resources_and_prompts_pass_straight_through(
    server: Server, api: httpx.AsyncClient, log: Path
) -> None:
    """A readOnlyHint tool runs at once with no request filed; resources and prompts pass."""
    async with proxied(server, log) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == ["read_note", "delete_file", "send_email", "crash", "wipe", "signoff_await"]
        result = await client.call_tool("read_note", {"name": "groceries"})
        assert not result.is_error and text(result) == "note groceries: buy milk"
        resource = await client.read_resource("note://groceries")
        assert isinstance(resource.contents[0], types.TextResourceContents)
        assert resource.contents[0].text == "buy milk"
        prompt = await client.get_prompt("greet", {"name": "Ada"})
        assert isinstance(prompt.messages[0].content, types.TextContent)
        assert prompt.messages[0].content.text == "Say hello to Ada"
    assert calls(log) == [{"tool": "read_note", "args": {"name": "groceries"}}]
    assert (await api.get(f"{API}/requests")).json()["items"] == []


async def test_a_gated_call_waits_and_runs_once_after_approval_over_http(
    server: Server, api: httpx.AsyncClient, log: Path
) -> None:
    """A destructiveHint call waits; approved over HTTP, it runs once and is completed."""
    async with proxied(server, log) as client:
        call = asyncio.create_task(client.call_tool("delete_file", {"path": "/tmp/old.log"}))
        request = await pending_request(api)
        assert request["tool_name"] == "delete_file"
        assert request["tool_args"] == {"path": "/tmp/old.log"}
        assert calls(log) == [], "nothing runs before the approval"
        await decide(api, request["id"], {"type": "approve"})
        result = await call
    assert not result.is_error and text(result) == "deleted /tmp/old.log"
    assert calls(log) == [{"tool": "delete_file", "args": {"path": "/tmp/old.log"}}]
    done = (await api.get(f"{API}/requests/{request['id']}")).json()
    assert done["status"] == "completed"
    assert done["claimed_by"] == "bot"


async def test_edited_arguments_are_what_reaches_the_wrapped_server(
    server: Server, api: httpx.AsyncClient, log: Path
) -> None:
    """The person's edited args run, not the model's, and the model is told."""
    async with proxied(server, log) as client:
        call = asyncio.create_task(
            client.call_tool("send_email", {"to": "all@corp.example", "body": "hi"})
        )
        request = await pending_request(api)
        edited = {"to": "team@corp.example", "body": "hi"}
        await decide(api, request["id"], {"type": "approve", "args": edited})
        result = await call
    assert calls(log) == [{"tool": "send_email", "args": edited}]
    assert text(result).startswith("sent to team@corp.example")
    assert "a person edited the arguments" in text(result)


async def test_requests_carry_the_tools_input_schema_and_a_breaking_edit_is_422(
    server: Server, api: httpx.AsyncClient, log: Path
) -> None:
    """The request carries the wrapped tool's inputSchema; an edit breaking it is 422, the
    request stays pending and nothing runs until a fitting edit is approved."""
    async with proxied(server, log) as client:
        listed = {t.name: t.input_schema for t in (await client.list_tools()).tools}
        call = asyncio.create_task(
            client.call_tool("send_email", {"to": "all@corp.example", "body": "hi"})
        )
        request = await pending_request(api)
        assert request["args_schema"] == listed["send_email"]
        bad = {"to": ["a@corp.example", "b@corp.example"], "body": "hi"}
        refused = await api.post(
            f"{API}/requests/{request['id']}/decision", json={"type": "approve", "args": bad}
        )
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"] == "InvalidDecision"
        assert "args/to" in refused.json()["detail"]
        again = (await api.get(f"{API}/requests/{request['id']}")).json()
        assert again["status"] == "pending"
        assert calls(log) == []
        edited = {"to": "team@corp.example", "body": "hi"}
        await decide(api, request["id"], {"type": "approve", "args": edited})
        await call
    assert calls(log) == [{"tool": "send_email", "args": edited}]


async def test_a_rejection_reaches_the_client_as_a_tool_error_with_the_reason(
    server: Server, api: httpx.AsyncClient, log: Path
) -> None:
    """Rejected: an isError result carrying the reason, and nothing runs."""
    async with proxied(server, log) as client:
        call = asyncio.create_task(client.call_tool("delete_file", {"path": "/etc"}))
        request = await pending_request(api)
        await decide(api, request["id"], {"type": "reject", "reason": "never touch /etc"})
        result = await call
    assert result.is_error
    assert "never touch /etc" in text(result)
    assert calls(log) == []


async def test_an_undecided_call_returns_its_id_and_signoff_await_finishes_it(
    server: Server, api: httpx.AsyncClient, log: Path
) -> None:
    """Past the hold the model gets the id; signoff_await runs it once after approval."""
    async with proxied(server, log, "--hold", "1") as client:
        first = await client.call_tool("delete_file", {"path": "/tmp/a"})
        assert first.is_error and first.structured_content is not None
        request_id = first.structured_content["request_id"]
        assert first.structured_content["status"] == "pending"
        assert f'signoff_await with {{"request_id": "{request_id}"}}' in text(first)
        again = await client.call_tool("signoff_await", {"request_id": request_id})
        assert again.is_error and again.structured_content == first.structured_content
        assert calls(log) == []
        await decide(api, request_id, {"type": "approve"})
        done = await client.call_tool("signoff_await", {"request_id": request_id})
        assert not done.is_error and text(done) == "deleted /tmp/a"
        repeat = await client.call_tool("signoff_await", {"request_id": request_id})
        assert text(repeat) == "deleted /tmp/a"
        unknown = await client.call_tool("signoff_await", {"request_id": "req_nope"})
        assert unknown.is_error
    assert calls(log) == [{"tool": "delete_file", "args": {"path": "/tmp/a"}}], "ran once"


async def test_explicit_rules_win_over_the_servers_annotations(
    server: Server, api: httpx.AsyncClient, log: Path, tmp_path: Path
) -> None:
    """A rule asks for a readOnlyHint tool, allows a destructive one, denies another."""
    policy = tmp_path / "tools.toml"
    policy.write_text(
        '[[rules]]\ntool = "read_note"\nargs = { name = "secret*" }\naction = "ask"\n\n'
        '[[rules]]\ntool = "delete_file"\nargs = { path = "/tmp/*" }\naction = "allow"\n\n'
        '[[rules]]\ntool = "send_email"\naction = "deny"\nname = "no-mail"\n'
    )
    async with proxied(server, log, "--policy", str(policy), "--hold", "1") as client:
        allowed = await client.call_tool("delete_file", {"path": "/tmp/x"})
        assert text(allowed) == "deleted /tmp/x"
        denied = await client.call_tool("send_email", {"to": "a", "body": "b"})
        assert denied.is_error and 'rules[2] "no-mail"' in text(denied)
        asked = await client.call_tool("read_note", {"name": "secret-plans"})
        assert asked.is_error and asked.structured_content is not None
        hinted = await client.call_tool("read_note", {"name": "groceries"})
        assert not hinted.is_error
    assert [c["tool"] for c in calls(log)] == ["delete_file", "read_note"]
    assert (await pending_request(api))["tool_args"] == {"name": "secret-plans"}


async def test_ignore_hints_asks_for_a_read_only_tool(
    server: Server, api: httpx.AsyncClient, log: Path
) -> None:
    """With --ignore-hints, readOnlyHint no longer lets a call through (fail closed)."""
    async with proxied(server, log, "--ignore-hints", "--hold", "1") as client:
        result = await client.call_tool("read_note", {"name": "groceries"})
    assert result.is_error and result.structured_content is not None
    assert calls(log) == []


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("approve", [True, False])
async def test_elicitation_decides_in_the_client(
    server: Server, api: httpx.AsyncClient, log: Path, mode: str, approve: bool
) -> None:
    """The client's approve / reject answer decides, recorded as the approver's decision."""
    asked: list[str] = []

    async def answer(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        asked.append(params.message)
        content: dict[str, str | int | float | bool | list[str] | None] = {
            "approve": approve,
            "reason": "not on a Friday",
        }
        return types.ElicitResult(action="accept", content=content)

    admin = server.admin_token
    assert admin is not None
    async with proxied(
        server, log, "--form-elicitation", "--approver-token", admin, mode=mode, elicit=answer
    ) as client:
        result = await client.call_tool("delete_file", {"path": "/tmp/b"})
    assert len(asked) == 1 and "delete_file" in asked[0] and "/tmp/b" in asked[0]
    listed = (await api.get(f"{API}/requests")).json()["items"]
    assert len(listed) == 1
    decision = listed[0]["decision"]
    assert decision["decided_by"] == "admin"
    if approve:
        assert not result.is_error and text(result) == "deleted /tmp/b"
        assert listed[0]["status"] == "completed"
        assert calls(log) == [{"tool": "delete_file", "args": {"path": "/tmp/b"}}]
    else:
        assert result.is_error and "not on a Friday" in text(result)
        assert listed[0]["status"] == "rejected"
        assert calls(log) == []


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_inbox_deciding_first_wins_over_a_later_elicitation_answer(
    server: Server, api: httpx.AsyncClient, log: Path, mode: str
) -> None:
    """The inbox approves while the client's prompt is open; the late reject is ignored."""
    approved = asyncio.Event()

    async def late_reject(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        await approved.wait()
        return types.ElicitResult(action="accept", content={"approve": False, "reason": "late"})

    admin = server.admin_token
    assert admin is not None
    async with proxied(
        server,
        log,
        "--form-elicitation",
        "--approver-token",
        admin,
        mode=mode,
        elicit=late_reject,
    ) as client:
        call = asyncio.create_task(client.call_tool("delete_file", {"path": "/tmp/c"}))
        request = await pending_request(api)
        await decide(api, request["id"], {"type": "approve"})
        approved.set()
        result = await call
    assert not result.is_error and text(result) == "deleted /tmp/c"
    assert calls(log) == [{"tool": "delete_file", "args": {"path": "/tmp/c"}}]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_without_form_elicitation_the_client_only_gets_a_link(
    server: Server, api: httpx.AsyncClient, log: Path, mode: str
) -> None:
    """Without --form-elicitation no form is offered; the client's accept decides nothing."""
    shown: list[types.ElicitRequestParams] = []

    async def link_only(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        shown.append(params)
        return types.ElicitResult(action="accept", content={"approve": True})

    async with proxied(server, log, "--hold", "1", mode=mode, elicit=link_only) as client:
        result = await client.call_tool("delete_file", {"path": "/tmp/d"})
    assert result.is_error and result.structured_content is not None
    assert len(shown) == 1 and isinstance(shown[0], types.ElicitRequestURLParams)
    assert (await pending_request(api))["status"] == "pending"
    assert calls(log) == []


async def test_a_crashing_wrapped_server_gives_a_clear_error_and_is_restarted(
    server: Server, api: httpx.AsyncClient, log: Path
) -> None:
    """The call in flight gets a clear error; the child is started again and serves on."""
    async with proxied(server, log) as client:
        crashed = await client.call_tool("crash", {})
        assert crashed.is_error
        assert "exited during the call" in text(crashed)
        assert "starting it again" in text(crashed)
        for _ in range(100):  # the restart takes a moment
            result = await client.call_tool("read_note", {"name": "after"})
            if not result.is_error:
                break
            await asyncio.sleep(0.1)
        assert text(result) == "note after: buy milk"
        gated = asyncio.create_task(client.call_tool("wipe", {"target": "db"}))
        request = await pending_request(api)
        await decide(api, request["id"], {"type": "approve"})
        failed = await gated
        assert failed.is_error and "not run again" in text(failed)
        record = (await api.get(f"{API}/requests/{request['id']}")).json()
        assert record["status"] == "failed"
        assert "not run again" in record["result"]["error"]
    assert [c["tool"] for c in calls(log)] == ["crash", "read_note", "wipe"]


async def test_streamable_http_needs_the_bearer_token(
    server: Server, log: Path, tmp_path: Path
) -> None:
    """--http serves the same tools at /mcp, and only to a client with the token."""
    port = free_port()
    token = "test-mcp-token"
    args = proxy_args(server, agent_token(server), log)
    at = args.index("--")
    args[at:at] = ["--http", "--port", str(port), "--http-token", token]
    async with (
        guarded_http_server(args, server.env, port) as url,
        httpx2.AsyncClient(headers=bearer(token), timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), cache=None) as client,
    ):
        result = await client.call_tool("read_note", {"name": "web"})
    assert text(result) == "note web: buy milk"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "Missing argument"),
        (["--", "no-such-command-xyz"], "cannot run 'no-such-command-xyz'"),
        (["--policy", "/nonexistent/tools.toml", "--", "true"], "cannot be read"),
        (["--", sys.executable, "-c", "pass"], "cannot start the MCP server"),
        (
            ["--form-elicitation", "--approver-token", "so_x", "--", "true"],
            "--approver-token goes with --server",
        ),
        (["--approver-token", "so_x", "--", "true"], "goes with --form-elicitation"),
        (
            ["--server", "http://127.0.0.1:9", "--form-elicitation", "--", "true"],
            "--form-elicitation with --server needs --approver-token",
        ),
        (["--public-url", "javascript:alert(1)", "--", "true"], "must be an http(s) URL"),
        (["--public-url", "https://u:p@example.com", "--", "true"], "without credentials"),
        (["--public-url", "https://example.com/?next=x", "--", "true"], "without credentials"),
    ],
)
def test_bad_invocations_are_one_line_errors(server: Server, args: list[str], message: str) -> None:
    """Usage mistakes exit non-zero with one line on stderr, never a traceback."""
    done = subprocess.run(
        [sys.executable, "-m", "signoff", "mcp-proxy", "--db", server.db, *args],
        capture_output=True,
        text=True,
        env=server.env,
        timeout=60,
        check=False,
    )
    assert done.returncode in (2, 3, 64), done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


async def test_the_readmes_desktop_config_works_as_written(
    server: Server, api: httpx.AsyncClient, log: Path
) -> None:
    """The README's mcpServers block, pointed at this server and the test child, runs."""
    config = json.loads(_readme_proxy_config())
    entries = config["mcpServers"]
    assert set(entries) == {"filesystem", "ask-a-person"}
    admin = server.admin_token
    assert admin is not None
    env = {**server.env, "SIGNOFF_URL": server.base, "SIGNOFF_TOKEN": agent_token(server)}
    proxy_entry = entries["filesystem"]
    args = [a.replace("so_YOUR_APPROVER_TOKEN", admin) for a in proxy_entry["args"]]
    args = [*args[: args.index("--") + 1], sys.executable, str(CHILD), str(log)]
    assert set(proxy_entry["env"]) == {"SIGNOFF_URL", "SIGNOFF_TOKEN"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "signoff", *args], env=env)
    async with Client(params, cache=None) as client:
        call = asyncio.create_task(client.call_tool("delete_file", {"path": "/tmp/e"}))
        request = await pending_request(api)
        await decide(api, request["id"], {"type": "approve"})
        assert text(await call) == "deleted /tmp/e"
    asker = entries["ask-a-person"]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "signoff", *asker["args"]], env=env
    )
    async with Client(params, cache=None) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert names == {"human_intervention_request", "request_human_input", "signoff_await"}


async def test_on_a_local_database_the_service_keeps_the_hint_default(
    tmp_path: Path, log: Path
) -> None:
    """On --db, a destructiveHint tool that need_approval does not list still waits for a
    person (the service applies the same hinted policy), and `signoff approve` runs it."""
    policy = tmp_path / "tools.toml"
    policy.write_text('[tools]\nneed_approval = ["send_email"]\n')
    db = f"sqlite:///{tmp_path / 'local.db'}"
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200"}
    args = [
        "-m",
        "signoff",
        "mcp-proxy",
        "--db",
        db,
        "--policy",
        str(policy),
        "--hold",
        "1",
        "--no-elicit",
        "--",
        sys.executable,
        str(CHILD),
        str(log),
    ]
    params = StdioServerParameters(command=sys.executable, args=args, env=env)
    async with Client(params, cache=None) as client:
        first = await client.call_tool("delete_file", {"path": "/tmp/f"})
        assert first.is_error and first.structured_content is not None
        request_id = first.structured_content["request_id"]
        assert calls(log) == []
        approve = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "signoff", "approve", request_id, "--db", db],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert approve.returncode == 0, approve.stderr
        done = await client.call_tool("signoff_await", {"request_id": request_id})
        assert text(done) == "deleted /tmp/f"
        unlisted = await client.call_tool("send_email", {"to": "a", "body": "b"})
        assert unlisted.is_error and unlisted.structured_content is not None
    assert calls(log) == [{"tool": "delete_file", "args": {"path": "/tmp/f"}}]


READ_ONLY = types.ToolAnnotations(read_only_hint=True)
DESTRUCTIVE = types.ToolAnnotations(destructive_hint=True)
BOTH = types.ToolAnnotations(read_only_hint=True, destructive_hint=True)


@pytest.mark.parametrize(
    ("toml", "hints", "verdict"),
    [
        ("", READ_ONLY, "allow"),
        ("", DESTRUCTIVE, "ask"),
        ("", None, "ask"),
        ("", BOTH, "ask"),
        ('[[rules]]\ntool = "t"\naction = "ask"\n', READ_ONLY, "ask"),
        ('[[rules]]\ntool = "t"\naction = "deny"\n', READ_ONLY, "deny"),
        ('[[rules]]\ntool = "t"\naction = "allow"\n', DESTRUCTIVE, "allow"),
        ('[tools]\ndefault = "allow"\n', DESTRUCTIVE, "ask"),
        ('[tools]\nneed_approval = ["x"]\n', DESTRUCTIVE, "ask"),
        ('[tools]\nneed_approval = ["t"]\n', READ_ONLY, "ask"),
    ],
)
def test_hinted_policy_puts_rules_first_and_hints_before_defaults(
    toml: str, hints: types.ToolAnnotations | None, verdict: str
) -> None:
    """Rules and need_approval beat annotations; annotations beat defaults; both hints: ask."""
    from signoff.domain.policies import Policy
    from signoff.integrations.mcp.proxy import HintedPolicy

    policy = HintedPolicy(Policy.from_toml(toml))
    if hints is not None:
        policy.hints["t"] = hints
    assert policy.evaluate("t", {}).verdict == verdict
    policy.trust_hints = False
    assert policy.evaluate("t", {}).verdict == Policy.from_toml(toml).evaluate("t", {}).verdict
