"""``POST /integrations/slack/interactions``: decisions made with a Slack message's buttons.

Slack posts every click (``block_actions``) and every submitted modal (``view_submission``)
here, signed with the app's signing secret. A payload counts only when its signature is
right (``slack-sdk``'s ``SignatureVerifier``: HMAC-SHA256 over ``v0:TIMESTAMP:BODY``,
compared in constant time, the timestamp within five minutes) and it was never seen before
(its signature is used once). The Slack user must be linked to a signoff person
(``signoff people link SLACK_ID NAME``): the decision is theirs, through
``Service.decide(via="slack")``, with the governance the inbox has (no self-approval,
designated approvers, quorum). An unlinked user, a request already decided and a decision
governance refuses get an ephemeral message only the clicker sees; nothing changes.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import JSONResponse, Response
from slack_sdk.signature import SignatureVerifier

from signoff.domain.decisions import Approve, Choose, Decision, Reject
from signoff.domain.principals import Principal
from signoff.domain.requests import ChoiceRequest
from signoff.domain.requests import Request as SignoffRequest
from signoff.errors import InvalidRequest, InvalidTransition, SignoffError, Unauthenticated
from signoff.notify import SendFailed
from signoff.notify.slack import (
    APPROVE,
    CHOOSE,
    REASON_BLOCK,
    REASON_INPUT,
    REJECT,
    REJECT_MODAL,
    SlackSender,
    outcome,
)
from signoff.server.deps import service_of
from signoff.service import Service

__all__ = ["INTERACTIONS", "SlackInteractivity", "slack_router"]

INTERACTIONS = "/integrations/slack/interactions"
"""The Slack app's Interactivity Request URL (under the server's public address)."""

_log = logging.getLogger("signoff.notify")
_WINDOW = timedelta(minutes=10)
"""How long a used signature is remembered: longer than the verifier's five-minute window."""


@dataclass(frozen=True)
class SlackInteractivity:
    """What the interactions route needs: the sender (to answer) and the signing secret."""

    sender: SlackSender
    signing_secret: str

    def verify(self, body: bytes, timestamp: str, signature: str) -> bool:
        """Whether Slack signed ``body`` at ``timestamp``, within the last five minutes."""
        try:
            return SignatureVerifier(self.signing_secret).is_valid(body, timestamp, signature)
        except ValueError:  # a timestamp that is not a number
            return False


