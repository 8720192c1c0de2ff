"""`signoff chat` on screen, driven through Textual's pilot against an in-process service."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textual", reason="signoff chat needs the tui extra")
pytest.importorskip("pydantic_ai", reason="signoff chat needs the pydantic-ai extra")

from pydantic_ai import DeferredToolRequests
from textual.pilot import Pilot
from textual.widgets import Input

from signoff.backends import LocalBackend
from signoff.bus.local import LocalBus
from signoff.chat import (
    CHAT_PRINCIPAL,
    ChatSession,
    TerminalAnswer,
    build_agent,
    chat_tools,
    decide_here,
)
from signoff.chat.demo import DEMO_MODEL_NAME
from signoff.client import AsyncClient
from signoff.domain.policies import Policy
from signoff.domain.principals import Principal
from signoff.domain.requests import ApprovalRequest, Status
from signoff.service import Service, read_text_file
from signoff.store.base import RequestQuery
from signoff.store.memory import MemoryStore
from signoff.testing import APPROVER
from signoff.tui.chat import AWAITING, ChatApp, args_view
from tests.serving import Server, new_token
from tests.serving import agent_token as agent_token_of

ME = Principal(name="me", role="admin")
GATED = '[tools]\nneed_approval = ["write_file", "edit_file", "shell"]\n'
THREE = "create notes.md saying hello and run ls -la and delete old logs"


@dataclass
class World:
    """A service, the chat's and the person's backends on it, and the working directory."""

    service: Service
    root: Path
    policy: Policy

    @property
    def agent_side(self) -> LocalBackend:
        return LocalBackend(self.service, CHAT_PRINCIPAL)

    async def session(self) -> ChatSession:
        agent = build_agent(None, self.root)
        return await ChatSession.start(
            agent, self.agent_side, self.service.store, user=ME.name, policy=self.policy
        )

    def app(self, session: ChatSession) -> ChatApp:
        return ChatApp(
            session,
            LocalBackend(self.service, ME),
            model_name=DEMO_MODEL_NAME,
            mode="local",
            demo=True,
        )

    async def requests(self, status: Status | None = None) -> list[ApprovalRequest]:
        page = await self.service.list_requests(RequestQuery(status=status, limit=50))
        return [r for r in page.items if isinstance(r, ApprovalRequest)]


@pytest.fixture
async def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[World]:
    """A working directory with a gated policy and an in-memory service that previews files."""
    monkeypatch.chdir(tmp_path)
    policy = Policy.from_toml(GATED)
    service = Service(MemoryStore(), bus=LocalBus(), policy=policy, read_file=read_text_file)
    await service.open()
    try:
        yield World(service, tmp_path, policy)
    finally:
        await service.close()


async def until(pilot: Pilot[None], check: Callable[[], bool], timeout: float = 10.0) -> None:
    """Let the app run until ``check()`` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError("timed out waiting for the app")
        await pilot.pause(0.02)


async def say(pilot: Pilot[None], app: ChatApp, text: str) -> None:
    """Type ``text`` into the prompt (as one paste) and press Enter."""
    app.query_one("#prompt", Input).value = text
    await pilot.press("enter")


async def waiting(pilot: Pilot[None], app: ChatApp, title: str) -> None:
    """Wait until the approval panel asks about ``title`` (e.g. "Tool 1 of 1: shell")."""
    await until(pilot, lambda: app.awaiting and title in app.panel_text)


def said(app: ChatApp, text: str) -> bool:
    return any(text in line for line in app.transcript)


async def test_enter_approves_and_panel_shows_args_and_diff(world: World) -> None:
    """Enter approves: the panel showed name, call id, JSON args and diff; the file is written."""
    app = world.app(await world.session())
    async with app.run_test() as pilot:
        await say(pilot, app, "create notes.md saying hello")
        await waiting(pilot, app, "Tool 1 of 1: write_file")
        panel = app.panel_text
        assert "call id signoff-demo-1-1" in panel
        assert '"path": "notes.md"' in panel
        assert "+hello" in panel
        await pilot.press("enter")
        await until(pilot, lambda: not app.busy)
    assert (world.root / "notes.md").read_text() == "hello\n"
    assert said(app, "write_file: approved by you")
    assert [r.status for r in await world.requests()] == ["completed"]


async def test_y_approves(world: World) -> None:
    """Typing y and Enter approves; the command runs and the model reports its output."""
    app = world.app(await world.session())
    async with app.run_test() as pilot:
        await say(pilot, app, "run echo hi-there")
        await waiting(pilot, app, "Tool 1 of 1: shell")
        await pilot.press("y", "enter")
        await until(pilot, lambda: not app.busy)
    assert said(app, "hi-there")
    assert [r.decision.decided_by for r in await world.requests() if r.decision] == ["me"]


