"""The executor runs each approved call exactly once, with the approved args, and reports it."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field, JsonValue

from signoff.backends import Backend, LocalBackend
from signoff.bus.local import LocalBus
from signoff.domain.principals import Principal
from signoff.domain.requests import ApprovalRequest, Request
from signoff.errors import InvalidDecision, InvalidRequest
from signoff.executor import Executor, ToolRegistry, error_text, jsonable
from signoff.service import Service
from signoff.store.base import Write
from signoff.store.memory import MemoryStore
from signoff.store.sqlite import SQLiteStore
from signoff.testing import ADMIN, AGENT, APPROVER, memory_service
from tests.integrations import conftest as integrations
from tests.integrations.conftest import Sides

sides = integrations.sides  # the agent and a person, in process and over HTTP


@dataclass
class Calls:
    """Every tool invocation, in order: (tool name, keyword arguments)."""

    seen: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def ids(self) -> Counter[str]:
        """How many times each ``echo`` call with an ``id`` argument ran."""
        return Counter(str(args["id"]) for name, args in self.seen if "id" in args)


@pytest.fixture
def calls() -> Calls:
    """A fresh log of tool invocations."""
    return Calls()


@pytest.fixture
def registry(calls: Calls) -> ToolRegistry:
    """An async ``echo`` that returns its args and a sync ``boom`` that raises."""
    tools = ToolRegistry()

    @tools.tool
    async def echo(**kwargs: Any) -> dict[str, Any]:
        calls.seen.append(("echo", kwargs))
        await asyncio.sleep(0)  # let concurrent executors interleave
        return kwargs

    @tools.tool(name="boom")
    def explode(message: str) -> None:
        calls.seen.append(("boom", {"message": message}))
        raise ValueError(message)

    return tools


async def submit(
    backend: Backend, tool: str, args: dict[str, JsonValue], session: str = "s"
) -> str:
    """Submit an approval request for ``tool`` and return its id."""
    body = {"session_id": session, "kind": "approval", "tool_name": tool, "tool_args": args}
    return (await backend.submit(body)).request.id


async def approved(
    sides: Sides,
    tool: str,
    args: dict[str, JsonValue],
    *,
    edit: dict[str, JsonValue] | None = None,
    session: str = "s",
) -> str:
    """Submit as the agent, approve as the person (with ``edit`` as the args if given)."""
    request_id = await submit(sides.agent, tool, args, session)
    decision: dict[str, Any] = {"type": "approve"}
    if edit is not None:
        decision["args"] = edit
    await sides.person.decide(request_id, decision)
    return request_id


async def status_of(service: Service, request_id: str) -> str:
    """The request's status as stored."""
    return (await service.get(request_id)).status


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 15.0) -> None:
    """Wait until ``check`` holds, failing the test after ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        while True:
            if await check():
                return
            await asyncio.sleep(0.02)


def approval(request: Request) -> ApprovalRequest:
    """The request, known to be an approval request."""
    assert isinstance(request, ApprovalRequest)
    return request


# -- the registry --------------------------------------------------------------------------


def test_tools_register_by_decorator_by_name_and_by_add() -> None:
    """``@tool``, ``@tool(name=...)`` and ``add`` all register, and the decorator returns fn."""
    tools = ToolRegistry()

    @tools.tool
    def first() -> int:
        return 1

    @tools.tool(name="other")
    def second() -> int:
        return 2

    tools.add("third", lambda: 3)
    assert tools.names == {"first", "other", "third"}
    assert "other" in tools and "second" not in tools
    assert len(tools) == 3 and sorted(tools) == ["first", "other", "third"]
    assert first() == 1 and second() == 2


def test_an_unknown_tool_is_a_clear_error() -> None:
    """Asking for a tool nobody registered names it and the tools that are known."""
    tools = ToolRegistry()
    tools.add("shell", print)
    with pytest.raises(InvalidRequest, match=r"no tool named 'rm' is registered \(known: shell\)"):
        tools.get("rm")


def test_a_tool_name_is_registered_once() -> None:
    """Registering a second function under a taken name (or no name) is refused."""
    tools = ToolRegistry()
    tools.add("shell", print)
    with pytest.raises(InvalidRequest, match="already registered"):
        tools.add("shell", repr)
    with pytest.raises(InvalidRequest, match="needs a name"):
        tools.add(" ", repr)


async def test_sync_tools_run_in_a_thread_and_async_tools_are_awaited() -> None:
    """A sync tool runs off the event loop's thread; an async one is awaited; both get kwargs."""
    tools = ToolRegistry()
    loop_thread = threading.get_ident()

    @tools.tool
    def sync_add(a: int, b: int) -> tuple[int, bool]:
        return a + b, threading.get_ident() != loop_thread

    @tools.tool
    async def async_add(a: int, b: int) -> int:
        return a + b

    assert await tools.call("sync_add", {"a": 1, "b": 2}) == (3, True)
    assert await tools.call("async_add", {"a": 1, "b": 2}) == 3


