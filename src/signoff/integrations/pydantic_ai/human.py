"""Tools a pydantic-ai model calls to ask a person: pick an option (S2) or answer questions (S4).

``human_toolset(backend, session_id=...)`` is a :class:`~pydantic_ai.FunctionToolset` with
two tools. Each submits a signoff request, waits for a person to decide it (in the web inbox,
the terminal or over the API) and returns the outcome on the model's own tool call:

- ``human_intervention_request`` opens a ``choice`` request and returns only the chosen
  option's text (a list of them for multi-select), or one plain sentence when the person
  declined or did not answer in time.
- ``request_human_input`` opens a ``questions`` request and returns what to do next: finish
  (approved), continue with the person's feedback and answers (answered), or stop (rejected).

The model never sees signoff's own protocol: no request ids, states or JSON envelopes.
Each request is keyed by the session and the model's tool-call id, so a run that is retried
with the same history finds the request it opened before instead of asking twice.

``deferred_human_toolset()`` offers the same two tools, with the same arguments, for a
hosted agent (``signoff serve --agent``): instead of waiting, a call ends the run as a
deferred call; the task files the request, pauses durably, and resumes with the person's
choice or answers as the call's result.

Asking a person is a request already: the tools of both toolsets carry the
:data:`ASKS_A_PERSON` marker in their metadata, and ``SignoffGate`` never files an approval
before them (whatever the policy; another toolset's tool of the same name is gated as usual).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

try:
    from pydantic_ai import CallDeferred, FunctionToolset, ModelRetry, RunContext
    from pydantic_ai.tools import ToolDefinition
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "signoff.integrations.pydantic_ai.human needs pydantic-ai: "
        "pip install 'signoff[pydantic-ai]'"
    ) from exc

from signoff.backends import Backend, as_backend
from signoff.domain.principals import Principal
from signoff.domain.requests import Request
from signoff.domain.submission import MAX_EXPIRES_IN, NewRequest
from signoff.errors import InvalidRequest, InvalidTransition
from signoff.integrations.outcomes import NO_ANSWER, choice_result, questions_result
from signoff.service import Service, validation_message

if TYPE_CHECKING:
    from signoff.client import Client

__all__ = [
    "ASKS_A_PERSON",
    "DEFERRED_HUMAN_TOOLS",
    "NO_ANSWER",
    "asks_a_person",
    "choice_result",
    "deferred_human_toolset",
    "human_request_fields",
    "human_toolset",
    "questions_result",
]

_KEY_LIMIT = 200  # NewRequest's longest session id and idempotency key

DEFERRED_HUMAN_TOOLS = {"human_intervention_request": "choice", "request_human_input": "questions"}
"""The deferred tools a hosted task files as people's requests, and the request kind of each."""

ASKS_A_PERSON = "signoff.asks_a_person"
"""The tool metadata key that marks this module's tools (its value: the request kind)."""

_CHOICE_TOOL = """\
Ask a person to choose among options, and wait for their choice.

Use this when a decision belongs to the user: which of several approaches to take,
which target to act on, whether to go ahead. The result is exactly the text of the
option the person chose (a list of chosen options when multi_select is true), or a
sentence saying they declined or did not answer in time.

Args:
    prompt: The question, written for the person, e.g. "Which database should I migrate?".
    options: The options to choose from, distinct and short, in the order to show them.
    context: Background the person needs to decide, shown under the question.
    multi_select: Whether the person may choose several options.
    allow_other: Whether the person may type an answer that is not one of the options.
    timeout_s: Seconds to wait for the person (at most the configured limit).
"""
"""What the model reads of ``human_intervention_request`` (in both toolsets)."""

_QUESTIONS_TOOL = """\
Ask a person one or more open questions, and wait for their reply.

Use this when you need information or feedback only the user has before you can go
on. The person may approve (you should then finish), answer the questions with
feedback (continue with their answers), or reject (stop the task).

Args:
    questions: The questions, each one self-contained, in the order to ask them.
"""
"""What the model reads of ``request_human_input`` (in both toolsets)."""