async def test_text_rejects_with_reason_reaching_the_model(world: World) -> None:
    """Any other text rejects with it as the reason, and the model's reply quotes it."""
    app = world.app(await world.session())
    async with app.run_test() as pilot:
        await say(pilot, app, "run touch marker")
        await waiting(pilot, app, "Tool 1 of 1: shell")
        await say(pilot, app, "not on a Friday")
        await until(pilot, lambda: not app.busy)
    assert not (world.root / "marker").exists()
    assert said(app, "agent: Here is what happened:")
    assert said(app, "shell was not run: A person rejected this call: not on a Friday")
    [request] = await world.requests()
    assert request.status == "rejected"


async def test_e_edits_the_args(world: World) -> None:
    """`e` puts the args in the prompt; bad edits are refused, a good one runs and is noted."""
    app = world.app(await world.session())
    async with app.run_test() as pilot:
        await say(pilot, app, "create notes.md saying hello")
        await waiting(pilot, app, "Tool 1 of 1: write_file")
        await pilot.press("e", "enter")
        await until(pilot, lambda: "notes.md" in app.query_one("#prompt", Input).value)
        await say(pilot, app, '{"path": 3}')
        await until(pilot, lambda: "does not accept" in app.panel_text)
        assert app.awaiting
        await say(pilot, app, '{"path": "notes.md", "content": "edited\\n"}')
        await until(pilot, lambda: not app.busy)
    assert (world.root / "notes.md").read_text() == "edited\n"
    assert said(app, "approved with edited arguments by you")
    assert said(app, "a person edited the arguments")


async def test_ctrl_c_cancels_every_pending_call_and_the_session_goes_on(world: World) -> None:
    """Ctrl+C withdraws all three waiting calls, the model is told, and the next prompt works."""
    app = world.app(await world.session())
    async with app.run_test() as pilot:
        await say(pilot, app, THREE)
        await waiting(pilot, app, "Tool 1 of 3")
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not app.busy)
        assert said(app, "Canceled 3 pending call(s)")
        assert said(app, "canceled this call at the terminal")
        assert [r.status for r in await world.requests()] == ["canceled"] * 3
        await say(pilot, app, "run echo still-here")
        await waiting(pilot, app, "Tool 1 of 1: shell")
        await pilot.press("enter")
        await until(pilot, lambda: not app.busy)
    assert said(app, "still-here")
    assert not (world.root / "notes.md").exists()


async def test_three_parallel_calls_are_asked_one_by_one(world: World) -> None:
    """Three parallel calls show as Tool 1, 2 and 3 of 3, in the model's order."""
    app = world.app(await world.session())
    async with app.run_test() as pilot:
        await say(pilot, app, THREE)
        await waiting(pilot, app, "Tool 1 of 3: write_file")
        await pilot.press("enter")
        await waiting(pilot, app, "Tool 2 of 3: shell")
        assert "ls -la" in app.panel_text
        await pilot.press("enter")
        await waiting(pilot, app, "Tool 3 of 3: shell")
        await say(pilot, app, "keep the logs")
        await until(pilot, lambda: not app.busy)
    assert said(app, "shell was not run: A person rejected this call: keep the logs")
    assert (world.root / "notes.md").exists()


async def test_restored_session_asks_for_waiting_calls_again(world: World) -> None:
    """A session saved while a call waited asks about the same request again on restore."""
    first = await world.session()
    result = await first.run("create notes.md saying hello")
    assert isinstance(result.output, DeferredToolRequests)
    pause = await first.pause(result.output)
    [(_, request_id)] = pause.asked
    restored = await ChatSession.restore(
        first.id,
        build_agent(None, world.root),
        world.agent_side,
        world.service.store,
        policy=world.policy,
    )
    app = world.app(restored)
    async with app.run_test() as pilot:
        await waiting(pilot, app, "Tool 1 of 1: write_file")
        assert request_id in app.panel_text
        assert said(app, "you: create notes.md saying hello")
        await pilot.press("enter")
        await until(pilot, lambda: not app.busy)
    assert (world.root / "notes.md").read_text() == "hello\n"
    stored = await world.service.store.get_task(first.id)
    assert stored is not None and stored.pending == ()
    assert len(await world.requests()) == 1


async def test_decision_from_another_backend_is_picked_up(world: World) -> None:
    """While the terminal waits, an approval from elsewhere (the web inbox) wins and is shown."""
    app = world.app(await world.session())
    web = LocalBackend(world.service, APPROVER)
    async with app.run_test() as pilot:
        await say(pilot, app, "create notes.md saying hello")
        await waiting(pilot, app, "Tool 1 of 1: write_file")
        [request] = await world.requests("pending")
        await web.decide(request.id, {"type": "approve"})
        await until(pilot, lambda: not app.busy)
    assert said(app, "approved by alice via person (decided elsewhere first)")
    assert (world.root / "notes.md").read_text() == "hello\n"


async def test_terminal_decision_losing_the_race_shows_the_winner(world: World) -> None:
    """When the web decided first, the terminal's decide loses and returns the web's decision."""
    session = await world.session()
    result = await session.run("run echo hi")
    assert isinstance(result.output, DeferredToolRequests)
    [(_, request_id)] = (await session.pause(result.output)).asked
    await LocalBackend(world.service, APPROVER).decide(
        request_id, {"type": "reject", "reason": "web says no"}
    )
    request, won = await decide_here(
        LocalBackend(world.service, ME), request_id, {"type": "approve"}
    )
    assert not won
    assert request.status == "rejected"


