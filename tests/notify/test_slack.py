"""The Slack sender against a local stand-in for Slack's Web API (slack-sdk's base_url)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

pytest.importorskip("slack_sdk", reason="needs the slack extra")

from signoff.domain.decisions import Reject
from signoff.domain.notify import Notice, Route, SlackTarget
from signoff.domain.requests import Request
from signoff.errors import SendFailed
from signoff.notify.slack import SlackSender
from signoff.testing import AGENT, APPROVER, memory_service
from tests.slack import BOT_TOKEN, CHANNEL, MESSAGE_TS, SlackStandIn, slack_stand_in

NOW = datetime(2026, 1, 1, tzinfo=UTC)
HOSTILE = "<!channel> <https://evil.example|click me> *bold*"
"""Agent text that would ping everyone and forge a link if it reached mrkdwn."""


@pytest.fixture(scope="module")
def stand_in() -> Iterator[SlackStandIn]:
    with slack_stand_in() as running:
        yield running


def sender_for(stand_in: SlackStandIn, token: str = BOT_TOKEN) -> SlackSender:
    return SlackSender(token=token, base_url=stand_in.base_url, public_url="https://signoff.test")


def route(channel: str = "#deploys", mention: list[str] | None = None) -> Route:
    return Route(
        id="route_1",
        name="deploys",
        channel=SlackTarget(channel=channel, mention=mention or []),
        created_by="admin",
        created_at=NOW,
    )


def notice(
    purpose: Any = "new", ref: dict[str, Any] | None = None, request_ids: list[str] | None = None
) -> Notice:
    return Notice(
        id="notice_1",
        route_id="route_1",
        request_id="req_1",
        purpose=purpose,
        next_attempt_at=NOW,
        created_at=NOW,
        ref=ref,
        request_ids=request_ids or [],
    )


async def filed(body: dict[str, Any]) -> tuple[Request, Any]:
    service = memory_service()
    submitted = await service.submit(body, AGENT)
    return submitted.request, service


def mrkdwn_texts(blocks: list[dict[str, Any]]) -> list[str]:
    """Every text Slack parses as mrkdwn in ``blocks``."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "mrkdwn":
                found.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(blocks)
    return found


async def test_a_request_is_posted_with_its_buttons_and_agent_text_as_data(
    stand_in: SlackStandIn,
) -> None:
    """chat.postMessage carries tool, args, agent, expiry, mentions and Approve/Reject; the
    agent's text is plain text only (no mention, no link), and the ref is channel and ts."""
    request, _ = await filed(
        {
            "session_id": "s",
            "tool_name": "deploy",
            "tool_args": {"note": HOSTILE},
            "expires_in": 600,
        }
    )
    before = len(stand_in.of("chat.postMessage"))
    ref = await sender_for(stand_in).send(notice(), request, route(mention=["U0ALICE"]))
    assert ref == {"channel": CHANNEL, "ts": MESSAGE_TS}
    sent = stand_in.wait_for("chat.postMessage", before + 1)[-1]
    assert sent["channel"] == "#deploys"
    shown = json.dumps(sent["blocks"])
    assert "deploy" in shown
    assert "<@U0ALICE>" in shown
    assert "signoff_approve" in shown
    assert "signoff_reject" in shown
    assert f"https://signoff.test/requests/{request.id}" in shown
    texts = mrkdwn_texts(sent["blocks"])
    assert any("expires <!date^" in t for t in texts)
    assert all("evil" not in t and "<!channel>" not in t for t in texts)
    assert HOSTILE in json.dumps(sent["blocks"], ensure_ascii=False).replace("\\", "")
    assert "<" not in sent["text"]


