"""One real ``signoff serve`` per module, with the paths policy, and MCP sessions held on it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.paths.scenarios import PathsServer, serve_paths

if TYPE_CHECKING:
    from tests.paths.mcp_paths import McpHost, Proxy
    from tests.paths.terminal_inbox import TerminalInbox
    from tests.paths.web_inbox import WebInbox


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PathsServer]:
    """The module's server: everything asks, ``deploy_soon`` expires after two seconds."""
    yield from serve_paths(tmp_path_factory.mktemp("paths"))


@pytest.fixture(scope="module")
def mcp_proxy(paths: PathsServer) -> Iterator[Proxy]:
    """``signoff mcp-proxy`` (the agent) held open for the module."""
    pytest.importorskip("mcp", reason="needs the MCP SDK: pip install 'signoff[mcp]'")
    from tests.paths.mcp_paths import Proxy

    proxy = Proxy(paths, "mcp-proxy-paths")
    yield proxy
    proxy.host.close()


@pytest.fixture(scope="module")
def mcp_elicit(paths: PathsServer) -> Iterator[Proxy]:
    """``signoff mcp-proxy`` with an approver token, its client answering elicitations."""
    pytest.importorskip("mcp", reason="needs the MCP SDK: pip install 'signoff[mcp]'")
    from tests.paths.mcp_paths import Proxy

    proxy = Proxy(paths, "mcp-elicit-paths", elicit=True)
    yield proxy
    proxy.host.close()


@pytest.fixture(scope="module")
def mcp_server(paths: PathsServer) -> Iterator[McpHost]:
    """``signoff mcp-server`` (the agent's choice and questions tools) held open."""
    pytest.importorskip("mcp", reason="needs the MCP SDK: pip install 'signoff[mcp]'")
    from tests.paths.mcp_paths import mcp_server

    host = mcp_server(paths, "mcp-server-paths")
    yield host
    host.close()


@pytest.fixture(scope="module")
def web_inbox(paths: PathsServer) -> Iterator[WebInbox]:
    """The web inbox signed in as the admin in real headless Chromium, held for the module."""
    from tests.web.browser import need_chromium

    need_chromium()
    from tests.paths.web_inbox import WebInbox

    inbox = WebInbox(paths)
    yield inbox
    inbox.close()
    assert inbox.errors == [], inbox.errors


@pytest.fixture(scope="module")
def terminal_inbox(paths: PathsServer) -> Iterator[TerminalInbox]:
    """``signoff inbox`` under tmux on the server's file, held for the module."""
    pytest.importorskip("textual", reason="signoff inbox needs the tui extra")
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    from tests.paths.terminal_inbox import TerminalInbox

    inbox = TerminalInbox(paths)
    yield inbox
    inbox.close()
