"""Attack: the model or the MCP client steers signoff mcp-proxy's approval prompt.

The link an MCP client is sent (URL-mode elicitation) is built from signoff's own address
and the request's id only: no tool name or argument the model chooses can point it
elsewhere or put markup in the prompt. And a client that can only answer forms decides
nothing unless the operator turned ``--form-elicitation`` on.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp", reason="needs the MCP SDK: pip install 'signoff[mcp]'")

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.context import ClientRequestContext

from signoff.server.app import API
from tests.serving import Server, agent_token, bearer, serve_for_module

CHILD = Path(__file__).resolve().parents[1] / "integrations" / "mcp_child.py"
EVIL = "https://evil.example/requests/req_0"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real server for the module; each test finds its requests by their arguments."""
    yield from serve_for_module(tmp_path_factory.mktemp("mcp_link_attacks"))


@pytest.fixture
async def api(server: Server) -> AsyncIterator[httpx.AsyncClient]:
    """The server's HTTP API as the admin."""
    assert server.admin_token is not None
    async with httpx.AsyncClient(
        base_url=server.base, headers=bearer(server.admin_token), timeout=30
    ) as http:
        yield http


async def _filed(api: httpx.AsyncClient, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    request: dict[str, Any]
    [request] = [
        r
        for r in (await api.get(f"{API}/requests", params={"limit": "200"})).json()["items"]
        if r["tool_name"] == tool and r["tool_args"] == args
    ]
    return request


@pytest.mark.parametrize(
    ("tool", "args", "extra", "base"),
    [
        ("delete_file", {"path": EVIL, "note": "<a href='https://evil.example'>open</a>"}, [], ""),
        (EVIL, {"url": EVIL}, [], ""),
        ("evil.example", {}, [], ""),
        ("<img src=x onerror=alert(1)>](https://evil.example)", {"n": 1}, [], ""),
        (
            "delete_file",
            {"path": "/tmp/p", "url": "javascript:alert(1)"},
            ["--public-url", "https://signoff.example.com/inbox"],
            "https://signoff.example.com/inbox",
        ),
    ],
)
async def test_the_link_is_always_signoffs_own_page_for_the_request(
    server: Server,
    api: httpx.AsyncClient,
    tmp_path: Path,
    tool: str,
    args: dict[str, Any],
    extra: list[str],
    base: str,
) -> None:
    """Whatever the tool name and arguments, the link is {signoff}/requests/{id}?via=mcp-url
    and the prompt carries none of the model's text but a listed, well-formed tool name."""
    shown: list[types.ElicitRequestURLParams] = []

    async def decline(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        shown.append(params)
        return types.ElicitResult(action="decline")

    log = tmp_path / "calls.jsonl"
    proxy = [
        "-m",
        "signoff",
        "mcp-proxy",
        "--server",
        server.base,
        "--token",
        agent_token(server),
        *extra,
        "--",
        sys.executable,
        str(CHILD),
        str(log),
    ]
    params = StdioServerParameters(command=sys.executable, args=proxy, env=server.env)
    async with Client(params, mode="legacy", cache=None, elicitation_callback=decline) as client:
        result = await client.call_tool(tool, args)
    assert result.is_error
    request = await _filed(api, tool, args)
    assert request["status"] == "canceled"
    [link] = shown
    assert link.url == f"{base or server.base}/requests/{request['id']}?via=mcp-url"
    assert "evil" not in link.message and "<" not in link.message
    assert "javascript" not in link.message
    named = "delete_file" if tool == "delete_file" else "a tool"
    assert f"The call to {named} waits" in link.message
    assert not log.exists()


class FormOnlyClient:
    """A raw MCP client over stdio that declares only form elicitation and approves any form."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.asked: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        """Write one JSON-RPC message."""
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
        await self.process.stdin.drain()

    async def answer_of(self, request_id: int) -> dict[str, Any]:
        """Read until the response to ``request_id``, approving every form asked meanwhile."""
        assert self.process.stdout is not None
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), 60)
            assert line, "the proxy closed stdout"
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == request_id and "method" not in message:
                return message
            if message.get("method") == "elicitation/create":
                self.asked.append(message["params"])
                content = {"approve": True}
                result = {"action": "accept", "content": content}
                await self.send({"id": message["id"], "result": result})
            elif "method" in message and "id" in message:
                await self.send({"id": message["id"], "result": {}})

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """Initialize (form mode only), then call ``tool``; its result."""
        capabilities: dict[str, Any] = {"elicitation": {"form": {}}}
        await self.send(
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": capabilities,
                    "clientInfo": {"name": "form-only-host", "version": "1"},
                },
            }
        )
        assert "result" in await self.answer_of(1)
        await self.send({"method": "notifications/initialized"})
        await self.send(
            {"id": 2, "method": "tools/call", "params": {"name": tool, "arguments": args}}
        )
        answer = await self.answer_of(2)
        result: dict[str, Any] = answer["result"]
        return result


async def _form_only_call(
    server: Server, log: Path, args: dict[str, Any], *extra: str
) -> tuple[FormOnlyClient, dict[str, Any]]:
    """The form-only client calls delete_file through a proxy on the server's database."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *["-m", "signoff", "mcp-proxy", "--db", server.db, "--hold", "2", *extra],
        *["--", sys.executable, str(CHILD), str(log)],
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=server.env,
    )
    client = FormOnlyClient(process)
    try:
        return client, await client.call("delete_file", args)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 20)
        except TimeoutError:
            process.kill()
            await process.wait()


async def test_a_form_only_client_decides_nothing_without_form_elicitation(
    server: Server, api: httpx.AsyncClient, tmp_path: Path
) -> None:
    """A client declaring only form mode, eager to approve, is never asked and decides
    nothing (even on --db, where the local user could approve); --form-elicitation asks it,
    and its answer is then on the record as the MCP client's."""
    log = tmp_path / "calls.jsonl"
    off = {"path": "/tmp/form-off"}
    client, result = await _form_only_call(server, log, off)
    assert client.asked == []
    assert result["isError"] and result["structuredContent"]["status"] == "pending"
    request = await _filed(api, "delete_file", off)
    assert request["status"] == "pending" and request["decision"] is None
    assert "elicitation" not in request["context"]
    assert not log.exists()
    reject = {"type": "reject", "reason": "test over"}
    decided = await api.post(f"{API}/requests/{request['id']}/decision", json=reject)
    assert decided.status_code == 200, decided.text

    on = {"path": "/tmp/form-on"}
    client, result = await _form_only_call(server, log, on, "--form-elicitation")
    assert len(client.asked) == 1 and client.asked[0].get("mode", "form") == "form"
    assert not result.get("isError"), result
    request = await _filed(api, "delete_file", on)
    assert request["status"] == "completed"
    assert request["decision"]["via"] == "mcp-elicitation"
    assert request["decision"]["client"] == "form-only-host"
