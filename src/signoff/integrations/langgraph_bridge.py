"""Deprecated: the LangGraph bridge is :mod:`signoff.integrations.langgraph.bridge`."""

import warnings

from signoff.integrations.langgraph.bridge import (
    GraphAsk,
    LangGraphBridge,
    Resumed,
    batch_response,
    check_middleware_decision,
    graph_tool_schemas,
    middleware_decision,
)

__all__ = [
    "GraphAsk",
    "LangGraphBridge",
    "Resumed",
    "batch_response",
    "check_middleware_decision",
    "graph_tool_schemas",
    "middleware_decision",
]

warnings.warn(
    "signoff.integrations.langgraph_bridge is deprecated: import from "
    "signoff.integrations.langgraph (or signoff.integrations.langgraph.bridge)",
    DeprecationWarning,
    stacklevel=2,
)