def test_results_become_json() -> None:
    """Models, dates, tuples and sets become JSON data; anything else its ``str()``."""

    class Point(BaseModel):
        x: int

    class Opaque:
        def __str__(self) -> str:
            return "opaque!"

    when = datetime(2026, 1, 2, tzinfo=UTC)
    assert jsonable({"p": Point(x=1), "at": when, "t": (1, 2)}) == {
        "p": {"x": 1},
        "at": "2026-01-02T00:00:00Z",
        "t": [1, 2],
    }
    assert jsonable(Opaque()) == "opaque!"
    assert error_text(ValueError("bad value")) == "ValueError: bad value"
    assert error_text(KeyError()) == "KeyError"


# -- running approved calls ------------------------------------------------------------------


async def test_an_approved_call_runs_once_with_the_approved_args(
    sides: Sides, registry: ToolRegistry, calls: Calls
) -> None:
    """The edited args run, the result is recorded as completed, and it never runs again."""
    request_id = await approved(sides, "echo", {"path": "a.txt"}, edit={"path": "b.txt"})
    executor = Executor(sides.agent, registry)
    assert await executor.run_once() == 1
    assert calls.seen == [("echo", {"path": "b.txt"})]
    done = approval(await sides.agent.get(request_id))
    assert done.status == "completed"
    assert done.result is not None and done.result.ok and done.result.result == {"path": "b.txt"}
    assert done.claimed_by == AGENT.name
    assert await executor.run_once() == 0
    assert len(calls.seen) == 1


async def test_a_tool_exception_fails_the_call_and_the_worker_goes_on(
    sides: Sides, registry: ToolRegistry, calls: Calls
) -> None:
    """A raising tool ends failed with ``ExceptionType: message``; the next call still runs."""
    bad = await approved(sides, "boom", {"message": "disk full"})
    good = await approved(sides, "echo", {"n": 1})
    assert await Executor(sides.agent, registry).run_once() == 2
    failed = approval(await sides.agent.get(bad))
    assert failed.status == "failed"
    assert failed.result is not None and failed.result.error == "ValueError: disk full"
    assert await status_of(sides.service, good) == "completed"
    assert [name for name, _ in calls.seen] == ["boom", "echo"]


async def test_a_tool_called_with_wrong_args_fails_instead_of_crashing(sides: Sides) -> None:
    """Args a signature without a schema does not accept end the call failed with the
    TypeError."""
    tools = ToolRegistry()

    def takes_x(x: object, /) -> object:  # positional-only: no schema to check first
        return x

    tools.add("takes_x", takes_x)
    assert tools.schema("takes_x") is None
    request_id = await approved(sides, "takes_x", {"y": 1})
    assert await Executor(sides.agent, tools).run_once() == 1
    failed = approval(await sides.agent.get(request_id))
    assert failed.status == "failed"
    assert failed.result is not None and (failed.result.error or "").startswith("TypeError: ")


class Named(BaseModel):
    """A tool argument whose field must match a regular expression."""

    name: str = Field(pattern="^[a-z]+$")


def test_a_registry_schema_keeps_all_but_regular_expressions() -> None:
    """Given or read from the signature, a tool's schema is kept without its patterns (the
    tool checks those); an invalid given schema is refused."""
    tools = ToolRegistry()
    given: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"tag": {"type": "string", "pattern": "^(a+)+$"}},
    }
    tools.add("tag", lambda tag: tag, schema=given)
    assert tools.schema("tag") == {"type": "object", "properties": {"tag": {"type": "string"}}}

    def rename(item: Named, force: bool = False) -> None: ...

    tools.add("rename", rename)
    schema = tools.schema("rename")
    assert schema is not None and '"pattern"' not in json.dumps(schema)
    assert schema["required"] == ["item"]
    with pytest.raises(InvalidRequest, match="not a valid JSON Schema"):
        tools.add("bad", lambda: None, schema={"type": "nope"})


