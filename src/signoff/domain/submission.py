"""What an agent sends to open a request, checked and turned into a :class:`Request`."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    model_validator,
)

from signoff.domain.built import filled, json_copy
from signoff.domain.decisions import DecisionRecord, DecisionType, Reject
from signoff.domain.previews import FilePreview
from signoff.domain.requests import (
    ALLOWED_DECISIONS,
    ApprovalRequest,
    ChoiceRequest,
    OnExpire,
    Question,
    QuestionsRequest,
    Request,
    RequestKind,
    new_request_id,
)
from signoff.domain.schemas import check_args_schema
from signoff.domain.terms import Settled, Terms, settle
from signoff.domain.text import check_name, refuse_unstorable

__all__ = ["MAX_EXPIRES_IN", "NewRequest", "QuestionIn", "build_request", "rejected_record"]

MAX_EXPIRES_IN = 30 * 24 * 3600.0
"""The longest expiry a request may ask for, in seconds (30 days)."""

Name = Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(check_name)]
Text = Annotated[str, StringConstraints(max_length=20_000)]


class QuestionIn(BaseModel):
    """A question as an agent may send it: text, optionally with an id."""

    model_config = ConfigDict(extra="forbid")

    id: Name | None = None
    """Key for the answer; ``q1``, ``q2``... when left out."""
    text: Text
    """The question."""
    required: bool = False
    """Whether an answer must include it."""


class NewRequest(BaseModel):
    """The body of a submit: the fields of one request kind, as the public contract lists."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: Name
    """The agent session (conversation, thread, run) asking."""
    kind: RequestKind = "approval"
    """``approval``, ``choice`` or ``questions``."""
    tool_name: Name | None = None
    """approval: the tool to call."""
    tool_args: dict[str, JsonValue] | None = None
    """approval: its arguments (default ``{}``)."""
    tool_call_id: Name | None = None
    """approval: the model's call id; same session and id again returns the same request."""
    editable: bool | None = None
    """approval: false when a person may not edit the arguments (only approve them as
    proposed, or reject); default true. A requester may only narrow this."""
    args_schema: dict[str, JsonValue] | None = None
    """approval: the tool's JSON Schema for its arguments; approved args must fit it."""
    prompt: Text | None = None
    """choice (required) and questions: what the person is asked."""
    options: list[Annotated[str, StringConstraints(min_length=1, max_length=2_000)]] | None = Field(
        default=None, max_length=100
    )
    """choice: the options, in order."""
    multi_select: bool = False
    """choice: whether several options may be chosen."""
    allow_other: bool = False
    """choice: whether free text outside the options is accepted."""
    questions: list[QuestionIn | Text] | None = Field(default=None, max_length=100)
    """questions: the questions, as text or ``{id, text, required}``."""
    allowed_decisions: list[DecisionType] | None = None
    """Narrows the decisions policy allows; ``reject`` must stay (only policy removes it)."""
    context: JsonValue = None
    """Free-form context shown to the person."""
    expires_in: float | None = Field(default=None, gt=0, le=MAX_EXPIRES_IN)
    """Seconds until a pending request expires; earlier than policy's expiry, it rejects."""
    on_expire: OnExpire | None = None
    """Policy sets what expiry does; a requester may only ask for ``reject`` (or repeat it)."""
    default_choice: list[str] | str | None = None
    """choice: what expiry chooses under ``on_expire="default"``."""
    default_answers: dict[str, str] | None = None
    """questions: what expiry answers under ``on_expire="default"``."""
    idempotency_key: Name | None = None
    """Same requester and key again returns the same request."""

    @model_validator(mode="before")
    @classmethod
    def _encodable(cls, data: object) -> object:
        return refuse_unstorable(data)

    @model_validator(mode="after")
    def _fits_kind(self) -> Self:
        only = {
            "approval": ("tool_name", "tool_args", "tool_call_id", "args_schema", "editable"),
            "choice": ("options", "default_choice"),
            "questions": ("questions", "default_answers"),
        }
        for kind, fields in only.items():
            if kind == self.kind:
                continue
            for name in fields:
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} is not a field of {self.kind} requests")
        if self.kind != "choice" and (self.multi_select or self.allow_other):
            raise ValueError("multi_select and allow_other are only for choice requests")
        if self.kind == "approval" and self.tool_name is None:
            raise ValueError("approval requests need tool_name")
        if self.args_schema is not None:
            check_args_schema(self.args_schema)
        if self.kind == "choice":
            if not self.prompt:
                raise ValueError("choice requests need a prompt")
            if not self.options:
                raise ValueError("choice requests need at least one option")
            if len(set(self.options)) != len(self.options):
                raise ValueError("options must be distinct")
        if self.kind == "questions":
            if not self.questions:
                raise ValueError("questions requests need at least one question")
            self.normalized_questions()
        if self.allowed_decisions is not None:
            kind_allows = ALLOWED_DECISIONS[self.kind]
            bad = [d for d in self.allowed_decisions if d not in kind_allows]
            if bad or not self.allowed_decisions:
                raise ValueError(
                    f"allowed_decisions must be a non-empty subset of {list(kind_allows)} "
                    f"for {self.kind} requests"
                )
        self._check_expiry_defaults()
        return self

    def _check_expiry_defaults(self) -> None:
        if self.on_expire == "approve" and self.kind == "choice":
            raise ValueError('on_expire="approve" does not fit a choice request; use "default"')
        if self.on_expire != "default":
            if self.default_choice is not None or self.default_answers is not None:
                raise ValueError('default_choice and default_answers need on_expire="default"')
            return
        if self.kind == "approval":
            raise ValueError('on_expire="default" is for choice and questions requests')
        if self.kind == "choice":
            chosen = _as_list(self.default_choice)
            if not chosen:
                raise ValueError('on_expire="default" needs default_choice')
            if len(chosen) > 1 and not self.multi_select:
                raise ValueError("default_choice has several options but multi_select is off")
            outside = [c for c in chosen if c not in (self.options or [])]
            if outside and not self.allow_other:
                raise ValueError(f"default_choice {outside[0]!r} is not one of the options")
        if self.kind == "questions":
            if self.default_answers is None:
                raise ValueError('on_expire="default" needs default_answers')
            ids = {q.id for q in self.normalized_questions()}
            unknown = sorted(set(self.default_answers) - ids)
            if unknown:
                raise ValueError(f"default_answers names unknown question {unknown[0]!r}")

    def normalized_questions(self) -> tuple[Question, ...]:
        """The questions with ids filled in; duplicate ids are an error."""
        result: list[Question] = []
        for n, q in enumerate(self.questions or (), start=1):
            if isinstance(q, str):
                result.append(Question(id=f"q{n}", text=q))
            else:
                result.append(Question(id=q.id or f"q{n}", text=q.text, required=q.required))
        ids = [q.id for q in result]
        if len(set(ids)) != len(ids):
            raise ValueError("question ids must be distinct")
        return tuple(result)


