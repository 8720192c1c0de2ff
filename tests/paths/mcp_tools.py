"""The wrapped MCP server of the paths tests: ``deploy`` and ``deploy_soon``, each run logged.

Run as a script: ``python mcp_tools.py LOGFILE``; each call appends its args as one JSON line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

LOG = Path(sys.argv[1])
server = MCPServer("paths")


def run(service: str, version: str) -> str:
    """Log the run and return what every path's deploy returns."""
    with LOG.open("a", encoding="utf-8") as log:
        log.write(json.dumps({"service": service, "version": version}) + "\n")
    return f"deployed {service} {version}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def deploy(service: str, version: str) -> str:
    """Deploy a version."""
    return run(service, version)


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def deploy_soon(service: str, version: str) -> str:
    """Deploy a version (the policy expires its requests soon)."""
    return run(service, version)


if __name__ == "__main__":
    server.run()