def shell_tools(ran: list[object]) -> ToolRegistry:
    """A registry with a ``shell(command: str)`` that records each command it runs."""
    tools = ToolRegistry()

    @tools.tool
    def shell(command: str) -> str:
        ran.append(command)
        return "ok"

    return tools


async def test_an_edit_that_breaks_the_tools_schema_is_422_and_stays_pending(
    sides: Sides,
) -> None:
    """The issue's example: a queued shell call edited to ["rm", "-rf", "/"] and approved is
    refused (422 over HTTP) and stays pending; nothing runs."""
    ran: list[object] = []
    tools = shell_tools(ran)
    body = {
        "session_id": "s",
        "tool_name": "shell",
        "tool_args": {"command": "ls"},
        "args_schema": tools.schema("shell"),
    }
    request_id = (await sides.agent.submit(body)).request.id
    edit = {"type": "approve", "args": {"command": ["rm", "-rf", "/"]}}
    with pytest.raises(InvalidDecision, match=r"args/command: \['rm', '-rf', '/'\] is not of"):
        await sides.person.decide(request_id, edit)
    assert (await sides.agent.get(request_id)).status == "pending"
    assert await Executor(sides.agent, tools).run_once() == 0
    await sides.person.decide(request_id, {"type": "approve", "args": {"command": "pwd"}})
    assert await Executor(sides.agent, tools).run_once() == 1
    assert ran == ["pwd"]


async def test_a_call_without_schema_that_breaks_the_registrys_is_failed_unrun(
    sides: Sides,
) -> None:
    """A request sent without args_schema, edited to break the tool's signature, is reported
    failed by the executor whose registry knows the schema; the tool is never called."""
    ran: list[object] = []
    tools = shell_tools(ran)
    request_id = await approved(sides, "shell", {"command": "ls"}, edit={"command": ["rm"]})
    finished: list[Request] = []
    assert await Executor(sides.agent, tools, on_finished=finished.append).run_once() == 1
    failed = approval(await sides.agent.get(request_id))
    assert failed.status == "failed"
    assert failed.result is not None
    assert "args/command" in (failed.result.error or "")
    assert [r.status for r in finished] == ["failed"]
    assert ran == []


async def test_a_claim_of_an_edit_that_breaks_the_requests_schema_fails_it_unrun(
    sides: Sides,
) -> None:
    """A call approved with an edit its schema refuses (stored by an older signoff that did
    not check) is refused at claim and failed by signoff; the tool never runs."""
    ran: list[object] = []
    tools = ToolRegistry()
    tools.add("shell", lambda **kw: ran.append(kw), schema={"type": "object"})  # no check
    bad: dict[str, JsonValue] = {"command": ["rm", "-rf", "/"]}
    request_id = await approved(sides, "shell", {"command": "ls"}, edit=bad)
    stored = approval(await sides.service.get(request_id))
    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"command": {"type": "string"}},
    }
    older = stored.model_copy(update={"args_schema": schema, "version": stored.version + 1})
    await sides.service.store.commit(Write(at=stored.updated_at, update=older))
    with pytest.raises(InvalidDecision, match="must not run"):
        await sides.agent.claim(request_id, bad)
    failed = approval(await sides.agent.get(request_id))
    assert failed.status == "failed"
    assert failed.result is not None and "not run" in (failed.result.error or "")
    trail = [e.action for e in await sides.service.audit(request_id)]
    assert trail[-1] == "fail"
    assert "claim" not in trail
    assert await Executor(sides.agent, tools).run_once() == 0
    assert ran == []


async def test_args_outside_the_signature_are_failed_and_never_run(sides: Sides) -> None:
    """Args the tool's signature does not describe are reported failed; the tool never runs."""
    ran: list[object] = []
    tools = ToolRegistry()
    tools.add("takes_x", lambda x: ran.append(x))
    request_id = await approved(sides, "takes_x", {"y": 1})
    assert await Executor(sides.agent, tools).run_once() == 1
    failed = approval(await sides.agent.get(request_id))
    assert failed.status == "failed"
    assert failed.result is not None
    assert (failed.result.error or "").startswith("not run: the arguments do not fit")
    assert ran == []


