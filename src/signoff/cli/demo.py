"""``signoff demo``: the server, a scripted agent filing requests in queue mode, and a worker.

A new user sees a live inbox within seconds: a file edit with a diff, shell commands, a
choice and questions, each waiting for them. Nothing runs until they approve it, and then
only inside the demo's own workspace directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from signoff.cli.context import console, fail, open_service, run
from signoff.cli.serve import check_port_free, ensure_admin_token, preview_root_for
from signoff.domain.principals import Principal
from signoff.terminal.safe_text import visible

__all__ = ["DEMO_PROMPTS", "register"]

DEMO_PROMPTS = (
    "create notes.md saying hello and run ls -la",
    "delete old logs",
    "ask me which database to use",
    "ask me some questions",
)
"""What the demo agent is asked, each as its own run."""

DEMO_POLICY = '[tools]\nneed_approval = ["write_file", "shell"]\n'
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


def demo(
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    workspace: Annotated[
        Path | None,
        typer.Option(help="Where the demo's files and database live (default: a new temp dir)."),
    ] = None,
) -> None:
    """Run the server with a scripted demo agent filing requests, and a worker for them."""
    try:
        import uvicorn
        from pydantic_ai import Agent

        from signoff.backends import LocalBackend
        from signoff.chat.demo import DEMO_MODEL_NAME, demo_model
        from signoff.domain.policies import Policy
        from signoff.executor import Executor, ToolRegistry
        from signoff.integrations.pydantic_ai import SignoffGate, queue_status_toolset
        from signoff.integrations.pydantic_ai.human import human_toolset
        from signoff.server.app import create_app
    except ImportError:
        fail("the demo needs its extras: pip install 'signoff[server,pydantic-ai]'")
    check_port_free(host, port)
    root = (workspace or Path(tempfile.mkdtemp(prefix="signoff-demo-"))).resolve()
    root.mkdir(parents=True, exist_ok=True)
    _seed(root)
    os.chdir(root)  # the tools resolve relative paths here
    db = f"sqlite:///{root / 'demo.db'}"
    base = f"http://{host}:{port}"

    async def go() -> None:
        async with open_service(db, follow=True) as service:
            token = await ensure_admin_token(service)
            backend = LocalBackend(service, _AGENT)
            tools = demo_tools(root)
            registry = ToolRegistry()
            for name, fn in tools.items():
                registry.add(name, fn)
            policy = Policy.from_toml(DEMO_POLICY)
            # previews read the workspace (the agent's relative paths), nothing else
            app = create_app(service, public_url=base, preview_root=preview_root_for(root, db))
            server = uvicorn.Server(
                uvicorn.Config(
                    app, host=host, port=port, log_level="warning", ws_per_message_deflate=False
                )
            )
            console.print(f"signoff demo on {base}; workspace {root}", markup=False, soft_wrap=True)
            console.print(f"the agent is {DEMO_MODEL_NAME}: no API key, no LLM", markup=False)
            if token is not None:
                console.print(f"admin token: {token}", markup=False)
            console.print(
                "open the inbox (the link asks to confirm, then signs you in):", markup=False
            )
            console.print(
                f"    {base}/login?token={token}" if token else f"    {base}/login",
                markup=False,
                soft_wrap=True,
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

            async with Executor(backend, registry, poll=1.0):  # runs approved calls
                runs = asyncio.create_task(agent_runs())
                try:
                    await server.serve()
                finally:
                    runs.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await runs

    try:
        run(go)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


def register(app: typer.Typer) -> None:
    """Add ``demo`` to ``app``."""
    app.command()(demo)
