"""Deprecated: the MCP approval proxy is :mod:`signoff.integrations.mcp.proxy`."""

import warnings

from signoff.integrations.mcp.proxy import HintedPolicy, McpProxy, Upstream, UpstreamDown

__all__ = ["HintedPolicy", "McpProxy", "Upstream", "UpstreamDown"]

warnings.warn(
    "signoff.integrations.mcp_proxy is deprecated: import from signoff.integrations.mcp.proxy",
    DeprecationWarning,
    stacklevel=2,
)
