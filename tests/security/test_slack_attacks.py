"""Attacks on ``POST /integrations/slack/interactions`` against a real ``signoff serve``.

A wrong signature, a stale timestamp, a replayed payload and an unlinked Slack user are
refused, and none of them changes a request or calls Slack to decide anything.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("slack_sdk", reason="needs the slack extra")

from signoff.server.deps import API
from tests.serving import Server, agent_token, bearer, free_port, new_token, start_server
from tests.slack import (
    SlackStandIn,
    click,
    form,
    link,
    post_interaction,
    sign,
    slack_options,
    slack_stand_in,
    submit_view,
)

LINKED = "U0LINKED"
STRANGER = "U0STRANGER"


@pytest.fixture(scope="module")
def stand_in() -> Iterator[SlackStandIn]:
    with slack_stand_in() as running:
        yield running


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, stand_in: SlackStandIn) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("slack-attacks")
    env = {**os.environ, "XDG_CONFIG_HOME": str(home)}
    server = start_server(
        f"sqlite:///{home / 'serve.db'}", free_port(), env, *slack_options(stand_in)
    )
    new_token(server, "carol", "approver")
    link(server, LINKED, "carol")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def agent(served: Server) -> str:
    return agent_token(served, "attack-bot")


def filed(server: Server, agent: str) -> str:
    """A fresh pending approval request's id."""
    body = {"session_id": "s", "tool_name": "deploy", "tool_args": {"env": "prod"}}
    answer = httpx.post(f"{server.base}{API}/requests", json=body, headers=bearer(agent))
    assert answer.status_code in (200, 201), answer.text
    request_id: str = answer.json()["id"]
    return request_id


def status(server: Server, agent: str, request_id: str) -> str:
    answer = httpx.get(f"{server.base}{API}/requests/{request_id}", headers=bearer(agent))
    found: str = answer.json()["status"]
    return found


def calls(stand_in: SlackStandIn) -> int:
    """How many calls Slack's stand-in has had that change a message or open a modal."""
    return sum(len(stand_in.of(m)) for m in ("chat.update", "views.open", "chat.postMessage"))


def refused(answer: httpx.Response, code: int, detail: str) -> None:
    assert answer.status_code == code, answer.text
    body: dict[str, Any] = answer.json()
    assert set(body) == {"error", "detail"}
    assert detail in body["detail"]


def test_a_wrong_signature_is_refused(served: Server, agent: str, stand_in: SlackStandIn) -> None:
    """A payload signed with another secret is 401 and decides nothing."""
    request_id = filed(served, agent)
    before = calls(stand_in)
    answer = post_interaction(served, click(LINKED, "signoff_approve", request_id), secret="not-it")
    refused(answer, 401, "Slack signature")
    assert status(served, agent, request_id) == "pending"
    assert calls(stand_in) == before


def test_a_stale_timestamp_is_refused(served: Server, agent: str, stand_in: SlackStandIn) -> None:
    """A payload rightly signed six minutes ago is 401 (the window is five) and decides nothing."""
    request_id = filed(served, agent)
    before = calls(stand_in)
    stale = int(time.time()) - 360
    answer = post_interaction(served, click(LINKED, "signoff_approve", request_id), timestamp=stale)
    refused(answer, 401, "Slack signature")
    assert status(served, agent, request_id) == "pending"
    assert calls(stand_in) == before


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Slack-Request-Timestamp": "soon", "X-Slack-Signature": "v0=00"},
        {"X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": ""},
    ],
)
def test_missing_or_malformed_signature_headers_are_refused(
    served: Server, agent: str, headers: dict[str, str]
) -> None:
    """No signature, a timestamp that is not a number, an empty signature: 401, nothing decided."""
    request_id = filed(served, agent)
    answer = httpx.post(
        f"{served.base}/integrations/slack/interactions",
        content=form(click(LINKED, "signoff_approve", request_id)),
        headers={"Content-Type": "application/x-www-form-urlencoded", **headers},
    )
    refused(answer, 401, "Slack signature")
    assert status(served, agent, request_id) == "pending"


def test_a_replayed_payload_is_refused(served: Server, agent: str, stand_in: SlackStandIn) -> None:
    """The same signed bytes sent twice count once: the replay is 409 and opens no second modal."""
    request_id = filed(served, agent)
    body = form(click(LINKED, "signoff_reject", request_id))
    headers = sign(body)
    url = f"{served.base}/integrations/slack/interactions"
    first = httpx.post(url, content=body, headers=headers)
    assert first.status_code == 200, first.text
    opened = stand_in.wait_for("views.open", len(stand_in.of("views.open")))
    again = httpx.post(url, content=body, headers=headers)
    refused(again, 409, "already received")
    assert len(stand_in.of("views.open")) == len(opened)
    assert status(served, agent, request_id) == "pending"


def test_an_unlinked_user_is_refused(served: Server, agent: str, stand_in: SlackStandIn) -> None:
    """A Slack user linked to nobody gets an ephemeral "not linked" and decides nothing,
    neither by a button nor by a forged modal submission."""
    request_id = filed(served, agent)
    before = calls(stand_in)
    told = len(stand_in.of("chat.postEphemeral"))
    answer = post_interaction(served, click(STRANGER, "signoff_approve", request_id))
    assert answer.status_code == 200, answer.text
    ephemeral = stand_in.wait_for("chat.postEphemeral", told + 1)[-1]
    assert ephemeral["user"] == STRANGER
    assert "not linked" in ephemeral["text"]

    view = {
        "callback_id": "signoff_reject_reason",
        "private_metadata": f'{{"request_id": "{request_id}", "channel": null, "ts": null}}',
    }
    submitted = post_interaction(served, submit_view(STRANGER, view, "let me"))
    assert submitted.status_code == 200
    assert submitted.json()["response_action"] == "errors"
    assert status(served, agent, request_id) == "pending"
    assert calls(stand_in) == before


def test_an_option_out_of_range_decides_nothing(
    served: Server, agent: str, stand_in: SlackStandIn
) -> None:
    """A signed pick naming an option the request does not have is refused, not guessed."""
    body = {"kind": "choice", "session_id": "s", "prompt": "Which?", "options": ["a", "b"]}
    answer = httpx.post(f"{served.base}{API}/requests", json=body, headers=bearer(agent))
    request_id = answer.json()["id"]
    told = len(stand_in.of("chat.postEphemeral"))
    for value in (f"{request_id}:7", f"{request_id}:-1", f"{request_id}:x"):
        assert (
            post_interaction(served, click(LINKED, "signoff_choose", value, menu=True)).status_code
            == 200
        )
    messages = stand_in.wait_for("chat.postEphemeral", told + 3)[told:]
    assert all("not one of the request's options" in m["text"] for m in messages)
    assert status(served, agent, request_id) == "pending"