async def test_status_bar_shows_mode_model_and_awaiting(world: World) -> None:
    """The status bar names mode and model (the demo, said so) and says Awaiting Approval."""
    app = world.app(await world.session())
    async with app.run_test() as pilot:
        assert app.status_text.startswith("Ready | Mode: local | ")
        assert f"Model: {DEMO_MODEL_NAME} (no --model given: scripted demo)" in app.status_text
        await say(pilot, app, "run echo hi")
        await waiting(pilot, app, "Tool 1 of 1: shell")
        assert app.status_text.startswith("Awaiting Approval | Enter: Approve | Text: Reject")
        assert AWAITING in app.status_text
        await pilot.press("enter")
        await until(pilot, lambda: not app.busy)
        assert app.status_text.startswith("Ready")


async def test_ungated_tools_run_without_asking(world: World) -> None:
    """Which calls ask comes from tools.toml: a tool it does not list runs straight away."""
    world.policy = Policy.from_toml('[tools]\nneed_approval = ["write_file"]\n')
    app = world.app(await world.session())
    async with app.run_test() as pilot:
        await say(pilot, app, "run echo ungated")
        await until(pilot, lambda: said(app, "agent:"))
    assert said(app, "ungated")
    assert await world.requests() == []


def test_no_tools_toml_asks_for_everything(tmp_path: Path) -> None:
    """With no tools.toml anywhere every call needs approval (fail closed)."""
    policy = Policy.load(tmp_path, global_path=tmp_path / "missing.toml")
    assert policy.evaluate("read_file", {"path": "x"}).verdict == "ask"


def test_long_args_are_cut_after_twenty_lines() -> None:
    """Argument JSON past 20 lines ends with '... (truncated)'."""
    lines = args_view({f"k{n:02}": n for n in range(30)}).splitlines()
    assert len(lines) == 21
    assert lines[-1] == "... (truncated)"


def test_answers_parse_as_the_panel_says() -> None:
    """Empty and y approve, e edits, any other text rejects with itself as the reason."""
    assert TerminalAnswer.parse("").kind == "approve"
    assert TerminalAnswer.parse(" y ").kind == "approve"
    assert TerminalAnswer.parse("e").kind == "edit"
    assert TerminalAnswer.parse("too risky") == TerminalAnswer("reject", "too risky")


def test_tools_stay_in_the_working_directory(tmp_path: Path) -> None:
    """The file tools work relative to the directory and refuse paths outside it."""
    tools: dict[str, Any] = dict(chat_tools(tmp_path).tools)
    write = tools["write_file"].function
    edit = tools["edit_file"].function
    assert write(path="a.txt", content="one two") == "wrote 7 characters to a.txt"
    assert edit(path="a.txt", old_string="two", new_string="three") == "edited a.txt"
    assert tools["read_file"].function(path="a.txt") == "one three"
    assert tools["list_files"].function() == "a.txt"
    assert "outside" in write(path="../escape.txt", content="x")
    assert "not found" in edit(path="a.txt", old_string="zzz", new_string="y")


async def test_remote_against_a_real_server_web_and_terminal(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--remote: calls wait on a real server; the web's approval and the terminal's both count."""
    monkeypatch.chdir(tmp_path)
    agent_token = agent_token_of(server, "chat-agent")
    person_token = server.admin_token
    assert person_token is not None
    web_token = new_token(server, "web", "approver")[0]
    policy = Policy.from_toml(GATED)
    async with (
        AsyncClient(server.base, agent_token) as filer,
        AsyncClient(server.base, person_token) as person,
        AsyncClient(server.base, web_token) as web,
    ):
        store = MemoryStore()
        await store.open()
        session = await ChatSession.start(
            build_agent(None, tmp_path), filer, store, user="me", policy=policy
        )
        app = ChatApp(session, person, model_name=DEMO_MODEL_NAME, mode="remote", demo=True)
        async with app.run_test() as pilot:
            await say(pilot, app, "create notes.md saying hello")
            await waiting(pilot, app, "Tool 1 of 1: write_file")
            [request] = (await web.list_requests(RequestQuery(status="pending"))).items
            await web.decide(request.id, {"type": "approve"})  # from the web inbox
            await until(pilot, lambda: not app.busy)
            assert (tmp_path / "notes.md").read_text() == "hello\n"
            await say(pilot, app, "run echo from-the-terminal")
            await waiting(pilot, app, "Tool 1 of 1: shell")
            await pilot.press("enter")  # approved here, recorded on the server
            await until(pilot, lambda: not app.busy)
        assert said(app, "from-the-terminal")
        decided = (await web.list_requests(RequestQuery(limit=10))).items
        by = sorted(r.decision.decided_by for r in decided if r.decision is not None)
        assert by == ["admin", "web"]
        await store.close()