def _field(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _payload(body: bytes) -> dict[str, Any]:
    form = parse_qs(body.decode("utf-8", "replace"))
    try:
        payload = json.loads(form["payload"][0])
    except (KeyError, IndexError, ValueError) as exc:
        raise InvalidRequest("a Slack interaction carries a JSON 'payload' form field") from exc
    if not isinstance(payload, dict) or not isinstance(_field(payload, "user", "id"), str):
        raise InvalidRequest("the Slack payload names no user")
    return payload


def _not_linked(user_id: str) -> str:
    return (
        f"Your Slack account ({user_id}) is not linked to a signoff person, so it cannot "
        f"decide: ask an admin to run `signoff people link {user_id} NAME`."
    )


async def _why_not(service: Service, request_id: str, exc: SignoffError) -> str:
    """What the clicker is told when a decision is refused."""
    if isinstance(exc, InvalidTransition):
        try:
            request = await service.get(request_id)
        except SignoffError:
            return exc.message
        if request.decision is not None:
            return f"Already decided by {request.decision.decided_by}: {outcome(request)}"
    return f"Not decided: {exc.message}"


class _Interaction:
    """One verified payload from Slack, and how to answer it."""

    def __init__(
        self,
        service: Service,
        slack: SlackInteractivity,
        payload: dict[str, Any],
        later: BackgroundTasks,
    ) -> None:
        self.service = service
        # Slack wants its answer within 3 seconds: what only informs waits until after it
        self.later = later
        self.sender = slack.sender
        self.payload = payload
        self.user: str = payload["user"]["id"]
        channel = _field(payload, "channel", "id") or _field(payload, "container", "channel_id")
        self.channel: str | None = channel if isinstance(channel, str) else None
        ts = _field(payload, "container", "message_ts") or _field(payload, "message", "ts")
        self.ts: str | None = ts if isinstance(ts, str) else None

    def tell(self, text: str) -> None:
        """Tell the clicker `text` (ephemeral), once Slack has had its answer."""
        if self.channel is not None:
            self.later.add_task(self._tell, self.channel, text)

    async def _tell(self, channel: str, text: str) -> None:
        try:
            await self.sender.tell(channel=channel, user=self.user, text=text)
        except SendFailed as exc:
            _log.warning("slack: could not tell %s: %s", self.user, exc)

    async def decide(
        self,
        person: Principal,
        request_id: str,
        decision: Decision,
        channel: str | None,
        ts: str | None,
    ) -> str | None:
        """Decide; None when done, else why not (the message is updated when it is known)."""
        try:
            request = await self.service.decide(request_id, decision, person, via="slack")
        except SignoffError as exc:
            return await _why_not(self.service, request_id, exc)
        _log.info("slack: %s decided %s as %s", self.user, request_id, person.name)
        if channel is not None and ts is not None:
            # at once, for the clicker; the dispatcher updates every message sent for it too
            self.later.add_task(self._show, request, channel, ts)
        return None

    async def _show(self, request: SignoffRequest, channel: str, ts: str) -> None:
        try:
            await self.sender.show_outcome(request, channel=channel, ts=ts)
        except SendFailed as exc:
            _log.warning("slack: could not update the message for %s: %s", request.id, exc)

    async def action(self, person: Principal) -> None:
        """A click on one of the message's buttons, or a pick in its menu."""
        actions = self.payload.get("actions")
        action = actions[0] if isinstance(actions, list) and actions else {}
        action_id = _field(action, "action_id")
        if not isinstance(action_id, str):
            raise InvalidRequest("the Slack payload carries no action")
        if action_id in (APPROVE, REJECT):
            request_id = _field(action, "value")
            if not isinstance(request_id, str):
                raise InvalidRequest("the Slack action carries no request id")
            if action_id == REJECT:
                await self.ask_reason(person, request_id)
                return
            refused = await self.decide(person, request_id, Approve(), self.channel, self.ts)
        elif action_id.startswith(CHOOSE):
            value = _field(action, "selected_option", "value") or _field(action, "value")
            request_id, _, index = str(value).rpartition(":")
            refused = await self.choose(person, request_id, index)
        else:
            return  # "Open in signoff" and the like: Slack opens the link itself
        if refused is not None:
            self.tell(refused)

    async def choose(self, person: Principal, request_id: str, index: str) -> str | None:
        try:
            request = await self.service.get(request_id, person)
        except SignoffError as exc:
            return f"Not decided: {exc.message}"
        if not isinstance(request, ChoiceRequest) or not index.isdigit():
            return "Not decided: that is not one of the request's options."
        if int(index) >= len(request.options):
            return "Not decided: that is not one of the request's options."
        choice = Choose(choice=request.options[int(index)])
        return await self.decide(person, request_id, choice, self.channel, self.ts)

    async def ask_reason(self, person: Principal, request_id: str) -> None:
        """Reject: a modal first asks why (the decision is made when it is submitted)."""
        try:
            request = await self.service.get(request_id, person)
        except SignoffError as exc:
            self.tell(f"Not decided: {exc.message}")
            return
        if request.status != "pending":
            self.tell(await _why_not(self.service, request_id, InvalidTransition("decided")))
            return
        trigger = self.payload.get("trigger_id")
        if not isinstance(trigger, str):
            raise InvalidRequest("the Slack payload carries no trigger_id")
        try:
            await self.sender.ask_reason(
                request, trigger_id=trigger, channel=self.channel, ts=self.ts
            )
        except SendFailed as exc:
            self.tell(f"Could not open the reason form: {exc.message}")

    async def submission(self, person: Principal | None) -> Response:
        """The reason modal submitted: reject, or show in the modal why not."""
        if _field(self.payload, "view", "callback_id") != REJECT_MODAL:
            return Response(status_code=200)
        try:
            where = json.loads(str(_field(self.payload, "view", "private_metadata")))
        except ValueError as exc:
            raise InvalidRequest("the Slack modal carries no request") from exc
        request_id = _field(where, "request_id")
        if not isinstance(request_id, str):
            raise InvalidRequest("the Slack modal carries no request")
        if person is None:
            return _modal_error(_not_linked(self.user))
        values = _field(
            self.payload, "view", "state", "values", REASON_BLOCK, REASON_INPUT, "value"
        )
        reason = values if isinstance(values, str) else ""
        channel, ts = _field(where, "channel"), _field(where, "ts")
        refused = await self.decide(
            person,
            request_id,
            Reject(reason=reason),
            channel if isinstance(channel, str) else None,
            ts if isinstance(ts, str) else None,
        )
        return Response(status_code=200) if refused is None else _modal_error(refused)


def _modal_error(text: str) -> JSONResponse:
    return JSONResponse({"response_action": "errors", "errors": {REASON_BLOCK: text[:150]}})


def slack_router() -> APIRouter:
    """The route Slack posts interactions to."""
    router = APIRouter()

    @router.post(INTERACTIONS, include_in_schema=False)
    async def interactions(request: Request, later: BackgroundTasks) -> Response:
        """A click or a modal from Slack: verified, used once, decided as the linked person."""
        slack: SlackInteractivity = request.app.state.slack
        service = service_of(request)
        body = await request.body()
        timestamp = request.headers.get("x-slack-request-timestamp", "")
        signature = request.headers.get("x-slack-signature", "")
        if not slack.verify(body, timestamp, signature):
            raise Unauthenticated("the Slack signature is missing, wrong or too old")
        if not await service.use_once(f"slack:{signature}", until=service.clock() + _WINDOW):
            raise InvalidTransition("this Slack payload was already received")
        payload = _payload(body)
        interaction = _Interaction(service, slack, payload, later)
        person = await service.person_for("slack", interaction.user)
        kind = payload.get("type")
        if kind == "view_submission":
            return await interaction.submission(person)
        if kind != "block_actions":
            return Response(status_code=200)  # other interactions: nothing to do
        if person is None:
            _log.warning("slack: refused %s, linked to no signoff person", interaction.user)
            interaction.tell(_not_linked(interaction.user))
            return Response(status_code=200)
        await interaction.action(person)
        return Response(status_code=200)

    return router
