"""Decisions: what a person (or a grant, policy or expiry) says about a request."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationInfo,
    model_validator,
)

from signoff.domain.text import STORED, refuse_unstorable
from signoff.errors import InvalidDecision

__all__ = [
    "PERSON_CHANNELS",
    "QUICK_REASONS",
    "REASON_REQUIRED",
    "Answer",
    "Approve",
    "Channel",
    "Choose",
    "ClientChannel",
    "Decision",
    "DecisionAdapter",
    "DecisionRecord",
    "DecisionType",
    "Reject",
    "Respond",
    "Scope",
    "require_reason",
]

DecisionType: TypeAlias = Literal["approve", "reject", "respond", "choose", "answer"]
Channel: TypeAlias = Literal["person", "mcp-elicitation", "mcp-url", "slack", "email-link"]
"""How a person's decision reached signoff: directly, through an MCP client's prompt, on
the request's page opened from an MCP client's link, a Slack message's buttons, or a
signed link in an email."""
PERSON_CHANNELS: tuple[Channel, ...] = (
    "person",
    "mcp-elicitation",
    "mcp-url",
    "slack",
    "email-link",
)
ClientChannel: TypeAlias = Literal["person", "mcp-elicitation", "mcp-url"]
"""The channels a client of the HTTP API may name: Slack and email-link decisions arrive
only through their own verified endpoints."""
Scope: TypeAlias = Literal["once", "session", "always"]

_TEXT = 20_000


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _encodable(cls, data: object, info: ValidationInfo) -> object:
        if info.context is STORED:  # read back from a store, so storable
            return data
        return refuse_unstorable(data)


class Approve(_Model):
    """Let the call run, as proposed or with edited arguments."""

    type: Literal["approve"] = "approve"
    args: dict[str, JsonValue] | None = None
    """Edited arguments to run instead of the proposal (approval requests only)."""
    scope: Scope = "once"
    """``session`` or ``always`` also creates a standing grant for later calls."""
    args_pattern: dict[str, str] | None = None
    """For a standing grant: argument globs later calls must match (none: any args)."""
    comment: str | None = Field(default=None, max_length=_TEXT)
    """A note kept with the decision."""


class Reject(_Model):
    """Do not run the call (or decline to answer); the reason goes back to the agent."""

    type: Literal["reject"] = "reject"
    reason: str = Field(default="", max_length=_TEXT)
    """Why, told to the agent."""


REASON_REQUIRED = "a reason is required to reject"
"""What a person is told who rejects without saying why."""

QUICK_REASONS: tuple[str, ...] = (
    "Not safe to run",
    "Wrong arguments",
    "Not needed",
    "Ask me first",
)
"""Common reasons offered as one-click picks (the web's static/reasons.js lists the same)."""


def require_reason(decision: Decision) -> None:
    """Refuse a person's rejection that does not say why: the agent is told the reason.

    The one rule every transport gets from the service: a rejection by a person needs a
    reason that is not blank. Rejections made by no person (policy, expiry, a cancel)
    are recorded without coming through here.
    """
    if isinstance(decision, Reject) and not decision.reason.strip():
        raise InvalidDecision(REASON_REQUIRED)


class Respond(_Model):
    """Do not run the call; give the model this text instead of the tool's result."""

    type: Literal["respond"] = "respond"
    feedback: str = Field(min_length=1, max_length=_TEXT)
    """What the model is told."""


class Choose(_Model):
    """Pick from a choice request's options (or give free text where allowed)."""

    type: Literal["choose"] = "choose"
    choice: str | None = Field(default=None, max_length=_TEXT)
    """The one option chosen (single-select)."""
    choices: tuple[str, ...] | None = None
    """The options chosen (multi-select)."""


class Answer(_Model):
    """Answer a questions request: feedback and per-question answers, back to the agent."""

    type: Literal["answer"] = "answer"
    feedback: str | None = Field(default=None, max_length=_TEXT)
    """Overall feedback."""
    answers: dict[str, str] = Field(default_factory=dict)
    """Answers keyed by question id."""


Decision: TypeAlias = Annotated[
    Approve | Reject | Respond | Choose | Answer, Field(discriminator="type")
]
"""Any decision, told apart by ``type``."""

DecisionAdapter: TypeAdapter[Decision] = TypeAdapter(Decision)
"""Parses any decision from a dict or JSON."""


class DecisionRecord(_Model):
    """A decision as recorded: what was decided, by whom, when and on what grounds."""

    decision: Decision
    """What was decided."""
    decided_by: str
    """Principal name; ``policy``, ``expiry`` or ``grant`` when no person decided."""
    decided_at: datetime
    """When."""
    seen_digest: str | None = None
    """Digest of the tool name and arguments the decider was shown (approval requests)."""
    via: Literal[
        "person",
        "mcp-elicitation",
        "mcp-url",
        "slack",
        "email-link",
        "grant",
        "policy",
        "expiry",
    ] = "person"
    """What made the decision: a person (``person``; ``mcp-elicitation`` when they answered
    in an MCP client's own prompt, which the client's host controls; ``mcp-url`` on the
    request's page opened from the link an MCP client showed them; ``slack`` from a Slack
    message; ``email-link`` from a signed link in an email), or no person."""
    client: str | None = None
    """For ``mcp-elicitation``: the MCP client's name, as the client itself reported it."""
    extra: dict[str, JsonValue] | None = None
    """What the decision resolved to, e.g. the chosen options as a list."""

    @property
    def by_person(self) -> bool:
        """Whether a person made it (directly or through an MCP client), not a rule."""
        return self.via in PERSON_CHANNELS
