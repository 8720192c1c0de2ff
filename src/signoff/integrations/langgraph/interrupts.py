"""Inside a graph: ask a person with ``interrupt()``, and the ``human_feedback`` node.

:func:`ask_human` pauses a node for structured feedback (S4: approve / edit with feedback
and answers / reject) or a choice among options (S2), with a ``response_schema`` so a bad
resume value is refused before it is saved. :class:`HumanFeedback` is a ready
``human_feedback`` node with its routing: approve and reject end the run, edit goes back to
the agent node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NotRequired, TypeAlias, overload

from pydantic import JsonValue, ValidationError, model_validator

try:
    from langchain_core.messages import AnyMessage, HumanMessage, ToolMessage
    from langchain_core.tools import BaseTool, StructuredTool
    from langgraph.graph import END, MessagesState
    from langgraph.types import interrupt
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "signoff.integrations.langgraph needs LangGraph: pip install 'signoff[langgraph]'"
    ) from exc

from signoff.domain.requests import (
    Question,
)
from signoff.domain.submission import NewRequest, QuestionIn
from signoff.integrations.langgraph.base import FrozenModel, last_ai_message
from signoff.service import validation_message

__all__ = [
    "FEEDBACK_TOOL",
    "FeedbackState",
    "HumanChoice",
    "HumanFeedback",
    "HumanResponse",
    "ask_human",
]

FEEDBACK_TOOL = "request_human_input"
"""The tool a model calls to ask the person questions (S4)."""

HumanDecisionType: TypeAlias = Literal["approve", "edit", "reject"]
QuestionLike: TypeAlias = "str | Question | QuestionIn | Mapping[str, Any]"


# -- inside a graph: ask_human ------------------------------------------------------------


class HumanResponse(FrozenModel):
    """A person's answer to :func:`ask_human` questions: the resume value of that interrupt."""

    type: HumanDecisionType
    """``approve`` (finish), ``edit`` (go on with the feedback and answers), ``reject`` (stop)."""
    feedback: str | None = None
    """Overall feedback, with ``edit``."""
    answers: dict[str, str] = {}  # noqa: RUF012 - a pydantic field (copied per instance)
    """Answers keyed by question id, with ``edit``."""
    reason: str = ""
    """Why, with ``reject``."""


class HumanChoice(FrozenModel):
    """A person's answer to an :func:`ask_human` choice: the resume value of that interrupt."""

    type: Literal["choose", "reject"]
    """``choose`` with ``choices``, or ``reject`` (declined) with a ``reason``."""
    choices: tuple[str, ...] = ()
    """The options chosen (one unless multi-select), or free text where allowed."""
    reason: str = ""
    """Why the person declined."""

    @property
    def choice(self) -> str | None:
        """The first (for single-select, the only) option chosen."""
        return self.choices[0] if self.choices else None


def _questions_schema(
    questions: Sequence[Question], allowed: Sequence[HumanDecisionType]
) -> type[HumanResponse]:
    """HumanResponse narrowed to these questions and decisions, checked before it is saved."""
    ids = {q.id for q in questions}
    required = [q.id for q in questions if q.required]
    permitted = tuple(allowed)

    class Checked(HumanResponse):
        @model_validator(mode="after")
        def _fits(self) -> Checked:
            if self.type not in permitted:
                raise ValueError(f"type must be one of {list(permitted)}")
            unknown = sorted(set(self.answers) - ids)
            if unknown:
                raise ValueError(f"answers name unknown question {unknown[0]!r}")
            missing = [q for q in required if not self.answers.get(q, "").strip()]
            if self.type == "edit" and missing:
                raise ValueError(f"question {missing[0]!r} needs an answer")
            return self

    Checked.__name__ = Checked.__qualname__ = "HumanResponse"
    return Checked


def _choice_schema(
    options: Sequence[str], *, multi_select: bool, allow_other: bool
) -> type[HumanChoice]:
    """HumanChoice narrowed to these options, checked before it is saved."""
    offered = tuple(options)

    class Checked(HumanChoice):
        @model_validator(mode="after")
        def _fits(self) -> Checked:
            if self.type == "reject":
                return self
            if not self.choices:
                raise ValueError("choose needs at least one choice")
            if len(self.choices) > 1 and not multi_select:
                raise ValueError("only one option may be chosen")
            outside = [c for c in self.choices if c not in offered]
            if outside and not allow_other:
                raise ValueError(f"{outside[0]!r} is not one of the options")
            return self

    Checked.__name__ = Checked.__qualname__ = "HumanChoice"
    return Checked


@overload
def ask_human(
    prompt: str | None = None,
    *,
    questions: Sequence[QuestionLike],
    allowed_decisions: Sequence[HumanDecisionType] = ("approve", "edit", "reject"),
    context: JsonValue = None,
) -> HumanResponse: ...


