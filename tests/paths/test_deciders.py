"""Every place a person decides, each with the cheapest agent: one decision, one outcome.

The agent is :mod:`tests.paths.plain_agent` (``AsyncClient`` over HTTP against the module's
real ``signoff serve``); the decision travels through one decider path per parameter. Each
combination must end in the same request state, audit projection, model text and tool runs.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from signoff.client import AsyncClient
from signoff.domain.principals import Principal
from signoff.errors import InvalidTransition
from signoff.service import Service
from signoff.store.sqlite import SQLiteStore
from tests.paths.plain_agent import file_request, settle
from tests.paths.scenarios import PathsServer, Scenario, check, scenarios

if TYPE_CHECKING:
    from tests.paths.mcp_paths import Proxy
    from tests.paths.terminal_inbox import TerminalInbox
    from tests.paths.web_inbox import WebInbox

Decide = Callable[[PathsServer, str, dict[str, Any]], Awaitable[bool]]
"""A decider path: decide one request; True when this decision was taken, False on conflict."""


async def by_service(paths: PathsServer, request_id: str, decision: dict[str, Any]) -> bool:
    """A Python ``Service`` in this process on the server's own SQLite file."""
    async with Service(SQLiteStore(paths.db_path)) as service:
        try:
            await service.decide(request_id, decision, Principal(name="alice", role="approver"))
        except InvalidTransition:
            return False
    return True


async def by_client(paths: PathsServer, request_id: str, decision: dict[str, Any]) -> bool:
    """``signoff.AsyncClient`` over HTTP with an admin's token."""
    async with AsyncClient(paths.server.base, paths.admin_token) as person:
        try:
            await person.decide(request_id, decision)
        except InvalidTransition:
            return False
    return True


def cli_args(request_id: str, decision: dict[str, Any]) -> list[str]:
    """The ``signoff`` command line that makes ``decision``."""
    kind = decision["type"]
    if kind == "approve":
        extra = ["--args", json.dumps(decision["args"])] if "args" in decision else []
        return ["approve", request_id, *extra]
    if kind == "reject":
        return ["reject", request_id, "--reason", decision["reason"]]
    if kind == "respond":
        return ["respond", request_id, "--feedback", decision["feedback"]]
    if kind == "choose":
        return ["choose", request_id, decision["choice"]]
    if kind == "answer":
        answers = [f"--answer={k}={v}" for k, v in decision["answers"].items()]
        return ["answer", request_id, *answers, "--feedback", decision["feedback"]]
    raise AssertionError(kind)


async def by_cli(paths: PathsServer, request_id: str, decision: dict[str, Any]) -> bool:
    """``signoff approve|reject|respond|choose|answer`` in a subprocess on the server's file."""
    done = await asyncio.to_thread(paths.server.cli, *cli_args(request_id, decision))
    if done.returncode == 0:
        return True
    assert "error:" in done.stderr and "Traceback" not in done.stderr, done.stderr
    return False


async def by_cli_remote(paths: PathsServer, request_id: str, decision: dict[str, Any]) -> bool:
    """The same commands against the server over HTTP (``--server`` and ``--token``)."""

    def run() -> Any:
        import subprocess
        import sys

        return subprocess.run(
            [
                sys.executable,
                "-m",
                "signoff",
                *cli_args(request_id, decision),
                "--server",
                paths.server.base,
                "--token",
                paths.admin_token,
            ],
            capture_output=True,
            text=True,
            env=paths.server.env,
            timeout=60,
            check=False,
        )

    done = await asyncio.to_thread(run)
    if done.returncode == 0:
        return True
    assert "error:" in done.stderr and "Traceback" not in done.stderr, done.stderr
    return False


def by_inbox(inbox: WebInbox | TerminalInbox) -> Decide:
    """The web inbox in Chromium (the card's controls) or the terminal inbox (its keys)."""

    async def decide(paths: PathsServer, request_id: str, decision: dict[str, Any]) -> bool:
        await inbox.decide(request_id, decision)
        return True

    return decide


DECIDERS: dict[str, Decide] = {
    "service": by_service,
    "client": by_client,
    "cli": by_cli,
    "cli-remote": by_cli_remote,
}

HELD: dict[str, tuple[str, Callable[[Any], Decide]]] = {
    "web": ("web_inbox", by_inbox),
    "terminal": ("terminal_inbox", by_inbox),
}
"""Deciders on a session held for the module: the fixture holding it, and the decider on it."""

NO_RACE = {"web", "terminal"}
"""Deciders whose race is not run here: a click or key gives no taken/refused answer."""

MISSING: dict[str, set[str]] = {"terminal": {"respond"}}
"""Decisions a decider path does not offer at all (reported to the lead, not tested)."""


