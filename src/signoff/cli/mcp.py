"""``signoff mcp-proxy`` and ``signoff mcp-server``: signoff for any MCP client.

``mcp-proxy -- COMMAND ARGS...`` wraps a stdio MCP server so that its risky tool calls
wait for a person (see :mod:`signoff.integrations.mcp.proxy`); ``mcp-server`` offers
signoff's own ask-a-person tools (see :mod:`signoff.integrations.mcp.server`). Both speak
MCP on stdin/stdout, as desktop clients launch them, or with ``--http`` on streamable HTTP
behind a bearer token. Nothing but MCP is ever written to stdout; messages go to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from signoff.backends import Backend, LocalBackend
from signoff.cli import links
from signoff.cli.backend import ServerOption, TokenOption
from signoff.cli.context import DbOption, err_console, fail, local_principal, open_service, run
from signoff.domain.policies import Policy, PolicyFile
from signoff.domain.principals import DECIDER_ROLES, Principal
from signoff.errors import PolicyError
from signoff.integrations.hooks.contracts import DEFAULT_WAIT

if TYPE_CHECKING:
    from mcp.server import Server

__all__ = ["mcp_proxy", "mcp_server", "register"]

DEFAULT_PERMISSION_WAIT = DEFAULT_WAIT["claude-code"]
"""How long ``approval_prompt`` waits for a person by default (as ``signoff hook``)."""
MAX_PERMISSION_WAIT = 86_400.0

HoldOption = Annotated[
    float,
    typer.Option(
        "--hold",
        min=1,
        max=600,
        help="Seconds a call waits for a person before it returns a request id to wait on "
        "with signoff_await (MCP clients give up on long calls).",
    ),
]
SessionOption = Annotated[
    str | None,
    typer.Option(
        "--session",
        help="Session id the requests are filed under (default: a new one per start).",
        show_default=False,
    ),
]
HttpOption = Annotated[
    bool,
    typer.Option("--http", help="Serve streamable HTTP at /mcp instead of stdio."),
]
HostOption = Annotated[str, typer.Option("--host", help="With --http: address to listen on.")]
PortOption = Annotated[int, typer.Option("--port", help="With --http: port to listen on.")]
HttpTokenOption = Annotated[
    str | None,
    typer.Option(
        "--http-token",
        envvar="SIGNOFF_MCP_TOKEN",
        help="With --http: the bearer token clients must send (default: a new one, "
        "printed to stderr).",
        show_default=False,
    ),
]
NameOption = Annotated[
    str,
    typer.Option(
        "--agent-name",
        help="On --db: the agent the requests are filed as.",
    ),
]


@asynccontextmanager
async def _backends(
    db: str | None,
    server: str | None,
    token: str | None,
    agent_name: str,
    policy: Policy | None,
    approver_token: str | None = None,
) -> AsyncIterator[tuple[Backend, Backend | None]]:
    """The agent requests are filed as, and the person who may answer in the MCP client.

    On ``--db`` the person is you (the local user); with ``--server``, whoever
    ``approver_token`` belongs to, or nobody.
    """
    if server is None:
        if approver_token:
            fail("--approver-token goes with --server; on a database you are the approver")
        async with open_service(db, follow=True, policy=policy) as service:
            yield (
                LocalBackend(service, Principal(name=agent_name, role="agent")),
                LocalBackend(service, local_principal()),
            )
        return
    if db is not None:
        fail("give either --db or --server, not both")
    if not token:
        fail("--server needs --token (or SIGNOFF_TOKEN): the agent token requests are filed with")
    try:
        from signoff.client import AsyncClient
    except ImportError:
        fail("--server needs the HTTP client: pip install 'signoff[server]'")
    async with AsyncClient(server, token) as agent:
        if not approver_token:
            yield agent, None
            return
        async with AsyncClient(server, approver_token) as person:
            who = await person.me()
            if who.role not in DECIDER_ROLES:
                fail(
                    f"--approver-token belongs to {who.name}, an {who.role}: answers given in "
                    "the MCP client need an approver's or admin's token"
                )
            yield agent, person


async def _serve(
    mcp_server: Server[Any], *, http: bool, host: str, port: int, http_token: str | None
) -> None:
    from signoff.integrations.mcp import serve_http, serve_stdio

    if not http:
        await serve_stdio(mcp_server)
        return
    token = http_token or "so_mcp_" + secrets.token_urlsafe(32)

    async def ready() -> None:
        err_console.print(f"MCP endpoint: http://{host}:{port}/mcp", markup=False)
        if not http_token:
            err_console.print(f"bearer token: {token}", markup=False)

    await serve_http(mcp_server, host=host, port=port, token=token, on_ready=ready)


def _session(given: str | None, prefix: str) -> str:
    return given or f"{prefix}-{secrets.token_hex(4)}"


def mcp_proxy(
    command: Annotated[
        list[str],
        typer.Argument(
            help="The MCP server to wrap and its arguments, after --.",
            metavar="-- COMMAND [ARGS]...",
            show_default=False,
        ),
    ],
    policy_file: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            help="tools.toml to use (default: the project's .signoff/tools.toml over the "
            "global one).",
            show_default=False,
        ),
    ] = None,
    ignore_hints: Annotated[
        bool,
        typer.Option(
            "--ignore-hints",
            help="Do not let the server's readOnlyHint / destructiveHint annotations decide "
            "tools no rule names.",
        ),
    ] = False,
    elicit: Annotated[
        bool,
        typer.Option(
            "--elicit/--no-elicit",
            help="Also ask in MCP clients that support elicitation: those declaring URL mode "
            "get a link to the request's page in the web inbox (where a person signs in and "
            "decides), and with --form-elicitation a form.",
        ),
    ] = True,
    public_url: Annotated[
        str | None,
        typer.Option(
            "--public-url",
            envvar="SIGNOFF_PUBLIC_URL",
            help="The web inbox's address as the person's browser reaches it, for the links "
            "sent to MCP clients (default: --server's URL; on --db, no links without it).",
            show_default=False,
        ),
    ] = None,
    form_elicitation: Annotated[
        bool,
        typer.Option(
            "--form-elicitation",
            help="Let MCP clients that support form elicitation answer approve / reject "
            "themselves (recorded via mcp-elicitation with the client's name). Whoever "
            "controls the MCP client can then approve. With --server it needs "
            "--approver-token; on --db you are the approver.",
        ),
    ] = False,
    approver_token: Annotated[
        str | None,
        typer.Option(
            "--approver-token",
            help="With --server and --form-elicitation: the approver's or admin's token the "
            "client's form answers decide as.",
            show_default=False,
        ),
    ] = None,
    hold: HoldOption = 50.0,
    session: SessionOption = None,
    http: HttpOption = False,
    host: HostOption = "127.0.0.1",
    port: PortOption = 8765,
    http_token: HttpTokenOption = None,
    agent_name: NameOption = "mcp-proxy",
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Wrap an MCP server so that its risky tool calls wait for a person's approval."""
    try:
        from mcp import StdioServerParameters

        from signoff.integrations.mcp.proxy import HintedPolicy, McpProxy, Upstream, UpstreamDown
    except ImportError:
        fail("signoff mcp-proxy needs the MCP SDK: pip install 'signoff[mcp]'")
    if not command:
        fail("name the MCP server to wrap after --, e.g. signoff mcp-proxy -- npx server-x")
    if shutil.which(command[0]) is None:
        fail(f"cannot run {command[0]!r}: no such command")
    try:
        base = Policy([PolicyFile.read(policy_file)]) if policy_file else Policy.load()
    except PolicyError as exc:
        fail(exc.message)
    policy = HintedPolicy(base, trust_hints=not ignore_hints)
    if approver_token and not form_elicitation:
        fail("--approver-token goes with --form-elicitation: whom the client's form decides as")
    if form_elicitation and server is not None and not approver_token:
        fail("--form-elicitation with --server needs --approver-token: whom the form decides as")
    page_base = links.page_base(public_url, server)
    params = StdioServerParameters(
        command=command[0], args=command[1:], env=dict(os.environ), cwd=os.getcwd()
    )

    async def go() -> None:
        upstream = Upstream(params)
        async with _backends(db, server, token, agent_name, policy, approver_token) as (
            agent,
            person,
        ):
            supervisor = asyncio.create_task(upstream.run())
            try:
                try:
                    await upstream.started()
                except UpstreamDown as exc:
                    fail(f"cannot start the MCP server {' '.join(command)!r}: {exc}")
                proxy = McpProxy(
                    upstream,
                    agent,
                    policy,
                    session_id=_session(session, "mcp-proxy"),
                    approver=person if elicit and form_elicitation else None,
                    page_base=page_base if elicit else None,
                    hold=hold,
                )
                await _serve(proxy.server(), http=http, host=host, port=port, http_token=http_token)
            finally:
                supervisor.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await supervisor

    run(go)


