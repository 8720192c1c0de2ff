"""signoff over the Model Context Protocol: an approval proxy and ask-a-person tools.

signoff speaks the Model Context Protocol twice, both on the official ``mcp`` SDK:

- :mod:`signoff.integrations.mcp.proxy`: ``signoff mcp-proxy``, an approval gateway in front
  of any stdio MCP server;
- :mod:`signoff.integrations.mcp.server`: ``signoff mcp-server``, signoff's own tools for
  asking a person (a choice, or questions).

MCP clients give up on a call that takes too long, and a person may take longer than
that. So a call that waits for a person is *held* for at most ``hold`` seconds (50 by
default); if nobody has decided by then the call returns a result telling the model the
request id and that it can call the added tool ``signoff_await(request_id)`` to wait
again. The request stays pending in the inbox meanwhile: nothing is lost or run.

Both servers run over stdio (what desktop clients launch) or streamable HTTP, where every
request must carry the proxy's bearer token (:mod:`~signoff.integrations.mcp.serving`).
"""

from signoff.integrations.mcp.holding import (
    AWAIT_TOOL,
    HOLD_SECONDS,
    await_tool,
    clamp_hold,
    held_request_id,
    text_result,
    waiting_result,
)
from signoff.integrations.mcp.serving import serve_http, serve_stdio

__all__ = [
    "AWAIT_TOOL",
    "HOLD_SECONDS",
    "await_tool",
    "clamp_hold",
    "held_request_id",
    "serve_http",
    "serve_stdio",
    "text_result",
    "waiting_result",
]