@overload
def ask_human(
    prompt: str,
    *,
    options: Sequence[str],
    multi_select: bool = False,
    allow_other: bool = False,
    context: JsonValue = None,
) -> HumanChoice: ...


def ask_human(
    prompt: str | None = None,
    *,
    questions: Sequence[QuestionLike] | None = None,
    allowed_decisions: Sequence[HumanDecisionType] = ("approve", "edit", "reject"),
    options: Sequence[str] | None = None,
    multi_select: bool = False,
    allow_other: bool = False,
    context: JsonValue = None,
) -> HumanResponse | HumanChoice:
    """Pause the node until a person answers; call it inside a LangGraph node or tool.

    With ``questions`` (S4) the interrupt's value is ``{type: "questions", questions,
    allowed_decisions, prompt, context}`` and the answer a :class:`HumanResponse`. With
    ``options`` (S2) it is ``{type: "choice", prompt, options, multi_select, allow_other,
    context}`` and the answer a :class:`HumanChoice`. Either way the ``response_schema``
    refuses a malformed answer before LangGraph saves it. The node re-runs from its top on
    resume, so do not put side effects before this call.
    """
    if (questions is None) == (options is None):
        raise ValueError("ask_human needs either questions or options")
    if options is not None:
        if not prompt:
            raise ValueError("a choice needs a prompt")
        new = _new_request(
            {
                "kind": "choice",
                "prompt": prompt,
                "options": list(options),
                "multi_select": multi_select,
                "allow_other": allow_other,
            }
        )
        value: dict[str, JsonValue] = {
            "type": "choice",
            "prompt": prompt,
            "options": list(new.options or ()),
            "multi_select": multi_select,
            "allow_other": allow_other,
            "context": context,
        }
        return interrupt(
            value,
            response_schema=_choice_schema(
                options, multi_select=multi_select, allow_other=allow_other
            ),
        )
    assert questions is not None
    allowed = tuple(dict.fromkeys(allowed_decisions))
    if not allowed or any(a not in ("approve", "edit", "reject") for a in allowed):
        raise ValueError("allowed_decisions must be a non-empty subset of approve, edit, reject")
    items = [_question_in(q) for q in questions]
    normalized = _new_request({"kind": "questions", "questions": items}).normalized_questions()
    value = {
        "type": "questions",
        "questions": [q.model_dump(mode="json") for q in normalized],
        "allowed_decisions": list(allowed),
        "prompt": prompt,
        "context": context,
    }
    return interrupt(value, response_schema=_questions_schema(normalized, allowed))


def _question_in(question: QuestionLike) -> str | QuestionIn:
    if isinstance(question, str | QuestionIn):
        return question
    if isinstance(question, Question):
        return QuestionIn(id=question.id, text=question.text, required=question.required)
    return QuestionIn.model_validate(question)


def _new_request(fields: Mapping[str, Any]) -> NewRequest:
    """Check what would be filed with signoff, so a bad ask fails in the node, not later."""
    try:
        return NewRequest.model_validate({"session_id": "check", **fields})
    except ValidationError as exc:
        raise ValueError(validation_message(exc)) from None


# -- inside a graph: the human_feedback node and its routing ------------------------------


class FeedbackState(MessagesState):
    """Graph state for :class:`HumanFeedback`: the messages and the person's last decision."""

    human_decision: NotRequired[HumanDecisionType]
    """What the person decided at the last ``human_feedback`` step."""


def _request_human_input(questions: list[str]) -> str:
    """Ask the person one or more questions and wait for their reply.

    Use this when you need information or feedback only the user has before you can go on.
    The person may approve (then finish), answer with feedback (continue with their
    answers), or reject (stop).

    Args:
        questions: The questions, each one self-contained, in the order to ask them.
    """
    # Normally the human_feedback node answers this call; run as a plain tool it still asks.
    return _response_text(ask_human(questions=questions), _plain_questions(questions))


def _plain_questions(questions: Sequence[str]) -> list[Question]:
    return [Question(id=f"q{n}", text=q) for n, q in enumerate(questions, start=1)]


def _response_text(response: HumanResponse, questions: Sequence[Question]) -> str:
    """What the model is told about a person's :class:`HumanResponse`."""
    if response.type == "approve":
        return "The person approved. Finish the task now; do not ask them again."
    if response.type == "reject":
        text = "The person rejected this. Stop the task and do not continue."
        return f"{text} Their reason: {response.reason}" if response.reason.strip() else text
    lines = ["The person answered. Continue the task using their reply."]
    if response.feedback:
        lines.append(f"Feedback: {response.feedback}")
    for q in questions:
        lines.append(f"Q: {q.text}")
        lines.append(f"A: {response.answers.get(q.id, '').strip() or '(no answer)'}")
    return "\n".join(lines)


