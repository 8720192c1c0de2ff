"""``signoff demo``: the server, a chat waiting for approval, a queue-mode agent and a worker.

A new user's first link opens a conversation with the hosted demo chat agent
(:mod:`signoff.chat.hosted`, named ``demo``), already paused on a file it asks to write,
with the approval box inline. Behind it the inbox fills within seconds: a scripted agent
files a file edit with a diff, shell commands, a choice and questions in queue mode, each
waiting for them. Nothing runs until they approve it, and then only inside the demo's own
workspace directory. No API key: both agents run the scripted demo model.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer

from signoff.cli.context import console, fail, open_service, run
from signoff.cli.demo_terminal import DemoWorkspace, print_outcomes, sigterm_as_interrupt
from signoff.cli.serve import ADMIN_NAME, check_port_free, ensure_admin_token, preview_root_for
from signoff.domain.principals import Principal
from signoff.hosting import HostedAgents
from signoff.service import Service
from signoff.terminal.safe_text import visible

__all__ = ["CHAT_AGENT_NAME", "CHAT_PROMPT", "DEMO_POLICY_SOURCE", "DEMO_PROMPTS", "register"]

CHAT_AGENT_NAME = "demo"
"""The name the demo chat agent is hosted under (as ``signoff serve --agent demo=...``)."""
CHAT_PROMPT = "create welcome.md saying hello from the chat"
"""The first message of the demo's conversation: the agent asks to write a file."""

DEMO_PROMPTS = (
    "create notes.md saying hello and run ls -la",
    "delete old logs",
    "ask me which database to use",
    "ask me some questions",
)
"""What the demo agent is asked, each as its own run."""

DEMO_POLICY = '[tools]\nneed_approval = ["write_file", "edit_file", "shell"]\n'
DEMO_POLICY_SOURCE = "signoff demo's built-in policy (in its code, not a tools.toml)"
"""Where a request's policy note says its rule comes from, in words a newcomer reads."""
_AGENT = Principal(name="demo-agent", role="agent")


def _inside(workspace: Path, path: str) -> Path:
    target = (workspace / path).resolve()
    if workspace.resolve() not in (target, *target.parents):
        raise ValueError(f"{path!r} is outside the demo workspace")
    return target


