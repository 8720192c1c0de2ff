"""The tokens a hook test needs on its module's ``server``: the admin, the coding agent and a
person who approves. A pytest plugin (see ``pytest_plugins`` in tests/conftest.py), so each
module that runs ``signoff hook`` asks for them by name instead of defining them again."""

from __future__ import annotations

import pytest

from tests.serving import Server, new_token


@pytest.fixture(scope="module")
def admin(server: Server) -> str:
    """The server's admin token (sees every request, decides as a person)."""
    assert server.admin_token is not None
    return server.admin_token


@pytest.fixture(scope="module")
def agent(server: Server) -> str:
    """The coding agent's token, as ``signoff hook install`` would set up."""
    return new_token(server, "coder", "agent")[0]


@pytest.fixture(scope="module")
def person(server: Server) -> str:
    """An approver's token."""
    return new_token(server, "alice", "approver")[0]
