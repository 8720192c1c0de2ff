"""The Slack sender: one interactive Block Kit message per request, updated once decided.

It posts with ``slack-sdk``'s ``AsyncWebClient`` and a bot token (scope ``chat:write``),
retrying connection errors, 5xx answers and rate limits (``Retry-After``) with the SDK's own
retry handlers. A message shows the tool, the arguments (or the file diff), the agent and
the expiry, with **Approve** and **Reject** buttons; a choice gets a button per option, or
a select menu past what buttons can hold. Clicks come back to
``POST /integrations/slack/interactions`` (``server/slack.py``), which decides as the
person the Slack user is linked to. Once the request is decided (anywhere) or ends, the
message is updated in place, naming who decided.

Everything the agent wrote is data: it goes into ``plain_text`` objects and preformatted
rich text only, never into ``mrkdwn``, so it cannot mention a channel or forge a link.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from pydantic import JsonValue

try:
    import aiohttp
    from slack_sdk.errors import SlackApiError, SlackClientError
    from slack_sdk.http_retry.builtin_async_handlers import (
        AsyncConnectionErrorRetryHandler,
        AsyncRateLimitErrorRetryHandler,
        AsyncServerErrorRetryHandler,
    )
    from slack_sdk.web.async_client import AsyncWebClient
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError("Slack needs its extra: pip install 'signoff[slack]'") from exc

from signoff.domain.notify import Notice, Route, SlackTarget
from signoff.domain.requests import ApprovalRequest, ChoiceRequest, QuestionsRequest, Request
from signoff.notify import SendFailed

__all__ = [
    "APPROVE",
    "CHOOSE",
    "REJECT",
    "REJECT_MODAL",
    "SlackSender",
    "decided_blocks",
    "request_blocks",
]

APPROVE = "signoff_approve"
"""The Approve button's action id (its value: the request id)."""
REJECT = "signoff_reject"
"""The Reject button's action id: opens the modal asking for a reason."""
CHOOSE = "signoff_choose"
"""An option's button, or the select menu (value: ``REQUEST_ID:INDEX``)."""
REJECT_MODAL = "signoff_reject_reason"
"""The reason modal's callback id."""
REASON_BLOCK = "reason"
REASON_INPUT = "reason_input"

_log = logging.getLogger("signoff.notify")

# Slack's limits: https://api.slack.com/reference/block-kit
_BUTTONS = 25
"""Elements in one actions block."""
_BUTTON_TEXT = 75
_MENU_OPTIONS = 100
_SHOWN = 2800
"""Characters of arguments or diff shown (a text object holds 3000)."""
_TITLE = 150
_PURPOSE = {
    "escalation": "Escalated: nobody has decided this yet.",
    "warning": "Expires soon, still undecided.",
}
"""A line above the message for a notice other than the first."""
_MENTION = re.compile(r"[UWS][A-Z0-9]{2,20}")