_Tool = TypeVar("_Tool", bound=Callable[..., Any])


def _described(description: str) -> Callable[[_Tool], _Tool]:
    """Give a tool function the docstring pydantic-ai makes its description and argument
    descriptions from, so the waiting and the deferred tools read the same to the model."""

    def give(tool: _Tool) -> _Tool:
        tool.__doc__ = description
        return tool

    return give


def asks_a_person(tool_def: ToolDefinition) -> bool:
    """Whether the tool is one of this module's, which ask a person themselves (so no
    approval is asked before them)."""
    metadata = tool_def.metadata or {}
    return metadata.get(ASKS_A_PERSON) in ("choice", "questions")


def human_toolset(
    backend: Backend | Service | Client,
    *,
    session_id: str,
    timeout_s: float = 300,
    principal: Principal | None = None,
) -> FunctionToolset[object]:
    """Tools that let a pydantic-ai model ask a person and wait for the answer.

    ``backend`` is a :class:`~signoff.client.AsyncClient`, any other backend, or an
    in-process :class:`~signoff.service.Service` (then ``principal`` is the agent it acts
    as). ``session_id`` groups the requests in the inbox; ``timeout_s`` is how long a tool
    waits for a person, and the most the model may ask for. A request nobody decided in time
    expires (or is withdrawn) and the model is told that no answer came.
    """
    if not 0 < len(session_id) <= _KEY_LIMIT:
        raise ValueError(f"session_id must be 1 to {_KEY_LIMIT} characters")
    if not 0 < timeout_s <= MAX_EXPIRES_IN:
        raise ValueError(f"timeout_s must be above 0 and at most {MAX_EXPIRES_IN:.0f} seconds")
    target = as_backend(backend, principal)
    limit = timeout_s  # the tool's own timeout_s parameter shadows this one
    toolset: FunctionToolset[object] = FunctionToolset()

    async def ask(
        ctx: RunContext[object], tool: str, fields: dict[str, object], seconds: float
    ) -> Request:
        try:
            new = NewRequest.model_validate(
                {
                    "session_id": session_id,
                    "expires_in": seconds,
                    "idempotency_key": _idempotency_key(tool, session_id, ctx.tool_call_id),
                    **fields,
                }
            )
            submitted = await target.submit(new)
        except ValidationError as exc:
            # The model's own arguments were unusable (no options, duplicates...): let it fix them.
            raise ModelRetry(validation_message(exc)) from None
        except InvalidRequest as exc:
            raise ModelRetry(exc.message) from None
        return await _settle(target, submitted.request, seconds)

    @toolset.tool(metadata={ASKS_A_PERSON: "choice"})
    @_described(_CHOICE_TOOL)
    async def human_intervention_request(
        ctx: RunContext[object],
        prompt: str,
        options: list[str],
        context: str | None = None,
        multi_select: bool = False,
        allow_other: bool = False,
        timeout_s: float | None = None,
    ) -> str | list[str]:
        seconds = _seconds(timeout_s, limit)
        fields: dict[str, object] = {
            "kind": "choice",
            "prompt": prompt,
            "options": options,
            "multi_select": multi_select,
            "allow_other": allow_other,
        }
        if context is not None:
            fields["context"] = context
        request = await ask(ctx, "human_intervention_request", fields, seconds)
        return choice_result(request)

    @toolset.tool(metadata={ASKS_A_PERSON: "questions"})
    @_described(_QUESTIONS_TOOL)
    async def request_human_input(ctx: RunContext[object], questions: list[str]) -> str:
        fields: dict[str, object] = {"kind": "questions", "questions": questions}
        request = await ask(ctx, "request_human_input", fields, limit)
        return questions_result(request)

    return toolset


