"""Tasks are service operations: create, save at a version, and read with visibility."""

from __future__ import annotations

import importlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from signoff.backends import Backend, LocalBackend
from signoff.client import AsyncClient
from signoff.domain.principals import Principal
from signoff.errors import InvalidRequest, InvalidTransition, TaskNotFound
from signoff.service import Service, service_for
from signoff.store.memory import MemoryStore
from signoff.testing import ADMIN, AGENT, APPROVER, memory_service

OTHER_AGENT = Principal(name="other-bot", role="agent")


async def test_a_stale_save_is_invalid_transition(service: Service) -> None:
    """Of two saves from one version the second is InvalidTransition, on every store."""
    task = await service.create_task(agent="a", user=AGENT.name, prompt="go")
    assert (task.version, task.session_id) == (1, task.id)
    first = await service.save_task(task.model_copy(update={"status": "Paused"}))
    assert first.version == 2
    with pytest.raises(InvalidTransition, match="changed by someone else"):
        await service.save_task(task.model_copy(update={"status": "Failed"}))
    assert (await service.get_task(task.id)).status == "Paused"


async def test_an_integrations_store_is_written_through_the_service() -> None:
    """Given a store, an integration writes its tasks through a service, with the same check."""
    store = MemoryStore()
    await store.open()
    writer = service_for(store)
    assert service_for(writer) is writer
    task = await writer.create_task(agent="a", user="u")
    await service_for(store).save_task(task)
    with pytest.raises(InvalidTransition):
        await service_for(store).save_task(task)


@pytest.fixture
async def tasks() -> Service:
    """A memory service holding an agent's task, another agent's and an approver's."""
    service = memory_service()
    await service.create_task(agent="a", user=AGENT.name, prompt="mine")
    await service.create_task(agent="a", user=OTHER_AGENT.name, prompt="theirs")
    await service.create_task(agent="a", user=APPROVER.name, prompt="a person's", status="Paused")
    return service


async def _visibility(backend: Backend) -> list[str]:
    return [t.prompt for t in await backend.list_tasks()]


async def test_each_principal_sees_its_own_tasks(tasks: Service) -> None:
    """An agent sees only the tasks it started; approvers and admins see every task."""
    assert await _visibility(LocalBackend(tasks, AGENT)) == ["mine"]
    everything = {"mine", "theirs", "a person's"}
    assert set(await _visibility(LocalBackend(tasks, APPROVER))) == everything
    assert set(await _visibility(LocalBackend(tasks, ADMIN))) == everything
    paused = await LocalBackend(tasks, ADMIN).list_tasks(status="Paused")
    assert [t.prompt for t in paused] == ["a person's"]
    with pytest.raises(InvalidRequest, match="task status"):
        await LocalBackend(tasks, ADMIN).list_tasks(status="Done")


async def test_another_agents_task_is_not_found(tasks: Service) -> None:
    """Reading another agent's task is TaskNotFound, as if it did not exist."""
    (theirs,) = await tasks.list_tasks(OTHER_AGENT)
    with pytest.raises(TaskNotFound):
        await LocalBackend(tasks, AGENT).get_task(theirs.id)
    assert (await LocalBackend(tasks, APPROVER).get_task(theirs.id)).prompt == "theirs"
    assert (await LocalBackend(tasks, OTHER_AGENT).get_task(theirs.id)).prompt == "theirs"


@pytest.fixture
async def over_http(tmp_path: Path) -> AsyncIterator[tuple[Service, dict[str, AsyncClient]]]:
    """A server hosting one agent, in process, and clients for an agent and an approver."""
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from signoff.server.app import create_app
    from signoff.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "signoff.db")
    await store.open()
    service = Service(store, read_file=None)
    app = create_app(service, sweep=False, agents={"quiet": Agent(TestModel())})
    clients: dict[str, AsyncClient] = {}
    for principal in (AGENT, OTHER_AGENT, APPROVER):
        token, _ = await service.create_token(principal.name, principal.role)
        clients[principal.name] = AsyncClient(
            "http://signoff.test", token, transport=httpx.ASGITransport(app=app)
        )
    yield service, clients
    for client in clients.values():
        await client.aclose()
    await store.close()


async def test_tasks_are_read_with_visibility_over_http(
    over_http: tuple[Service, dict[str, AsyncClient]],
) -> None:
    """Over HTTP, as in process: an agent lists and reads only its own tasks."""
    service, clients = over_http
    mine = await service.create_task(agent="quiet", user=AGENT.name, prompt="mine")
    theirs = await service.create_task(agent="quiet", user=OTHER_AGENT.name, prompt="theirs")
    agent, approver = clients[AGENT.name], clients[APPROVER.name]
    assert [t.id for t in await agent.list_tasks()] == [mine.id]
    assert {t.id for t in await approver.list_tasks()} == {mine.id, theirs.id}
    assert (await agent.get_task(mine.id)).prompt == "mine"
    with pytest.raises(TaskNotFound):
        await agent.get_task(theirs.id)
    assert (await approver.get_task(theirs.id)).user == OTHER_AGENT.name


async def test_a_stale_chat_session_save_is_invalid_transition(tmp_path: Path) -> None:
    """signoff chat saves its session at a version: behind another save, InvalidTransition."""
    pytest.importorskip("pydantic_ai")
    from signoff.chat import CHAT_PRINCIPAL, ChatSession, build_agent

    service = memory_service()
    agent = build_agent(None, tmp_path)
    backend = LocalBackend(service, CHAT_PRINCIPAL)
    session = await ChatSession.start(agent, backend, service.store, user=APPROVER.name)
    await service.save_task(session.task)  # another process saved the session meanwhile
    with pytest.raises(InvalidTransition, match="changed by someone else"):
        await session.run("hello")


def test_task_view_moved_to_the_router_with_a_warning() -> None:
    """The old name of the API's task view still works, with a DeprecationWarning."""
    pytest.importorskip("pydantic_ai")
    from signoff.server.tasks import task_view

    sys.modules.pop("signoff.integrations.pydantic_ai_tasks", None)
    with pytest.warns(DeprecationWarning, match="pydantic_ai_tasks is deprecated"):
        old = importlib.import_module("signoff.integrations.pydantic_ai_tasks")
    with pytest.warns(DeprecationWarning, match="signoff.server.tasks.task_view"):
        assert old.task_view is task_view