def mcp_server(
    hold: HoldOption = 50.0,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=1,
            help="Seconds a question stays open for a person when the model does not say.",
        ),
    ] = 3600.0,
    permission_prompt: Annotated[
        bool,
        typer.Option(
            "--permission-prompt",
            help="Also serve approval_prompt, for claude -p --permission-prompt-tool "
            "mcp__signoff__approval_prompt: Claude Code's permission prompts wait for a "
            "person in signoff (allow, deny with the reason, or edited input).",
        ),
    ] = False,
    permission_wait: Annotated[
        float,
        typer.Option(
            "--permission-wait",
            min=1,
            max=MAX_PERMISSION_WAIT,
            help="With --permission-prompt: seconds a permission prompt waits for a person "
            "before it denies (and withdraws the request).",
        ),
    ] = DEFAULT_PERMISSION_WAIT,
    session: SessionOption = None,
    http: HttpOption = False,
    host: HostOption = "127.0.0.1",
    port: PortOption = 8766,
    http_token: HttpTokenOption = None,
    agent_name: NameOption = "mcp-agent",
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Serve signoff's ask-a-person tools to any MCP client (choices and questions)."""
    try:
        from signoff.integrations.mcp.server import SignoffMcpServer
    except ImportError:
        fail("signoff mcp-server needs the MCP SDK: pip install 'signoff[mcp]'")

    async def go() -> None:
        async with _backends(db, server, token, agent_name, None) as (agent, _):
            try:
                tools = SignoffMcpServer(
                    agent,
                    session_id=_session(session, "mcp"),
                    hold=hold,
                    default_timeout_s=timeout,
                    permission_wait=permission_wait if permission_prompt else None,
                )
            except ValueError as exc:
                fail(str(exc))
            await _serve(tools.server(), http=http, host=host, port=port, http_token=http_token)

    run(go)


def register(app: typer.Typer) -> None:
    """Add ``mcp-proxy`` and ``mcp-server`` to ``app``."""
    app.command("mcp-proxy")(mcp_proxy)
    app.command("mcp-server")(mcp_server)