class HumanFeedback:
    """A ready ``human_feedback`` node and the routing around it (S4).

    After each agent turn :meth:`route_agent` sends the run to the person when the model
    called ``request_human_input`` (with ``enable_feedback_tool``) or, with
    ``always_require_feedback``, after every turn that calls no tools. The node asks with
    :func:`ask_human`; :meth:`route_feedback` then ends the run on approve or reject and
    goes back to the agent node on edit, with the person's feedback and answers in the
    messages. :meth:`add_to` wires both into a ``StateGraph`` whose state has ``messages``
    and ``human_decision`` (:class:`FeedbackState`).
    """

    def __init__(
        self,
        *,
        agent_node: str = "agent",
        tools_node: str | None = "tools",
        node_name: str = "human_feedback",
        always_require_feedback: bool = False,
        enable_feedback_tool: bool = True,
        review_prompt: str = "Review the agent's reply.",
        review_question: str = "What should the agent change?",
    ) -> None:
        if not (always_require_feedback or enable_feedback_tool):
            raise ValueError(
                "nothing would reach the person: set always_require_feedback or "
                "enable_feedback_tool"
            )
        self.agent_node = agent_node
        self.tools_node = tools_node
        self.node_name = node_name
        self.always_require_feedback = always_require_feedback
        self.enable_feedback_tool = enable_feedback_tool
        self.review_prompt = review_prompt
        self.review_question = review_question

    @property
    def tools(self) -> list[BaseTool]:
        """Tools to bind to the model: ``request_human_input`` when the tool is enabled."""
        if not self.enable_feedback_tool:
            return []
        return [StructuredTool.from_function(_request_human_input, name=FEEDBACK_TOOL)]

    def route_agent(self, state: Mapping[str, Any]) -> str:
        """After the agent: to the person, to the tools node, or to the end."""
        last = last_ai_message(state.get("messages", ()))
        calls = last.tool_calls if last is not None else []
        if self.enable_feedback_tool and any(c["name"] == FEEDBACK_TOOL for c in calls):
            return self.node_name
        if calls and self.tools_node is not None:
            return self.tools_node
        if not calls and self.always_require_feedback:
            return self.node_name
        return END

    def route_feedback(self, state: Mapping[str, Any]) -> str:
        """After the person: back to the agent on edit, otherwise the end."""
        return self.agent_node if state.get("human_decision") == "edit" else END

    def node(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """The ``human_feedback`` node: ask, then answer the model's call or add feedback."""
        last = last_ai_message(state.get("messages", ()))
        calls = last.tool_calls if last is not None else []
        asked = (
            [c for c in calls if c["name"] == FEEDBACK_TOOL] if self.enable_feedback_tool else []
        )
        if asked:
            texts = [str(q) for c in asked for q in c["args"].get("questions", ())]
            questions = _plain_questions(texts or [self.review_question])
            response = ask_human(questions=questions)
            text = _response_text(response, questions)
            messages: list[AnyMessage] = [
                ToolMessage(content=text, tool_call_id=c["id"] or "", name=FEEDBACK_TOOL)
                for c in asked
            ]
            # The rest of that turn's calls did not run: say so, or the history is invalid.
            messages += [
                ToolMessage(
                    content="Not run: the agent asked the person first. Call it again if needed.",
                    tool_call_id=c["id"] or "",
                    name=c["name"],
                    status="error",
                )
                for c in calls
                if c["name"] != FEEDBACK_TOOL
            ]
            return {"messages": messages, "human_decision": response.type}
        context = str(last.content) if last is not None else None
        questions = [Question(id="q1", text=self.review_question)]
        response = ask_human(self.review_prompt, questions=questions, context=context)
        update: dict[str, Any] = {"human_decision": response.type}
        if response.type == "edit":
            update["messages"] = [HumanMessage(content=_feedback_message(response, questions))]
        return update

    def add_to(self, builder: Any) -> None:
        """Add the node and the conditional edges after the agent and after the person."""
        builder.add_node(self.node_name, self.node)
        after_agent = [self.node_name, END] + ([self.tools_node] if self.tools_node else [])
        builder.add_conditional_edges(self.agent_node, self.route_agent, after_agent)
        builder.add_conditional_edges(self.node_name, self.route_feedback, [self.agent_node, END])


def _feedback_message(response: HumanResponse, questions: Sequence[Question]) -> str:
    lines = ["Feedback from the person on your reply:"]
    if response.feedback:
        lines.append(response.feedback)
    for q in questions:
        answer = response.answers.get(q.id, "").strip()
        if answer:
            lines.append(f"{q.text} {answer}")
    return "\n".join(lines)


# -- decisions in the middleware's shapes -------------------------------------------------