async def test_a_result_that_is_not_json_is_recorded_as_text(sides: Sides) -> None:
    """A return value with no JSON form is stored as its ``str()``."""
    tools = ToolRegistry()

    class Receipt:
        def __str__(self) -> str:
            return "receipt #7"

    tools.add("pay", lambda amount: Receipt())
    request_id = await approved(sides, "pay", {"amount": 5})
    await Executor(sides.agent, tools).run_once()
    done = approval(await sides.agent.get(request_id))
    assert done.result is not None and done.result.result == "receipt #7"


async def test_undecided_refused_and_unknown_tool_calls_never_run(
    sides: Sides, registry: ToolRegistry, calls: Calls
) -> None:
    """Pending, rejected and responded calls, and approved calls of other tools, are left alone."""
    pending = await submit(sides.agent, "echo", {"n": 1})
    rejected = await submit(sides.agent, "echo", {"n": 2})
    await sides.person.decide(rejected, {"type": "reject", "reason": "no"})
    responded = await submit(sides.agent, "echo", {"n": 3})
    await sides.person.decide(responded, {"type": "respond", "feedback": "do not"})
    elsewhere = await approved(sides, "not_mine", {"n": 4})
    assert await Executor(sides.agent, registry).run_once() == 0
    assert calls.seen == []
    assert [await status_of(sides.service, i) for i in (pending, rejected, responded)] == [
        "pending",
        "rejected",
        "rejected",
    ]
    assert await status_of(sides.service, elsewhere) == "approved"


async def test_a_session_executor_runs_only_that_session(
    sides: Sides, registry: ToolRegistry, calls: Calls
) -> None:
    """With ``session_id`` the executor leaves other sessions' approved calls alone."""
    mine = await approved(sides, "echo", {"id": "mine"}, session="a")
    theirs = await approved(sides, "echo", {"id": "theirs"}, session="b")
    assert await Executor(sides.agent, registry, session_id="a").run_once() == 1
    assert calls.ids() == Counter({"mine": 1})
    assert await status_of(sides.service, mine) == "completed"
    assert await status_of(sides.service, theirs) == "approved"


async def test_two_executors_run_each_of_twenty_calls_exactly_once(
    sides: Sides, registry: ToolRegistry, calls: Calls
) -> None:
    """Two executors racing over one backend split the work; no call runs twice or not at all."""
    ids = [await approved(sides, "echo", {"id": n}) for n in range(20)]
    first, second = Executor(sides.agent, registry), Executor(sides.agent, registry)
    ran = await asyncio.gather(first.run_once(), second.run_once())
    assert sum(ran) == 20
    assert calls.ids() == Counter({str(n): 1 for n in range(20)})
    assert {await status_of(sides.service, i) for i in ids} == {"completed"}


async def test_two_running_executors_take_calls_as_they_are_approved(
    sides: Sides, registry: ToolRegistry, calls: Calls
) -> None:
    """Executors started before the approvals run each of them exactly once, then stop."""
    async with (
        Executor(sides.agent, registry, poll=0.05),
        Executor(sides.agent, registry, poll=0.05),
    ):
        ids = [await approved(sides, "echo", {"id": n}) for n in range(20)]

        async def all_done() -> bool:
            return {await status_of(sides.service, i) for i in ids} == {"completed"}

        await until(all_done)
    assert calls.ids() == Counter({str(n): 1 for n in range(20)})


async def test_a_decided_event_wakes_the_executor_before_the_next_poll(
    registry: ToolRegistry, calls: Calls
) -> None:
    """With an hour between polls, an approval still runs at once: the event woke it."""
    service = memory_service()
    agent, person = LocalBackend(service, AGENT), LocalBackend(service, APPROVER)
    async with Executor(agent, registry, poll=3600):
        await asyncio.sleep(0.1)  # the initial sweep finds nothing
        request_id = await submit(agent, "echo", {"id": "late"})
        await person.decide(request_id, {"type": "approve"})

        async def done() -> bool:
            return await status_of(service, request_id) == "completed"

        await until(done, timeout=5)
    assert calls.ids() == Counter({"late": 1})


