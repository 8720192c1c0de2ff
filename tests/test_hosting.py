"""signoff.hosting: the server reaches hosted agents through the host an integration registers."""

from __future__ import annotations

import pytest

from signoff.hosting import HostedAgents, host_agents
from signoff.service import Service
from signoff.store.memory import MemoryStore

pydantic_ai = pytest.importorskip("pydantic_ai", reason="needs signoff[pydantic-ai]")


def test_the_built_in_host_runs_pydantic_ai_agents() -> None:
    """Without another host registered, pydantic-ai's TaskRunner hosts the agents."""
    from pydantic_ai.models.test import TestModel

    from signoff.integrations.pydantic_ai.tasks import TaskRunner

    agent = pydantic_ai.Agent(TestModel())
    host: HostedAgents = host_agents(Service(MemoryStore()), {"quiet": agent})
    assert isinstance(host, TaskRunner)
    assert dict(host.agents) == {"quiet": agent}
