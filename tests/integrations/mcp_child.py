"""A small real MCP server for the proxy tests; it logs every tool call it runs.

Run as a script: ``python mcp_child.py LOGFILE``. Each call appends one JSON line
``{"tool": ..., "args": ...}`` to LOGFILE before it does anything else.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

LOG = Path(sys.argv[1])
server = MCPServer("child")


def logged(tool: str, **args: object) -> None:
    """Record that ``tool`` ran with ``args``."""
    with LOG.open("a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "args": args}) + "\n")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_note(name: str) -> str:
    """Read a note."""
    logged("read_note", name=name)
    return f"note {name}: buy milk"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def delete_file(path: str) -> str:
    """Delete a file."""
    logged("delete_file", path=path)
    return f"deleted {path}"


@server.tool()
def send_email(to: str, body: str) -> str:
    """Send an email (no annotations)."""
    logged("send_email", to=to, body=body)
    return f"sent to {to}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def crash() -> str:
    """Exit the server process in the middle of the call."""
    logged("crash")
    os._exit(3)


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def wipe(target: str) -> str:
    """A destructive call that crashes the server while it runs."""
    logged("wipe", target=target)
    os._exit(4)


@server.resource("note://groceries")
def groceries() -> str:
    """A note as a resource."""
    return "buy milk"


@server.prompt()
def greet(name: str) -> str:
    """A prompt template."""
    return f"Say hello to {name}"


if __name__ == "__main__":
    server.run()
