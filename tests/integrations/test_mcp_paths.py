"""The MCP integration is one package, signoff.integrations.mcp; the old module paths still work."""

from __future__ import annotations

import importlib
import sys

import pytest

pytest.importorskip("mcp", reason="needs signoff[mcp]")

from signoff.integrations import mcp
from signoff.integrations.mcp import holding, proxy, server, serving


def test_the_package_exports_what_the_old_module_did() -> None:
    """``signoff.integrations.mcp`` still exports the helpers both servers share."""
    assert mcp.AWAIT_TOOL == holding.AWAIT_TOOL == "signoff_await"
    assert mcp.serve_http is serving.serve_http
    assert mcp.serve_stdio is serving.serve_stdio
    assert mcp.waiting_result is holding.waiting_result


@pytest.mark.parametrize(
    ("old", "new", "names"),
    [
        ("signoff.integrations.mcp_proxy", proxy, ["HintedPolicy", "McpProxy", "UpstreamDown"]),
        ("signoff.integrations.mcp_server", server, ["SignoffMcpServer", "ASK_TOOL"]),
    ],
)
def test_old_module_paths_warn_and_give_the_same_objects(
    old: str, new: object, names: list[str]
) -> None:
    """Importing a moved module's old path warns once and exports the very same objects."""
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=old.replace(".", r"\.")):
        module = importlib.import_module(old)
    for name in names:
        assert getattr(module, name) is getattr(new, name)