async def run_combination(paths: PathsServer, scenario: Scenario, decide: Decide) -> None:
    """File the scenario's request, decide it through ``decide``, and check the outcome."""
    session = f"s-{secrets.token_hex(4)}"
    request_id = await file_request(paths, scenario, session)
    agent = asyncio.create_task(settle(paths, request_id))
    if scenario.race is not None:
        first, second = scenario.race
        taken = await asyncio.gather(
            decide(paths, request_id, first), decide(paths, request_id, second)
        )
        assert sorted(taken) == [False, True], taken
    elif scenario.decision is not None:
        assert await decide(paths, request_id, scenario.decision)
    outcome = await asyncio.wait_for(agent, 40)
    check(paths, scenario, outcome)


COMBINATIONS = [
    pytest.param(decider, scenario, id=f"{decider}-{scenario.name}")
    for decider in [*DECIDERS, *HELD]
    for scenario in scenarios()
    if not (scenario.name == "expiry" and decider != "client")  # nobody decides: one path
    and not (scenario.race is not None and decider in NO_RACE)
    and scenario.name not in MISSING.get(decider, set())
    and scenario.refused is None  # an edit breaking the schema: the agent paths carry it
]


@pytest.mark.parametrize(("decider", "scenario"), COMBINATIONS)
async def test_decider_path(
    paths: PathsServer, decider: str, scenario: Scenario, request: pytest.FixtureRequest
) -> None:
    """A decision made through this path ends exactly as the scenario says."""
    if decider in HELD:
        fixture, make = HELD[decider]
        decide = make(request.getfixturevalue(fixture))
    else:
        decide = DECIDERS[decider]
    await run_combination(paths, scenario, decide)


async def session_ids(paths: PathsServer, session_id: str) -> set[str]:
    """The ids of every request in the session, whatever its state."""
    async with httpx.AsyncClient(
        base_url=paths.api, headers={"Authorization": f"Bearer {paths.admin_token}"}, timeout=10
    ) as http:
        listed = await http.get("/requests", params={"session_id": session_id, "limit": 200})
    return {str(item["id"]) for item in listed.json()["items"]}


def finder(known: set[str]) -> Callable[[PathsServer, str, Scenario], Coroutine[Any, Any, str]]:
    """Only find the one new request in the session (the MCP client's answer decides it)."""

    async def find(paths: PathsServer, session_id: str, scenario: Scenario) -> str:
        for _ in range(400):
            new = await session_ids(paths, session_id) - known
            if new:
                assert len(new) == 1, new
                return new.pop()
            await asyncio.sleep(0.05)
        raise AssertionError(f"the proxy filed nothing in {session_id}")

    return find


@pytest.mark.parametrize("scenario", scenarios(only=("approve", "reject")), ids=lambda s: s.name)
async def test_mcp_elicitation_decider(
    paths: PathsServer, mcp_elicit: Proxy, scenario: Scenario
) -> None:
    """An approve or reject answered in the MCP client's elicitation ends as in the inbox."""
    from tests.paths.mcp_paths import run_proxy

    assert scenario.decision is not None
    approve = scenario.decision["type"] == "approve"
    mcp_elicit.answer = {
        "approve": approve,
        "reason": "" if approve else scenario.decision["reason"],
    }
    find = finder(await session_ids(paths, mcp_elicit.session_id))
    outcome = await asyncio.wait_for(run_proxy(mcp_elicit, paths, scenario, find), 60)
    check(paths, scenario, outcome, via="mcp-elicitation")


async def test_expiry_with_nobody_deciding_is_seen_alike(paths: PathsServer) -> None:
    """An expired request reads the same to every reader: state, audit and what the model hears."""
    scenario = next(s for s in scenarios() if s.name == "expiry")
    request_id = await file_request(paths, scenario, "s-expiry")
    outcome = await settle(paths, request_id)
    check(paths, scenario, outcome)
    async with httpx.AsyncClient(timeout=10) as http:
        late = await http.post(
            f"{paths.api}/requests/{request_id}/decision",
            json={"type": "approve"},
            headers={"Authorization": f"Bearer {paths.admin_token}"},
        )
    assert late.status_code == 409, late.text


@pytest.mark.parametrize(
    "scenario", scenarios(only=("approve", "edit", "reject", "race")), ids=lambda s: s.name
)
async def test_resume_decider(paths: PathsServer, scenario: Scenario) -> None:
    """A hosted run's call decided through ``POST /resume/{id}`` ends as the scenario says."""
    pytest.importorskip("pydantic_ai", reason="hosted runs need the pydantic-ai extra")
    from tests.paths import hosted

    before = len(hosted.ran(paths))
    task = await hosted.start(paths, scenario, f"resume-{secrets.token_hex(4)}")
    request_id = task["request_id"]
    if scenario.race is not None:
        first, second = scenario.race
        taken = await asyncio.gather(
            hosted.resume(paths, request_id, first), hosted.resume(paths, request_id, second)
        )
        assert sorted(taken) == [False, True], taken
    else:
        assert scenario.decision is not None
        assert await hosted.resume(paths, request_id, scenario.decision)
    check(paths, scenario, await hosted.finish(paths, task, before))