def _as_list(value: list[str] | str | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def build_request(
    new: NewRequest,
    *,
    requested_by: str,
    now: datetime,
    approvers: tuple[str, ...] = (),
    quorum: int = 1,
    allow_self_approval: bool = False,
    policy_note: str | None = None,
    preview: FilePreview | None = None,
    settled: Settled | None = None,
    started_by: str | None = None,
    starter_may_approve: bool = True,
) -> Request:
    """The pending request ``new`` describes, as submitted by ``requested_by`` at ``now``.

    ``settled`` holds its expiry and allowed decisions (default: the built-in terms). Built
    without validating again what ``new`` and ``settled`` hold, valid already; its JSON
    values are copies, so the request shares no container with ``new``.
    """
    if settled is None:
        settled = settle(
            new.kind,
            Terms(),
            expires_in=new.expires_in,
            on_expire=new.on_expire,
            allowed_decisions=new.allowed_decisions,
        )
    expires_in = settled.expires_in
    common = {
        "id": new_request_id(),
        "session_id": new.session_id,
        "requested_by": requested_by,
        "created_at": now,
        "updated_at": now,
        "expires_at": now + timedelta(seconds=expires_in) if expires_in else None,
        "on_expire": settled.on_expire,
        "expiry_set_by": settled.set_by,
        "context": json_copy(new.context),
        "idempotency_key": new.idempotency_key,
        "allowed_decisions": settled.allowed_decisions,
        "approvers": tuple(approvers),
        "quorum": quorum,
        "allow_self_approval": allow_self_approval,
        "started_by": started_by,
        "starter_may_approve": starter_may_approve,
        "policy_note": policy_note,
    }
    if new.kind == "approval":
        assert new.tool_name is not None
        return filled(
            ApprovalRequest,
            **common,
            tool_name=new.tool_name,
            tool_args=json_copy(new.tool_args or {}),
            tool_call_id=new.tool_call_id,
            editable=new.editable is not False,
            preview=preview,
            args_schema=json_copy(new.args_schema),
        )
    if new.kind == "choice":
        assert new.prompt is not None and new.options is not None
        default = _as_list(new.default_choice)
        return filled(
            ChoiceRequest,
            **common,
            prompt=new.prompt,
            options=tuple(new.options),
            multi_select=new.multi_select,
            allow_other=new.allow_other,
            default_choice=tuple(default) if default else None,
        )
    return filled(
        QuestionsRequest,
        **common,
        prompt=new.prompt,
        questions=new.normalized_questions(),
        default_answers=json_copy(new.default_answers),
    )


def rejected_record(reason: str, *, by: str, at: datetime, via: str) -> DecisionRecord:
    """A rejection made by policy or expiry rather than a person."""
    return DecisionRecord.model_validate(
        {"decision": Reject(reason=reason), "decided_by": by, "decided_at": at, "via": via}
    )
