"""Attack: the MCP client (the model's host app) answers signoff mcp-proxy's approval prompt.

With ``--form-elicitation --approver-token`` the client's own elicitation prompt can decide.
That is a trust the operator gives away on purpose, so such decisions must be on the record
as made in the MCP client (``via: mcp-elicitation`` and the client's self-reported name),
never look like the person's inbox; an agent token can never be that approver; and the
README's desktop config must not hand the client an approver token.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp", reason="needs the MCP SDK: pip install 'signoff[mcp]'")

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.context import ClientRequestContext

from signoff.server.app import API
from tests.integrations.mcp_testing import decide, pending_request, text
from tests.serving import Server, agent_token, bearer

CHILD = Path(__file__).resolve().parents[1] / "integrations" / "mcp_child.py"
README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _readme_proxy_config() -> str:
    """The README's ``mcpServers`` block that wraps the filesystem server in the proxy."""
    blocks = [b.split("```", 1)[0] for b in README.split("```json\n")[1:]]
    return next(b for b in blocks if '"filesystem"' in b and "mcp-proxy" in b)


HOST = "sneaky-host-app"


def _proxy(server: Server, log: Path, *extra: str) -> StdioServerParameters:
    args = [
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
    return StdioServerParameters(command=sys.executable, args=args, env=server.env)


@pytest.fixture
async def api(server: Server) -> AsyncIterator[httpx.AsyncClient]:
    """The server's HTTP API as the admin (the person deciding in the inbox)."""
    assert server.admin_token is not None
    async with httpx.AsyncClient(
        base_url=server.base, headers=bearer(server.admin_token), timeout=30
    ) as http:
        yield http


async def _approve_in_client(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": True})


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_decision_made_in_the_mcp_client_is_recorded_as_such(
    server: Server, api: httpx.AsyncClient, tmp_path: Path, mode: str
) -> None:
    """The client's approval is recorded via mcp-elicitation with its name, in record and audit."""
    admin = server.admin_token
    assert admin is not None
    params = _proxy(
        server, tmp_path / "calls.jsonl", "--form-elicitation", "--approver-token", admin
    )
    async with Client(
        params,
        mode=mode,
        cache=None,
        elicitation_callback=_approve_in_client,
        client_info=types.Implementation(name=HOST, version="6.6.6"),
    ) as client:
        result = await client.call_tool("delete_file", {"path": "/tmp/x"})
    assert not result.is_error, text(result)
    request = (await api.get(f"{API}/requests")).json()["items"][0]
    decision = request["decision"]
    assert decision["via"] == "mcp-elicitation" and decision["client"] == HOST
    assert decision["decided_by"] == "admin"
    audit = (await api.get(f"{API}/audit", params={"request_id": request["id"]})).json()
    decided = [e for e in audit["items"] if e["action"] == "decide"]
    assert len(decided) == 1
    assert decided[0]["details"]["via"] == "mcp-elicitation"
    assert decided[0]["details"]["client"] == HOST


async def test_an_inbox_decision_is_not_recorded_as_the_clients(
    server: Server, api: httpx.AsyncClient, tmp_path: Path
) -> None:
    """While the client's prompt is open, the inbox decides: recorded as a person, no client."""
    answered = asyncio.Event()

    async def late(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        await answered.wait()
        return types.ElicitResult(action="accept", content={"approve": True})

    admin = server.admin_token
    assert admin is not None
    params = _proxy(
        server, tmp_path / "calls.jsonl", "--form-elicitation", "--approver-token", admin
    )
    async with Client(params, mode="legacy", cache=None, elicitation_callback=late) as client:
        call = asyncio.create_task(client.call_tool("delete_file", {"path": "/tmp/y"}))
        pending = await pending_request(api)
        await decide(api, pending["id"], {"type": "reject", "reason": "inbox says no"})
        answered.set()
        result = await call
    assert result.is_error and "inbox says no" in text(result)
    decision = (await api.get(f"{API}/requests/{pending['id']}")).json()["decision"]
    assert decision["via"] == "person" and decision["client"] is None


def test_an_agent_token_cannot_be_the_approver(server: Server, tmp_path: Path) -> None:
    """--approver-token with an agent's token: exit 3 and one line at start, nothing served."""
    bot = agent_token(server, "sly")
    done = subprocess.run(
        [
            sys.executable,
            *_proxy(
                server, tmp_path / "calls.jsonl", "--form-elicitation", "--approver-token", bot
            ).args,
        ],
        capture_output=True,
        text=True,
        env=server.env,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --approver-token belongs to sly")
    assert done.stdout == ""


@pytest.mark.parametrize(
    "query",
    [
        {"via": "policy"},
        {"via": "grant"},
        {"via": "expiry"},
        {"client": "x"},
        {"via": "mcp-elicitation", "client": ""},
        {"via": "mcp-elicitation", "client": "x" * 201},
    ],
)
def test_a_decider_cannot_claim_another_channel(
    server: Server, tmp_path: Path, query: dict[str, str]
) -> None:
    """?via= accepts only person or mcp-elicitation, and client only with the latter: 422."""
    bot = agent_token(server)
    with httpx.Client(base_url=server.base, timeout=30) as http:
        made = http.post(
            f"{API}/requests", json={"session_id": "s", "tool_name": "t"}, headers=bearer(bot)
        )
        rid = made.json()["id"]
        answer = http.post(
            f"{API}/requests/{rid}/decision",
            params=query,
            json={"type": "approve"},
            headers=bearer(server.admin_token or ""),
        )
        assert answer.status_code == 422, answer.text
        assert set(answer.json()) == {"error", "detail"}
        assert http.get(f"{API}/requests/{rid}", headers=bearer(bot)).json()["status"] == (
            "pending"
        )


async def test_the_readmes_desktop_config_gives_the_client_no_approval(
    server: Server, api: httpx.AsyncClient, tmp_path: Path
) -> None:
    """The README's mcpServers proxy lets the client decide nothing: it only gets the link to
    the request's page on SIGNOFF_URL, and its accepting that link approves nothing."""
    config: dict[str, Any] = json.loads(_readme_proxy_config())
    args: list[str] = config["mcpServers"]["filesystem"]["args"]
    assert "--approver-token" not in args and "--form-elicitation" not in args
    log = tmp_path / "calls.jsonl"
    args = [*args[: args.index("--") + 1], sys.executable, str(CHILD), str(log)]
    env = {**server.env, "SIGNOFF_URL": server.base, "SIGNOFF_TOKEN": agent_token(server)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "signoff", *args], env=env)

    links: list[str] = []

    async def link_only(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams), "the client must get no form"
        links.append(params.url)
        return types.ElicitResult(action="accept", content={"approve": True})

    async with Client(params, cache=None, elicitation_callback=link_only) as client:
        call = asyncio.create_task(client.call_tool("delete_file", {"path": "/tmp/z"}))
        pending = await pending_request(api)
        for _ in range(200):
            if links:
                break
            await asyncio.sleep(0.05)
        assert links == [f"{server.base}/requests/{pending['id']}?via=mcp-url"]
        await asyncio.sleep(0.5)
        assert (await api.get(f"{API}/requests/{pending['id']}")).json()["status"] == "pending"
        await decide(api, pending["id"], {"type": "approve"})
        assert text(await call) == "deleted /tmp/z"
    decision = (await api.get(f"{API}/requests/{pending['id']}")).json()["decision"]
    assert decision["via"] == "person"
