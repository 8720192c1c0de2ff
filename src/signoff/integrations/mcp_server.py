"""Deprecated: signoff's ask-a-person MCP server is :mod:`signoff.integrations.mcp.server`."""

import warnings

from signoff.integrations.mcp.server import ASK_TOOL, INPUT_TOOL, SignoffMcpServer

__all__ = ["ASK_TOOL", "INPUT_TOOL", "SignoffMcpServer"]

warnings.warn(
    "signoff.integrations.mcp_server is deprecated: import from signoff.integrations.mcp.server",
    DeprecationWarning,
    stacklevel=2,
)