def escaped(text: str) -> str:
    """``text`` safe in a message's top-level ``text`` (parsed as mrkdwn): no mention, no link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _plain(text: str, limit: int = _SHOWN) -> dict[str, Any]:
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return {"type": "plain_text", "text": shown or " ", "emoji": False}


def _preformatted(text: str) -> dict[str, Any]:
    shown = text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"
    return {
        "type": "rich_text",
        "elements": [
            {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": shown}]}
        ],
    }


def _title(request: Request) -> str:
    if isinstance(request, ApprovalRequest):
        return f"Approve {request.tool_name}?"
    if isinstance(request, ChoiceRequest):
        return "Choose: " + request.prompt
    return "Questions: " + (request.prompt or "answer in signoff")


def _body(request: Request) -> list[dict[str, Any]]:
    if isinstance(request, ApprovalRequest):
        if request.preview is not None:
            return [
                {"type": "section", "text": _plain("Edits " + request.preview.path, _TITLE)},
                _preformatted(request.preview.diff or "(no change)"),
            ]
        return [_preformatted(json.dumps(request.tool_args, indent=2, ensure_ascii=False))]
    if isinstance(request, ChoiceRequest):
        return [{"type": "section", "text": _plain(request.prompt)}]
    return [{"type": "section", "text": _plain("\n".join(q.text for q in request.questions))}]


def _facts(request: Request) -> dict[str, Any]:
    elements: list[dict[str, Any]] = [
        _plain(f"agent {request.requested_by} · session {request.session_id}", 300)
    ]
    if request.expires_at is not None:
        stamp = int(request.expires_at.timestamp())
        fallback = request.expires_at.strftime("%Y-%m-%d %H:%M UTC")
        # our own mrkdwn: Slack shows the time in each reader's zone
        elements.append(
            {
                "type": "mrkdwn",
                "text": f"expires <!date^{stamp}^{{date_short_pretty}} {{time}}|{fallback}>",
            }
        )
    return {"type": "context", "elements": elements}


def _choice_controls(request: ChoiceRequest) -> list[dict[str, Any]]:
    if request.multi_select or any(len(o) > _BUTTON_TEXT for o in request.options):
        return []  # several picks, or options a button cannot show whole: the inbox
    if len(request.options) <= _BUTTONS - 2:
        return [
            {
                "type": "button",
                "action_id": f"{CHOOSE}_{index}",
                "text": _plain(option, _BUTTON_TEXT),
                "value": f"{request.id}:{index}",
            }
            for index, option in enumerate(request.options)
        ]
    if len(request.options) <= _MENU_OPTIONS:
        return [
            {
                "type": "static_select",
                "action_id": CHOOSE,
                "placeholder": _plain("Choose…", _BUTTON_TEXT),
                "options": [
                    {"text": _plain(option, _BUTTON_TEXT), "value": f"{request.id}:{index}"}
                    for index, option in enumerate(request.options)
                ],
            }
        ]
    return []


def _actions(request: Request, page: str | None) -> list[dict[str, Any]]:
    elements: list[dict[str, Any]] = []
    if isinstance(request, ApprovalRequest):
        elements.append(
            {
                "type": "button",
                "action_id": APPROVE,
                "style": "primary",
                "text": _plain("Approve"),
                "value": request.id,
            }
        )
    elif isinstance(request, ChoiceRequest):
        elements.extend(_choice_controls(request))
    if "reject" in request.allowed_decisions and not isinstance(request, QuestionsRequest):
        elements.append(
            {
                "type": "button",
                "action_id": REJECT,
                "style": "danger",
                "text": _plain("Reject"),
                "value": request.id,
            }
        )
    if page is not None:
        elements.append(
            {
                "type": "button",
                "action_id": "signoff_open",
                "text": _plain("Open in signoff"),
                "url": page,
            }
        )
    return (
        [{"type": "actions", "block_id": "signoff_actions", "elements": elements}]
        if elements
        else []
    )


def request_blocks(
    request: Request, *, page: str | None = None, mention: list[str] | None = None
) -> list[dict[str, Any]]:
    """The message for a pending request: what it asks, who asks, until when, and buttons."""
    blocks: list[dict[str, Any]] = [{"type": "header", "text": _plain(_title(request), _TITLE)}]
    blocks.extend(_body(request))
    blocks.append(_facts(request))
    mentions = [f"<@{m}>" for m in mention or [] if _MENTION.fullmatch(m)]
    if mentions:
        blocks.append(
            {"type": "context", "elements": [{"type": "mrkdwn", "text": " ".join(mentions)}]}
        )
    blocks.extend(_actions(request, page))
    return blocks


def outcome(request: Request) -> str:
    """One line on how the request ended: who decided what (or that it expired)."""
    record = request.decision
    if record is None:
        return f"{request.status.capitalize()}."
    decision = record.decision
    detail = ""
    if decision.type == "approve":
        what = "Approved"
    elif decision.type == "reject":
        what, detail = "Rejected", decision.reason
    elif decision.type == "choose":
        picked = decision.choices if decision.choices is not None else (decision.choice,)
        what, detail = "Chosen", ", ".join(p for p in picked if p is not None)
    elif decision.type == "respond":
        what, detail = "Answered instead", decision.feedback
    else:
        what = "Answered"
    if record.by_person:
        who = (
            record.decided_by
            if record.via == "person"
            else f"{record.decided_by} (via {record.via})"
        )
    else:
        who = record.via
    return f"{what} by {who}" + (f": {detail}" if detail else ".")


def decided_blocks(request: Request, *, page: str | None = None) -> list[dict[str, Any]]:
    """The message once the request is no longer pending: its buttons replaced by the outcome."""
    blocks: list[dict[str, Any]] = [{"type": "header", "text": _plain(_title(request), _TITLE)}]
    blocks.extend(_body(request))
    blocks.append(_facts(request))
    # the outcome holds the decider's name and a reject reason: data, so plain text
    blocks.append({"type": "section", "text": _plain(outcome(request))})
    if page is not None:
        blocks.append(
            {
                "type": "actions",
                "block_id": "signoff_actions",
                "elements": [
                    {
                        "type": "button",
                        "action_id": "signoff_open",
                        "text": _plain("Open in signoff"),
                        "url": page,
                    }
                ],
            }
        )
    return blocks


def reason_modal(request: Request, *, channel: str | None, ts: str | None) -> dict[str, Any]:
    """The modal asking for a rejection's reason; it carries where the message is."""
    metadata = json.dumps({"request_id": request.id, "channel": channel, "ts": ts})
    return {
        "type": "modal",
        "callback_id": REJECT_MODAL,
        "private_metadata": metadata,
        "title": _plain("Reject", 24),
        "submit": _plain("Reject", 24),
        "close": _plain("Cancel", 24),
        "blocks": [
            {"type": "section", "text": _plain(_title(request), _TITLE)},
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "optional": False,  # a person's rejection says why (the server checks too)
                "label": _plain("Why (required; the agent is told)", 48),
                "element": {
                    "type": "plain_text_input",
                    "action_id": REASON_INPUT,
                    "multiline": True,
                    "max_length": 3000,
                },
            },
        ],
    }