async def test_a_choice_gets_buttons_or_a_menu_past_slacks_limits(stand_in: SlackStandIn) -> None:
    """A few options are buttons; 30 options are one static_select (an actions block holds 25)."""
    few, _ = await filed(
        {"kind": "choice", "session_id": "s", "prompt": "Region?", "options": ["eu", "us"]}
    )
    many, _ = await filed(
        {
            "kind": "choice",
            "session_id": "s",
            "prompt": "Host?",
            "options": [f"host-{i}" for i in range(30)],
        }
    )
    sender = sender_for(stand_in)
    before = len(stand_in.of("chat.postMessage"))
    await sender.send(notice(), few, route())
    await sender.send(notice(), many, route())
    first, second = stand_in.wait_for("chat.postMessage", before + 2)[-2:]
    actions = next(b for b in first["blocks"] if b["type"] == "actions")["elements"]
    assert [e["value"] for e in actions if e["action_id"].startswith("signoff_choose")] == [
        f"{few.id}:0",
        f"{few.id}:1",
    ]
    menu = next(b for b in second["blocks"] if b["type"] == "actions")["elements"][0]
    assert menu["type"] == "static_select"
    assert len(menu["options"]) == 30


async def test_update_names_who_decided(stand_in: SlackStandIn) -> None:
    """Once decided, chat.update replaces the buttons with who decided and why."""
    request, service = await filed({"session_id": "s", "tool_name": "deploy", "tool_args": {}})
    decided = await service.decide(request.id, Reject(reason="freeze"), APPROVER)
    before = len(stand_in.of("chat.update"))
    ref = {"channel": CHANNEL, "ts": MESSAGE_TS}
    await sender_for(stand_in).update(notice(ref=ref), decided, route())
    update = stand_in.wait_for("chat.update", before + 1)[-1]
    assert (update["channel"], update["ts"]) == (CHANNEL, MESSAGE_TS)
    shown = json.dumps(update["blocks"])
    assert f"Rejected by {APPROVER.name}: freeze" in shown
    assert "signoff_approve" not in shown


async def test_rate_limits_are_retried(stand_in: SlackStandIn) -> None:
    """A 429 with Retry-After is waited out and retried by slack-sdk's handler."""
    request, _ = await filed({"session_id": "s", "tool_name": "deploy", "tool_args": {}})
    stand_in.rate_limit_next = 1
    ref = await sender_for(stand_in).send(notice(), request, route())
    assert ref is not None
    assert stand_in.rate_limit_next == 0


async def test_a_refused_call_fails_the_send(stand_in: SlackStandIn) -> None:
    """Slack's ok=false (here a bad token) is SendFailed naming Slack's error."""
    request, _ = await filed({"session_id": "s", "tool_name": "deploy", "tool_args": {}})
    with pytest.raises(SendFailed, match="invalid_auth"):
        await sender_for(stand_in, token="xoxb-wrong").send(notice(), request, route())


async def test_an_unreachable_slack_fails_the_send() -> None:
    """No server at the API address is SendFailed, not an exception of the HTTP library."""
    from tests.serving import free_port

    request, _ = await filed({"session_id": "s", "tool_name": "deploy", "tool_args": {}})
    sender = SlackSender(token=BOT_TOKEN, base_url=f"http://127.0.0.1:{free_port()}/api/")
    with pytest.raises(SendFailed, match=r"chat\.postMessage"):
        await sender.send(notice(), request, route())


@pytest.mark.parametrize(
    ("purpose", "line"),
    [("escalation", "Escalated"), ("warning", "Expires soon"), ("digest", "3 requests arrived")],
)
async def test_escalations_warnings_and_digests_say_so(
    stand_in: SlackStandIn, purpose: str, line: str
) -> None:
    """A notice other than the first says above the request why it is sent."""
    request, _ = await filed({"session_id": "s", "tool_name": "deploy", "tool_args": {}})
    before = len(stand_in.of("chat.postMessage"))
    sent = notice(purpose, request_ids=[request.id, "req_b", "req_c"])
    await sender_for(stand_in).send(sent, request, route())
    posted = stand_in.wait_for("chat.postMessage", before + 1)[-1]
    assert posted["blocks"][0]["text"]["text"].startswith(line)