async def test_executors_in_two_processes_on_one_database_run_each_call_once(
    tmp_path: Path, registry: ToolRegistry, calls: Calls
) -> None:
    """Two services on one SQLite file (as two processes would be): every call runs once."""
    services = [
        Service(SQLiteStore(tmp_path / "shared.db"), bus=LocalBus(), read_file=None)
        for _ in range(2)
    ]
    for service in services:
        await service.open()
    try:
        agent, person = LocalBackend(services[0], AGENT), LocalBackend(services[0], APPROVER)
        for n in range(20):
            await person.decide(await submit(agent, "echo", {"id": n}), {"type": "approve"})
        executors = [Executor(LocalBackend(s, AGENT), registry) for s in services]
        ran = await asyncio.gather(*(e.run_once() for e in executors))
        assert sum(ran) == 20
        assert calls.ids() == Counter({str(n): 1 for n in range(20)})
    finally:
        for service in services:
            await service.close()


async def test_only_the_requester_or_an_admin_can_run_an_agents_calls(
    registry: ToolRegistry, calls: Calls
) -> None:
    """A worker acting as another agent sees none of this agent's calls; an admin runs them."""
    service = memory_service()
    request_id = await submit(LocalBackend(service, AGENT), "echo", {"id": "x"})
    await service.decide(request_id, {"type": "approve"}, APPROVER)
    stranger = LocalBackend(service, Principal(name="worker", role="agent"))
    assert await Executor(stranger, registry).run_once() == 0
    assert await Executor(LocalBackend(service, ADMIN), registry).run_once() == 1
    done = approval(await service.get(request_id))
    assert done.status == "completed" and done.claimed_by == ADMIN.name


async def test_a_call_cut_off_by_cancellation_is_reported_failed(sides: Sides) -> None:
    """Cancelling the worker mid-call marks the call failed rather than leaving it executing."""
    started = asyncio.Event()
    tools = ToolRegistry()

    @tools.tool
    async def slow() -> None:
        started.set()
        await asyncio.Event().wait()

    request_id = await approved(sides, "slow", {})
    task = asyncio.create_task(Executor(sides.agent, tools).run_once())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    failed = approval(await sides.agent.get(request_id))
    assert failed.status == "failed"
    assert failed.result is not None and "worker stopped" in (failed.result.error or "")


async def test_on_finished_hears_each_call_the_executor_ran(
    sides: Sides, registry: ToolRegistry
) -> None:
    """The callback gets each finished request, completed or failed."""
    finished: list[tuple[str, str]] = []
    ok = await approved(sides, "echo", {"n": 1})
    bad = await approved(sides, "boom", {"message": "x"})
    executor = Executor(
        sides.agent, registry, on_finished=lambda r: finished.append((r.id, r.status))
    )
    await executor.run_once()
    assert sorted(finished) == sorted([(ok, "completed"), (bad, "failed")])


async def test_stop_ends_run_and_run_can_start_again(
    sides: Sides, registry: ToolRegistry, calls: Calls
) -> None:
    """``stop`` before or during ``run`` makes it return; a later run works again."""
    executor = Executor(sides.agent, registry, poll=0.05)
    executor.stop()
    await asyncio.wait_for(executor.run(), timeout=5)
    request_id = await approved(sides, "echo", {"id": "again"})
    async with executor:

        async def done() -> bool:
            return await status_of(sides.service, request_id) == "completed"

        await until(done)
    assert calls.ids() == Counter({"again": 1})


async def test_a_long_call_renews_its_lease_and_is_not_failed_by_the_server() -> None:
    """A call running past its 1 s lease renews it while it runs: the sweeper leaves it be."""
    service = Service(MemoryStore(), bus=LocalBus(), read_file=None)  # the real clock
    tools = ToolRegistry()

    @tools.tool
    async def slow() -> str:
        await asyncio.sleep(2.5)
        return "done"

    agent = LocalBackend(service, AGENT)
    request_id = await submit(agent, "slow", {})
    await service.decide(request_id, {"type": "approve"}, APPROVER)
    service.start_sweeper(interval=0.1)
    try:
        finished = await Executor(agent, tools, lease=1.0).execute(
            approval(await service.get(request_id))
        )
    finally:
        await service.stop_sweeper()
    assert finished is not None and finished.status == "completed"
    renewals = [e for e in await service.audit(request_id) if e.action == "renew"]
    assert len(renewals) >= 3