def deferred_human_toolset() -> FunctionToolset[object]:
    """The tools of :func:`human_toolset`, deferred: a hosted task asks the person.

    Each call ends the agent's run (pydantic-ai's ``CallDeferred``) with its arguments; the
    task that hosts the agent files a ``choice`` or ``questions`` request for it, pauses
    until a person decides, and resumes with the result :func:`human_toolset` would have
    returned. Outside a hosted task, the calls come back in ``DeferredToolRequests.calls``.
    """
    toolset: FunctionToolset[object] = FunctionToolset()

    @toolset.tool_plain(metadata={ASKS_A_PERSON: "choice"})
    @_described(_CHOICE_TOOL)
    async def human_intervention_request(
        prompt: str,
        options: list[str],
        context: str | None = None,
        multi_select: bool = False,
        allow_other: bool = False,
        timeout_s: float | None = None,
    ) -> str | list[str]:
        args = {
            "prompt": prompt,
            "options": options,
            "context": context,
            "multi_select": multi_select,
            "allow_other": allow_other,
            "timeout_s": timeout_s,
        }
        _check_deferred("human_intervention_request", args)
        raise CallDeferred

    @toolset.tool_plain(metadata={ASKS_A_PERSON: "questions"})
    @_described(_QUESTIONS_TOOL)
    async def request_human_input(questions: list[str]) -> str:
        _check_deferred("request_human_input", {"questions": questions})
        raise CallDeferred

    return toolset


def _check_deferred(tool_name: str, args: Mapping[str, object]) -> None:
    """Let the model fix unusable arguments now, before its run ends on the call."""
    fields = human_request_fields(tool_name, args, session_id="check", tool_call_id="check")
    try:
        NewRequest.model_validate(fields)
    except ValidationError as exc:
        raise ModelRetry(validation_message(exc)) from None


def human_request_fields(
    tool_name: str, args: Mapping[str, object], *, session_id: str, tool_call_id: str
) -> dict[str, object]:
    """The request a deferred human tool's call files (see :func:`deferred_human_toolset`).

    Keyed like :func:`human_toolset`'s, by session and tool-call id, so filing it again
    (a resumed or recovered task) finds the same request.
    """
    kind = DEFERRED_HUMAN_TOOLS[tool_name]
    fields: dict[str, object] = {
        "session_id": session_id,
        "kind": kind,
        "idempotency_key": _idempotency_key(tool_name, session_id, tool_call_id),
    }
    if kind == "questions":
        fields["questions"] = args.get("questions")
        return fields
    for name in ("prompt", "options", "context", "multi_select", "allow_other"):
        if args.get(name) is not None:
            fields[name] = args[name]
    seconds = args.get("timeout_s")
    if isinstance(seconds, int | float) and 0 < seconds <= MAX_EXPIRES_IN:
        fields["expires_in"] = float(seconds)
    return fields


def _seconds(asked: float | None, limit: float) -> float:
    if asked is None:
        return limit
    if asked <= 0:
        raise ModelRetry("timeout_s must be a positive number of seconds")
    return min(asked, limit)


def _idempotency_key(tool: str, session_id: str, tool_call_id: str | None) -> str | None:
    # A choice or questions request has no tool_call_id field; the same key does its job.
    if tool_call_id is None:
        return None
    key = f"pydantic-ai:{tool}:{session_id}:{tool_call_id}"
    if len(key) <= _KEY_LIMIT:
        return key
    return "pydantic-ai:" + hashlib.sha256(key.encode()).hexdigest()


async def _settle(backend: Backend, request: Request, seconds: float) -> Request:
    """The request once decided; withdrawn (if still pending) when ``seconds`` run out."""
    request = await backend.wait(request.id, seconds)
    if request.status != "pending":
        return request
    try:
        return await backend.cancel(request.id, "no answer in time")
    except InvalidTransition:
        # Decided (or expired) between the wait and the cancel: that outcome stands.
        return await backend.get(request.id)