def demo_tools(workspace: Path) -> dict[str, Any]:
    """write_file and shell, confined to ``workspace``."""

    def write_file(path: str, content: str) -> str:
        """Write ``content`` to the file at ``path`` (inside the workspace)."""
        target = _inside(workspace, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        return f"wrote {len(content)} bytes to {path}"

    def shell(command: str) -> str:
        """Run ``command`` with sh in the workspace; its output."""
        done = subprocess.run(  # noqa: S603 - runs only after a person approved this command
            ["/bin/sh", "-c", command],
            cwd=workspace,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return (done.stdout + done.stderr).strip() or f"exit code {done.returncode}"

    return {"write_file": write_file, "shell": shell}


def _seed(workspace: Path) -> None:
    (workspace / "notes.md").write_text("# Notes\nTODO: say hi\n")
    logs = workspace / "logs"
    logs.mkdir(exist_ok=True)
    old = logs / "app-2025-01-01.log"
    old.write_text("an old log line\n")
    os.utime(old, (0, 0))


async def _admin(service: Service) -> Principal:
    """The person the demo's conversation is started for: the database's admin."""
    tokens = await service.list_tokens()
    admins = [t.name for t in tokens if t.role == "admin" and t.revoked_at is None]
    return Principal(name=admins[0] if admins else ADMIN_NAME, role="admin")


def demo(
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    workspace: Annotated[
        Path | None,
        typer.Option(
            help="Where the demo's files and database live, kept when it stops (default: a "
            "new temporary directory, removed when it stops)."
        ),
    ] = None,
) -> None:
    """Run the server with a scripted demo agent filing requests, and a worker for them."""
    try:
        import uvicorn
        from pydantic_ai import Agent

        from signoff.backends import LocalBackend
        from signoff.chat.demo import DEMO_MODEL_NAME, demo_model
        from signoff.chat.hosted import build_hosted_agent
        from signoff.domain.policies import Policy
        from signoff.executor import Executor, ToolRegistry
        from signoff.integrations.pydantic_ai import SignoffGate, queue_status_toolset
        from signoff.integrations.pydantic_ai.human import human_toolset
        from signoff.server.app import create_app
    except ImportError:
        fail("the demo needs its extras: pip install 'signoff[server,pydantic-ai]'")
    check_port_free(host, port)
    space = DemoWorkspace(workspace)
    root = space.path
    _seed(root)
    db = f"sqlite:///{root / 'demo.db'}"
    base = f"http://{host}:{port}"

    async def go() -> None:
        policy = Policy.from_toml(DEMO_POLICY, source=DEMO_POLICY_SOURCE)
        # the hosted chat gates calls by the service's policy: the same as the queue's
        async with open_service(db, follow=True, policy=policy) as service:
            token = await ensure_admin_token(service)
            backend = LocalBackend(service, _AGENT)
            tools = demo_tools(root)
            registry = ToolRegistry()
            for name, fn in tools.items():
                registry.add(name, fn)
            # previews read the workspace (the agent's relative paths), nothing else
            app = create_app(
                service,
                public_url=base,
                preview_root=preview_root_for(root, db),
                agents={CHAT_AGENT_NAME: build_hosted_agent(root)},
            )
            server = uvicorn.Server(
                uvicorn.Config(
                    app, host=host, port=port, log_level="warning", ws_per_message_deflate=False
                )
            )
            # the scripted model answers at once: the conversation is paused on its first
            # call before the server starts (so the runner's start finds it Paused, not
            # Running, and leaves it waiting)
            runner: HostedAgents = app.state.tasks
            chat = await runner.run(CHAT_AGENT_NAME, CHAT_PROMPT, await _admin(service))
            conversation = f"/chat/{chat.id}"
            console.print(
                "open the chat, waiting for your approval (the link asks to confirm, then "
                "signs you in):",
                markup=False,
            )
            console.print(
                f"    {base}/login?token={token}&next={quote(conversation, safe='/')}"
                if token
                else f"    {base}{conversation}",
                markup=False,
                soft_wrap=True,
            )
            console.print(f"signoff demo on {base}; workspace {root}", markup=False, soft_wrap=True)
            console.print(f"the agents are {DEMO_MODEL_NAME}: no API key, no LLM", markup=False)
            if token is not None:
                console.print(f"admin token: {token}", markup=False)
            console.print(
                f"the inbox, filling with a queue agent's requests: {base}/", markup=False
            )
            console.print("Ctrl+C stops.", markup=False)

            async def ask(n: int, prompt: str) -> None:
                session = f"demo-{n}"  # one conversation per prompt, as an agent would have
                agent: Agent[None, str] = Agent(
                    demo_model(),
                    tools=list(tools.values()),
                    toolsets=[
                        human_toolset(backend, session_id=session, timeout_s=3600),
                        queue_status_toolset(backend),
                    ],
                )
                gate = SignoffGate(backend, session_id=session, mode="queue", policy=policy)
                result = await agent.run(prompt, capabilities=[gate])
                console.print(f"agent> {prompt}\n{visible(str(result.output))}\n", markup=False)

            async def agent_runs() -> None:
                await asyncio.sleep(0.5)
                await asyncio.gather(*(ask(n, p) for n, p in enumerate(DEMO_PROMPTS, 1)))

            def say(line: str) -> None:
                console.print(line, markup=False, soft_wrap=True, highlight=False)

            person = LocalBackend(service, await _admin(service))  # sees every agent's
            async with Executor(backend, registry, poll=1.0):  # runs approved calls
                runs = asyncio.create_task(agent_runs())
                outcomes = asyncio.create_task(print_outcomes(person, say))
                try:
                    await server.serve()
                finally:
                    for task in (runs, outcomes):
                        task.cancel()
                        with contextlib.suppress(asyncio.CancelledError, Exception):
                            await task

    try:
        with sigterm_as_interrupt():
            run(go)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
    finally:
        if space.close():
            console.print(f"removed the demo's workspace {root}", markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``demo`` to ``app``."""
    app.command()(demo)