class SlackSender:
    """Sends requests to Slack channels or users, and updates what it sent."""

    channel = "slack"

    def __init__(
        self, *, token: str, base_url: str | None = None, public_url: str | None = None
    ) -> None:
        """``token`` is the bot token (``xoxb-…``); ``base_url`` Slack's Web API (tests
        point it at a stand-in); ``public_url`` where the messages' "Open in signoff" goes."""
        self.client = AsyncWebClient(
            token=token,
            base_url=base_url or "https://slack.com/api/",
            retry_handlers=[
                AsyncConnectionErrorRetryHandler(max_retry_count=2),
                AsyncServerErrorRetryHandler(max_retry_count=2),
                AsyncRateLimitErrorRetryHandler(max_retry_count=3),
            ],
        )
        self.public_url = public_url.rstrip("/") if public_url else None

    def page(self, request: Request) -> str | None:
        """The request's page in the web inbox, when the server's address is known."""
        return f"{self.public_url}/requests/{request.id}" if self.public_url else None

    async def send(
        self, notice: Notice, request: Request, route: Route
    ) -> dict[str, JsonValue] | None:
        """Post the request's message; the ref is where it went (``channel``, ``ts``)."""
        target = route.channel
        if not isinstance(target, SlackTarget):
            raise SendFailed(f"route {route.name} does not send to Slack")
        blocks = (
            request_blocks(request, page=self.page(request), mention=list(target.mention))
            if request.status == "pending"
            else decided_blocks(request, page=self.page(request))
        )
        if notice.purpose in _PURPOSE:
            blocks.insert(0, {"type": "section", "text": _plain(_PURPOSE[notice.purpose], 300)})
        if notice.purpose == "digest" and len(notice.request_ids) > 1:
            # one message per window: the first request in full, the rest waiting in the inbox
            more = len(notice.request_ids) - 1
            line = (
                f"{more + 1} requests arrived for {route.name}; the other {more} wait in the inbox."
            )
            blocks.insert(0, {"type": "section", "text": _plain(line, 300)})
        answer = await self._call(
            "chat.postMessage",
            channel=target.channel,
            text=escaped(_title(request)[:_TITLE]),
            blocks=blocks,
        )
        _log.info("slack: sent %s for %s to %s", notice.purpose, request.id, target.channel)
        return {"channel": str(answer["channel"]), "ts": str(answer["ts"])}

    async def update(self, notice: Notice, request: Request, route: Route) -> None:
        """Replace the message's buttons by who decided (or that it expired)."""
        ref = notice.ref or {}
        channel, ts = ref.get("channel"), ref.get("ts")
        if not isinstance(channel, str) or not isinstance(ts, str):
            return  # nothing was posted
        await self.show_outcome(request, channel=channel, ts=ts)

    async def show_outcome(self, request: Request, *, channel: str, ts: str) -> None:
        """Update the message at ``channel``/``ts`` to how ``request`` ended."""
        await self._call(
            "chat.update",
            channel=channel,
            ts=ts,
            text=escaped(outcome(request)[:_TITLE]),
            blocks=decided_blocks(request, page=self.page(request)),
        )

    async def tell(self, *, channel: str, user: str, text: str) -> None:
        """An ephemeral message only ``user`` sees in ``channel`` (refusals, "already decided")."""
        await self._call("chat.postEphemeral", channel=channel, user=user, text=escaped(text))

    async def ask_reason(
        self, request: Request, *, trigger_id: str, channel: str | None, ts: str | None
    ) -> None:
        """Open the modal asking for a rejection's reason."""
        await self._call(
            "views.open", trigger_id=trigger_id, view=reason_modal(request, channel=channel, ts=ts)
        )

    async def _call(self, method: str, **params: Any) -> dict[str, Any]:
        try:
            answer = await self.client.api_call(method, json=params)
        except SlackApiError as exc:
            error = exc.response.get("error", "unknown error") if exc.response else "unknown error"
            _log.warning("slack: %s failed: %s", method, error)
            raise SendFailed(f"slack {method}: {error}") from exc
        except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            _log.warning("slack: %s failed: %s", method, exc)
            raise SendFailed(f"slack {method}: {exc}") from exc
        data: dict[str, Any] = dict(answer.data) if isinstance(answer.data, dict) else {}
        return data
