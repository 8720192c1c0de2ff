"""Deciding from Slack against a real ``signoff serve``: approve, reject with a reason, choose.

Slack's Web API is a local stand-in (``--slack-api-url``); interaction payloads are signed
as Slack signs them; the agent waits over HTTP for the decision.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("slack_sdk", reason="needs the slack extra")

from signoff.server.deps import API
from tests.serving import Server, agent_token, bearer, free_port, new_token, start_server
from tests.slack import (
    CHANNEL,
    MESSAGE_TS,
    SlackStandIn,
    click,
    link,
    post_interaction,
    slack_options,
    slack_stand_in,
    submit_view,
)

ALICE = "U0ALICE"
"""A Slack user linked to the approver ``alice``."""


@pytest.fixture(scope="module")
def stand_in() -> Iterator[SlackStandIn]:
    with slack_stand_in() as running:
        yield running


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, stand_in: SlackStandIn) -> Iterator[Server]:
    import os

    home = tmp_path_factory.mktemp("slack")
    env = {**os.environ, "XDG_CONFIG_HOME": str(home)}
    server = start_server(
        f"sqlite:///{home / 'serve.db'}", free_port(), env, *slack_options(stand_in)
    )
    server.env["ALICE_TOKEN"] = new_token(server, "alice", "approver")[0]
    link(server, ALICE, "alice")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def agent(served: Server) -> str:
    return agent_token(served, "deploy-bot")


def submit(server: Server, token: str, body: dict[str, Any]) -> dict[str, Any]:
    """File a request as the agent."""
    answer = httpx.post(f"{server.base}{API}/requests", json=body, headers=bearer(token))
    assert answer.status_code in (200, 201), answer.text
    filed: dict[str, Any] = answer.json()
    return filed


def waited(server: Server, token: str, request_id: str) -> dict[str, Any]:
    """What the agent's wait returns."""
    answer = httpx.get(
        f"{server.base}{API}/requests/{request_id}/wait",
        params={"timeout": 5},
        headers=bearer(token),
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def decide_entry(server: Server, request_id: str) -> dict[str, Any]:
    """The request's audit entry for its decision."""
    assert server.admin_token is not None
    answer = httpx.get(
        f"{server.base}{API}/audit",
        params={"request_id": request_id},
        headers=bearer(server.admin_token),
    )
    entries = [e for e in answer.json()["items"] if e["action"] == "decide"]
    assert len(entries) == 1, entries
    entry: dict[str, Any] = entries[0]
    return entry


def text_of(blocks: list[dict[str, Any]]) -> str:
    """Every text in a message's blocks, as one string."""
    return json.dumps(blocks, ensure_ascii=False)


def test_approve_from_slack(served: Server, agent: str, stand_in: SlackStandIn) -> None:
    """A linked person's Approve click decides as them via slack: the agent's wait returns
    approved, the audit names them, the message is updated naming them, and a second click
    is told who already decided."""
    filed = submit(
        served, agent, {"session_id": "s", "tool_name": "deploy", "tool_args": {"env": "prod"}}
    )
    answer = post_interaction(served, click(ALICE, "signoff_approve", filed["id"]))
    assert answer.status_code == 200, answer.text

    decided = waited(served, agent, filed["id"])
    assert decided["status"] == "approved"
    assert decided["decision"]["decided_by"] == "alice"
    assert decided["decision"]["via"] == "slack"
    entry = decide_entry(served, filed["id"])
    assert entry["actor"] == "alice"
    assert entry["details"]["via"] == "slack"

    update = stand_in.wait_for("chat.update")[-1]
    assert "Approved by alice" in text_of(update["blocks"])
    assert "signoff_approve" not in text_of(update["blocks"])

    before = len(stand_in.of("chat.postEphemeral"))
    again = post_interaction(served, click(ALICE, "signoff_approve", filed["id"]))
    assert again.status_code == 200
    told = stand_in.wait_for("chat.postEphemeral", before + 1)[-1]
    assert told["user"] == ALICE
    assert "Already decided by alice" in told["text"]


def test_reject_with_a_reason_from_a_modal(
    served: Server, agent: str, stand_in: SlackStandIn
) -> None:
    """Reject opens a modal (views.open); its submission rejects with the reason, which the
    agent's wait returns and the updated message shows."""
    filed = submit(
        served, agent, {"session_id": "s", "tool_name": "drop_table", "tool_args": {"t": "users"}}
    )
    opened = len(stand_in.of("views.open"))
    assert post_interaction(served, click(ALICE, "signoff_reject", filed["id"])).status_code == 200
    view = stand_in.wait_for("views.open", opened + 1)[-1]["view"]
    assert view["callback_id"] == "signoff_reject_reason"
    pending = httpx.get(f"{served.base}{API}/requests/{filed['id']}", headers=bearer(agent))
    assert pending.json()["status"] == "pending"  # opening the modal decides nothing
    (field,) = [b for b in view["blocks"] if b.get("block_id") == "reason"]
    assert field["optional"] is False  # Slack itself asks for the reason
    blank = post_interaction(served, submit_view(ALICE, view, "  \n "))
    assert blank.json() == {
        "response_action": "errors",
        "errors": {"reason": "Not decided: a reason is required to reject"},
    }
    still = httpx.get(f"{served.base}{API}/requests/{filed['id']}", headers=bearer(agent))
    assert still.json()["status"] == "pending"

    answer = post_interaction(served, submit_view(ALICE, view, "not on a Friday"))
    assert answer.status_code == 200, answer.text
    assert answer.content == b""  # the modal closes

    decided = waited(served, agent, filed["id"])
    assert decided["status"] == "rejected"
    assert decided["decision"]["decision"]["reason"] == "not on a Friday"
    assert decided["decision"]["via"] == "slack"
    # the message is updated after the decision is committed, which the wait may beat
    updates = wait_until(
        lambda: [u for u in stand_in.of("chat.update") if "not on a Friday" in text_of(u["blocks"])]
    )
    assert "Rejected by alice (via slack): not on a Friday" in text_of(updates[-1]["blocks"])


def test_choose_an_option(served: Server, agent: str, stand_in: SlackStandIn) -> None:
    """A choice's option button decides with that option."""
    filed = submit(
        served,
        agent,
        {
            "kind": "choice",
            "session_id": "s",
            "prompt": "Which region?",
            "options": ["eu", "us", "ap"],
        },
    )
    answer = post_interaction(served, click(ALICE, "signoff_choose_1", f"{filed['id']}:1"))
    assert answer.status_code == 200, answer.text
    decided = waited(served, agent, filed["id"])
    assert decided["decision"]["decision"]["choice"] == "us"
    assert decided["decision"]["decided_by"] == "alice"
    # the message is updated after the decision is committed, which the wait may beat
    wait_until(
        lambda: [
            u
            for u in stand_in.of("chat.update")
            if "Chosen by alice (via slack): us" in text_of(u["blocks"])
        ]
    )


def test_self_approval_is_refused_as_in_the_inbox(
    served: Server, stand_in: SlackStandIn, tmp_path: Path
) -> None:
    """Governance applies: a person linked in Slack may not approve their own request."""
    assert served.admin_token is not None
    link(served, "U0ADMIN", "admin")
    filed = submit(
        served, served.admin_token, {"session_id": "s", "tool_name": "deploy", "tool_args": {}}
    )
    before = len(stand_in.of("chat.postEphemeral"))
    assert (
        post_interaction(served, click("U0ADMIN", "signoff_approve", filed["id"])).status_code
        == 200
    )
    told = stand_in.wait_for("chat.postEphemeral", before + 1)[-1]
    assert told["text"].startswith("Not decided:")
    still = httpx.get(
        f"{served.base}{API}/requests/{filed['id']}", headers=bearer(served.admin_token)
    )
    assert still.json()["status"] == "pending"


def test_a_route_posts_to_slack_and_a_decision_elsewhere_updates_it(
    served: Server, agent: str, stand_in: SlackStandIn
) -> None:
    """A Slack route posts the request's message (its Approve button carries the id); once
    the request is decided in the inbox's API, the message is updated naming the decider."""
    added = served.cli("notify", "add", "ships", "--slack", "#ships", "--tool", "ship")
    assert added.returncode == 0, added.stderr
    filed = submit(served, agent, {"session_id": "s", "tool_name": "ship", "tool_args": {"v": 2}})
    posted = wait_until(
        lambda: [p for p in stand_in.of("chat.postMessage") if filed["id"] in text_of(p["blocks"])]
    )
    assert posted[0]["channel"] == "#ships"
    actions = next(b for b in posted[0]["blocks"] if b["type"] == "actions")["elements"]
    assert {"action_id": "signoff_approve", "value": filed["id"]}.items() <= actions[0].items()

    decided = httpx.post(
        f"{served.base}{API}/requests/{filed['id']}/decision",
        json={"type": "reject", "reason": "wrong version"},
        headers=bearer(served.env["ALICE_TOKEN"]),
    )
    assert decided.status_code == 200, decided.text
    updates = wait_until(
        lambda: [
            u
            for u in stand_in.of("chat.update")
            if "Rejected by alice: wrong version" in text_of(u["blocks"])
        ]
    )
    assert (updates[0]["channel"], updates[0]["ts"]) == (CHANNEL, MESSAGE_TS)


def wait_until(
    found: Callable[[], list[dict[str, Any]]], timeout: float = 15
) -> list[dict[str, Any]]:
    """What ``found`` returns once it is not empty."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := found():
            return result
        time.sleep(0.05)
    raise AssertionError("nothing arrived in time")
