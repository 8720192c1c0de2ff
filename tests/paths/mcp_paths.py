"""The MCP paths: ``signoff mcp-proxy`` and ``signoff mcp-server`` with the official client."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import sys
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.context import ClientRequestContext
from mcp.client.session import ElicitationFnT

from tests.paths.scenarios import ARGS, OPTIONS, PROMPT, QUESTION, Outcome, PathsServer, Scenario

TOOLS = Path(__file__).with_name("mcp_tools.py")

Person = Callable[[PathsServer, str, Scenario], Coroutine[Any, Any, str]]
"""A person deciding the session's pending request (or only finding it); the request's id."""

Content = dict[str, str | int | float | bool | list[str] | None]


def text(result: types.CallToolResult) -> str:
    """A result's text blocks, joined."""
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def client(paths: PathsServer, args: list[str], elicit: ElicitationFnT | None = None) -> Client:
    """An official MCP client on ``python -m signoff ARGS`` over stdio."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "signoff", *args], env=paths.server.env
    )
    return Client(params, mode="auto", cache=None, elicitation_callback=elicit)


class McpHost:
    """One MCP client session kept open for a whole module, on a loop in its own thread.

    Starting ``signoff mcp-proxy`` and the server it wraps costs seconds, so each module
    opens a session once and every scenario calls through it (one at a time).
    """

    def __init__(self, make: Callable[[], Client]) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._stop: asyncio.Event | None = None
        opened: concurrent.futures.Future[Client] = concurrent.futures.Future()
        self.task = asyncio.run_coroutine_threadsafe(self._hold(make, opened), self.loop)
        self.client = opened.result(timeout=60)

    async def _hold(
        self, make: Callable[[], Client], opened: concurrent.futures.Future[Client]
    ) -> None:
        self._stop = asyncio.Event()
        try:
            async with make() as mcp:
                opened.set_result(mcp)
                await self._stop.wait()
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(exc)
            raise

    async def call_tool(self, name: str, args: dict[str, Any]) -> types.CallToolResult:
        """Call a tool through the held session, from any event loop."""
        future = asyncio.run_coroutine_threadsafe(self.client.call_tool(name, args), self.loop)
        return await asyncio.wrap_future(future)

    async def tool_names(self) -> list[str]:
        """The names of the tools the session lists."""
        future = asyncio.run_coroutine_threadsafe(self.client.list_tools(), self.loop)
        return [t.name for t in (await asyncio.wrap_future(future)).tools]

    def close(self) -> None:
        """End the session and its processes, then the loop."""
        stop = self._stop
        if stop is not None:
            self.loop.call_soon_threadsafe(stop.set)
        self.task.result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class Proxy:
    """``signoff mcp-proxy`` as the agent, wrapping :mod:`tests.paths.mcp_tools`, held open.

    With ``elicit``, it turns on ``--form-elicitation`` with the admin's
    ``--approver-token`` and answers every form elicitation with :attr:`answer` (the person
    deciding in their MCP client).
    """

    def __init__(self, paths: PathsServer, session_id: str, *, elicit: bool = False) -> None:
        self.session_id = session_id
        self.log = paths.home / f"{session_id}.jsonl"
        self.answer: Content = {}
        extra = ["--form-elicitation", "--approver-token", paths.admin_token] if elicit else []
        args = [
            "mcp-proxy",
            "--server",
            paths.server.base,
            "--token",
            paths.agent_token,
            "--session",
            session_id,
            *extra,
            "--",
            sys.executable,
            str(TOOLS),
            str(self.log),
        ]
        callback = self._answer if elicit else None
        self.host = McpHost(lambda: client(paths, args, callback))

    async def _answer(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content=dict(self.answer))

    def ran(self) -> list[dict[str, Any]]:
        """What the wrapped server ran so far."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


async def run_proxy(
    proxy: Proxy, paths: PathsServer, scenario: Scenario, person: Person
) -> Outcome:
    """The model calls the gated tool through the proxy while ``person`` decides (or finds it)."""
    before = len(proxy.ran())
    deciding = asyncio.create_task(person(paths, proxy.session_id, scenario))
    result = await proxy.host.call_tool(scenario.tool, dict(ARGS))
    request_id = await deciding
    return Outcome(request_id, text(result), proxy.ran()[before:])


async def run_server(
    host: McpHost, session_id: str, paths: PathsServer, scenario: Scenario, person: Person
) -> Outcome:
    """The model asks through ``signoff mcp-server``'s choice or questions tool."""
    ask, questions = (await host.tool_names())[:2]
    deciding = asyncio.create_task(person(paths, session_id, scenario))
    if scenario.kind == "choice":
        result = await host.call_tool(ask, {"prompt": PROMPT, "options": OPTIONS})
    else:
        result = await host.call_tool(questions, {"questions": [QUESTION]})
    request_id = await deciding
    return Outcome(request_id, text(result), [])


def mcp_server(paths: PathsServer, session_id: str) -> McpHost:
    """``signoff mcp-server`` as the agent, held open."""
    args = [
        "mcp-server",
        "--server",
        paths.server.base,
        "--token",
        paths.agent_token,
        "--session",
        session_id,
    ]
    return McpHost(lambda: client(paths, args))
