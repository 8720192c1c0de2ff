"""Agents that drive a chat-completions API themselves ask signoff before tools run.

Plain dict messages, as the ``openai`` package takes them. For an assistant message with
``tool_calls``, :func:`resolve_tool_calls` files one signoff request per call (keyed by the
session and the model's own call id, so filing again finds the same request), waits for a
person to decide each one over any transport, and returns the ``role: "tool"`` messages:

- approved: the call is claimed with the arguments about to run, run, and reported
  completed or failed; the message is the tool's result.
- approved with edited arguments: it runs with the edit, and a note tells the model so.
- rejected, withdrawn or undecided at the timeout: a denial; nothing runs (fail closed).
- respond: the person's text, instead of a result.
- :data:`HUMAN_INTERVENTION_TOOL` (``human_intervention_request``): a ``choice`` request;
  the message is only the chosen option's text.

The tool messages carry no signoff protocol: no request ids, states or JSON envelopes.
:func:`strip_signoff` enforces that for a whole history before it goes to the model, by
removing whatever an application marked as signoff-internal. :func:`run_tools_with_approval`
is the whole loop around ``openai.AsyncOpenAI``; only it needs the ``openai`` package.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict, cast

from pydantic import JsonValue, ValidationError

from signoff.backends import Backend, as_backend
from signoff.domain.principals import Principal
from signoff.domain.requests import ApprovalRequest, ChoiceRequest, Request
from signoff.domain.schemas import sendable_schema
from signoff.domain.submission import MAX_EXPIRES_IN, NewRequest
from signoff.errors import ArgsMismatch, InvalidRequest, InvalidTransition
from signoff.integrations.outcomes import (
    NO_ANSWER,
    choice_result,
    denial,
    edit_note,
    wait_decided,
)
from signoff.leases import holding
from signoff.service import Service, validation_message

if TYPE_CHECKING:
    import openai

    from signoff.client import Client

__all__ = [
    "HUMAN_INTERVENTION_TOOL",
    "HUMAN_INTERVENTION_TOOL_NAME",
    "INTERNAL_MARK",
    "INTERNAL_ROLE",
    "NO_ANSWER",
    "ToolMessage",
    "resolve_tool_calls",
    "run_tools_with_approval",
    "strip_signoff",
    "tool_schemas",
]

Target: TypeAlias = "Service | Backend | Client"
"""An in-process service (with the principal the agent acts as) or a client of a server."""

Implementations: TypeAlias = Mapping[str, Callable[..., Any]]
"""Tool functions by tool name, called with the (approved) arguments as keywords."""

HUMAN_INTERVENTION_TOOL_NAME = "human_intervention_request"
"""The name of the built-in ask-a-person tool."""

HUMAN_INTERVENTION_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": HUMAN_INTERVENTION_TOOL_NAME,
        "description": (
            "Ask a person to choose among options, and wait for their choice. Use this when "
            "a decision belongs to the user: which of several approaches to take, which "
            "target to act on, whether to go ahead. The result is exactly the text of the "
            "option the person chose (a JSON list of chosen options when multi_select is "
            "true), or a sentence saying they declined or did not answer in time."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "prompt": {
                    "type": "string",
                    "description": "The question, written for the person.",
                },
                "options": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Distinct, short options, in the order to show them.",
                },
                "context": {
                    "type": "string",
                    "description": "Background the person needs to decide.",
                },
                "multi_select": {
                    "type": "boolean",
                    "description": "Whether the person may choose several options.",
                },
                "allow_other": {
                    "type": "boolean",
                    "description": "Whether the person may type an answer not in the options.",
                },
            },
            "required": ["prompt", "options"],
            "additionalProperties": False,
        },
    },
}
"""The chat-completions tool schema of ``human_intervention_request``: add it to ``tools``."""

INTERNAL_ROLE = "signoff"
"""A message with this role is signoff-internal: :func:`strip_signoff` drops it."""

INTERNAL_MARK = "signoff_internal"
"""A message or content part with this key set true is dropped by :func:`strip_signoff`."""

_CHOICE_ARGS = frozenset({"prompt", "options", "context", "multi_select", "allow_other"})
_KEY_LIMIT = 200  # NewRequest's longest session id and idempotency key
_DEFAULT_PRINCIPAL = Principal(name="openai-agent", role="agent")


class ToolMessage(TypedDict):
    """A chat-completions tool message: the outcome of one call, on the model's call id."""

    role: Literal["tool"]
    tool_call_id: str
    content: str


@dataclass(frozen=True)
class _Call:
    """One function call of the assistant message, with its arguments parsed."""

    id: str
    name: str
    args: dict[str, JsonValue]


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _tool_message(call_id: str, content: str) -> ToolMessage:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _as_dict(message: Mapping[str, Any] | Any) -> dict[str, Any]:
    if isinstance(message, Mapping):
        return dict(message)
    dump = getattr(message, "model_dump", None)
    if callable(dump):  # an openai ChatCompletionMessage
        return cast(dict[str, Any], dump(mode="json", exclude_none=True))
    raise TypeError(f"expected a message dict, got {type(message).__name__}")


def _parse(raw: Mapping[str, Any]) -> _Call | ToolMessage:
    """The call with its arguments, or the tool message telling the model why it cannot run."""
    call_id = str(raw.get("id") or "")
    function = raw.get("function")
    if raw.get("type", "function") != "function" or not isinstance(function, Mapping):
        return _tool_message(call_id, "Only function tool calls are supported; it was not run.")
    name = str(function.get("name") or "")
    arguments = function.get("arguments") or "{}"
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
    except json.JSONDecodeError as exc:
        return _tool_message(
            call_id,
            f"The arguments of {name} were not valid JSON ({exc.msg} at position {exc.pos}), "
            "so the call was not run. Call it again with a JSON object of arguments.",
        )
    if not isinstance(args, dict):
        return _tool_message(
            call_id,
            f"The arguments of {name} must be a JSON object, so the call was not run. "
            "Call it again with a JSON object of arguments.",
        )
    return _Call(id=call_id, name=name, args=args)


def _idempotency_key(session_id: str, call_id: str) -> str:
    # A choice request has no tool_call_id field; this key does its job.
    key = f"openai:{HUMAN_INTERVENTION_TOOL_NAME}:{session_id}:{call_id}"
    if len(key) <= _KEY_LIMIT:
        return key
    return "openai:" + hashlib.sha256(key.encode()).hexdigest()


def tool_schemas(tools: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, JsonValue]]:
    """Each function tool's ``parameters`` schema that signoff takes, by name, from a
    chat-completions ``tools`` list."""
    found: dict[str, dict[str, JsonValue]] = {}
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        schema = sendable_schema(function.get("parameters"))
        if schema is not None:
            found.setdefault(function["name"], schema)
    return found


async def _file(
    call: _Call,
    backend: Backend,
    session_id: str,
    timeout: float,
    context: str | None,
    schema: dict[str, JsonValue] | None = None,
) -> Request | ToolMessage:
    """Open the call's request (or find the one opened before), or tell the model why not."""
    fields: dict[str, Any]
    if call.name == HUMAN_INTERVENTION_TOOL_NAME:
        unknown = sorted(set(call.args) - _CHOICE_ARGS)
        if unknown:
            return _tool_message(
                call.id,
                f"{call.name} takes no argument {unknown[0]!r}, so nobody was asked. "
                f"Its arguments are {', '.join(sorted(_CHOICE_ARGS))}.",
            )
        fields = {
            **call.args,
            "kind": "choice",
            "expires_in": min(timeout, MAX_EXPIRES_IN),
            "idempotency_key": _idempotency_key(session_id, call.id),
        }
    else:
        fields = {
            "kind": "approval",
            "tool_name": call.name,
            "tool_args": call.args,
            "tool_call_id": call.id,
        }
        if schema is not None:
            fields["args_schema"] = schema
        if context:
            fields["context"] = {"assistant_said": context}
    try:
        new = NewRequest.model_validate({"session_id": session_id, **fields})
        return (await backend.submit(new)).request
    except ValidationError as exc:
        problem = validation_message(exc)
    except InvalidRequest as exc:
        problem = exc.message
    return _tool_message(
        call.id, f"The call could not be put to a person ({problem}), so it was not run."
    )


def _choice_text(request: ChoiceRequest) -> str:
    """Only the chosen option's text (a JSON list for multi-select), or why there is none."""
    result = choice_result(request)
    return json.dumps(result, ensure_ascii=False) if isinstance(result, list) else result


def _signature_problem(function: Callable[..., Any], args: Mapping[str, Any]) -> str | None:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin without one: let the call decide
        return None
    try:
        signature.bind(**args)
    except TypeError as exc:
        return str(exc)
    return None


async def _invoke(function: Callable[..., Any], args: Mapping[str, Any]) -> Any:
    if inspect.iscoroutinefunction(function):
        return await function(**args)
    # a blocking tool must not stall the waits and runs of its sibling calls
    result = await asyncio.to_thread(function, **args)
    if inspect.isawaitable(result):
        return await result
    return result


def _result_text(result: Any) -> str:
    return result if isinstance(result, str) else json.dumps(result, default=str)


def _jsonable(result: Any) -> JsonValue:
    return cast(JsonValue, json.loads(json.dumps(result, default=str)))


async def _run_approved(
    call: _Call, request: ApprovalRequest, backend: Backend, implementations: Implementations
) -> str:
    """Claim the approved call with the arguments about to run, run it, report, and say how."""
    approved = dict(request.approved_args if request.approved_args is not None else call.args)
    edited = approved != call.args
    function = implementations.get(call.name)
    problem = (
        f"there is no implementation of {call.name}"
        if function is None
        else _signature_problem(function, approved)
    )
    try:
        await backend.claim(request.id, approved)
    except ArgsMismatch:
        return "The arguments differ from the ones a person approved, so the call was not run."
    except InvalidTransition:
        return "This call was already claimed to run elsewhere; it is not run again."
    if function is None or problem is not None:
        await backend.fail(request.id, f"refused before running: {problem}")
        if edited:
            return (
                f"A person approved this call with edited arguments the tool does not accept "
                f"({problem}); it was not run."
            )
        return f"The arguments do not fit the tool ({problem}), so the call was not run."
    try:
        async with holding(backend, [request.id]):
            result = await _invoke(function, approved)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        await backend.fail(request.id, error)
        return f"The call ran and failed with {error}"
    await backend.complete(request.id, _jsonable(result))
    text = _result_text(result)
    if edited:
        text += "\n\n" + edit_note(approved, call.args)
    return text


async def _outcome(
    call: _Call,
    request: Request,
    backend: Backend,
    implementations: Implementations,
    deadline: float,
) -> str:
    """What the model is told about one call once its request is settled."""
    if request.status == "pending":
        request = await wait_decided(backend, request.id, deadline)
    if isinstance(request, ChoiceRequest):
        return _choice_text(request)
    if not isinstance(request, ApprovalRequest):  # pragma: no cover - only two kinds are filed
        raise InvalidRequest(f"{request.kind} requests are not filed for tool calls")
    if request.status == "approved":
        return await _run_approved(call, request, backend, implementations)
    if request.status == "completed" and request.result is not None:
        # ran before (this call was filed again after a restart): its result, not a second run
        return _result_text(request.result.result)
    if request.status in ("executing", "completed", "failed"):
        return f"This call was already {request.status}; it is not run again."
    return denial(request)


async def resolve_tool_calls(
    assistant_message: Mapping[str, Any] | Any,
    implementations: Implementations,
    *,
    signoff: Target,
    session_id: str,
    principal: Principal | None = None,
    timeout: float = 300.0,
    on_submitted: Callable[[list[str]], Awaitable[None]] | None = None,
    tools: Iterable[Mapping[str, Any]] = (),
) -> list[ToolMessage]:
    """Put every tool call of ``assistant_message`` to a person; the tool messages, in order.

    ``signoff`` is an :class:`~signoff.client.AsyncClient`, a blocking ``Client``, any
    backend, or an in-process :class:`~signoff.service.Service` (acting as ``principal``).
    Requests are filed first (``on_submitted`` gets their ids), then each call is waited on
    and, once approved, claimed and run from ``implementations``. A call still undecided
    at ``timeout`` seconds is withdrawn and denied. Filing the same message again in the
    same session finds the same requests: nothing is asked or run twice. ``tools`` (the
    chat-completions tools list) gives each call's ``parameters`` schema to its request, so
    a person's edit must fit it.
    """
    if not 0 < len(session_id) <= _KEY_LIMIT:
        raise ValueError(f"session_id must be 1 to {_KEY_LIMIT} characters")
    backend = as_backend(signoff, principal or _DEFAULT_PRINCIPAL)
    message = _as_dict(assistant_message)
    content = message.get("content")
    said = content if isinstance(content, str) and content.strip() else None
    schemas = tool_schemas(tools)
    out: list[ToolMessage | None] = []
    asked: list[tuple[int, _Call, Request]] = []
    for raw in message.get("tool_calls") or ():
        parsed = _parse(raw)
        if isinstance(parsed, _Call):
            schema = schemas.get(parsed.name)
            filed = await _file(parsed, backend, session_id, timeout, said, schema)
            if not isinstance(filed, dict):
                asked.append((len(out), parsed, filed))
                out.append(None)
                continue
            parsed = filed
        out.append(parsed)
    if on_submitted is not None:
        await on_submitted([request.id for _, _, request in asked])
    deadline = time.monotonic() + timeout
    texts = await asyncio.gather(
        *(_outcome(call, req, backend, implementations, deadline) for _, call, req in asked)
    )
    for (index, call, _), text in zip(asked, texts, strict=True):
        out[index] = _tool_message(call.id, text)
    return [m for m in out if m is not None]


def _internal(item: Mapping[str, Any]) -> bool:
    return item.get("role") == INTERNAL_ROLE or bool(item.get(INTERNAL_MARK))


def _ours(key: str) -> bool:
    return key == INTERNAL_ROLE or key.startswith(INTERNAL_ROLE + "_")


def strip_signoff(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A copy of a chat history without signoff's internal content, fit to send to a model.

    Drops messages whose role is :data:`INTERNAL_ROLE` or that carry :data:`INTERNAL_MARK`,
    content parts that carry the mark, and every ``signoff`` / ``signoff_*`` key an
    application kept on a message or part (request ids, states, envelopes). The messages
    this module writes have none of these; the filter makes sure no record of them leaks.
    The input is not changed.
    """
    kept: list[dict[str, Any]] = []
    for message in messages:
        if _internal(message):
            continue
        clean = {k: v for k, v in message.items() if not _ours(k)}
        parts = clean.get("content")
        if isinstance(parts, list):
            clean["content"] = [
                {k: v for k, v in part.items() if not _ours(k)}
                if isinstance(part, Mapping)
                else part
                for part in parts
                if not (isinstance(part, Mapping) and _internal(part))
            ]
            if not clean["content"]:
                clean["content"] = ""
        kept.append(clean)
    return kept


def _assistant_entry(message: Any) -> dict[str, Any]:
    """The assistant's answer as a request message: only the fields the API takes back."""
    answer = _as_dict(message)
    entry: dict[str, Any] = {"role": "assistant", "content": answer.get("content")}
    if answer.get("tool_calls"):
        entry["tool_calls"] = answer["tool_calls"]
    if answer.get("refusal"):
        entry["refusal"] = answer["refusal"]
    return entry


async def run_tools_with_approval(
    client: openai.AsyncOpenAI,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    implementations: Implementations,
    *,
    signoff: Target,
    session_id: str,
    principal: Principal | None = None,
    timeout: float = 300.0,
    max_rounds: int = 20,
    on_submitted: Callable[[list[str]], Awaitable[None]] | None = None,
    **create_kwargs: Any,
) -> list[dict[str, Any]]:
    """Call the model, and while it answers with tool calls, put them to a person and go on.

    Each round sends the history through :func:`strip_signoff`, appends the assistant's
    answer, and for tool calls appends the messages of :func:`resolve_tool_calls`. Returns
    the whole history (``messages`` as given, then the new turns), ending with the model's
    final answer; passing it in again is safe, since every round is stripped before sending.
    ``create_kwargs`` go to ``client.chat.completions.create`` as they are (temperature,
    tool_choice...).
    """
    try:
        import openai  # noqa: F401  # the client is openai's; say which extra when it is missing
    except ImportError as exc:
        raise ImportError(
            "signoff's chat-completions loop needs the openai package: "
            "pip install 'signoff[openai]'"
        ) from exc
    history: list[dict[str, Any]] = [dict(m) for m in messages]
    if tools:  # the API refuses an empty tools list
        create_kwargs["tools"] = list(tools)
    for _ in range(max_rounds):
        completion = await client.chat.completions.create(
            model=model, messages=cast(Any, strip_signoff(history)), **create_kwargs
        )
        answer = completion.choices[0].message
        history.append(_assistant_entry(answer))
        if not answer.tool_calls:
            return history
        results = await resolve_tool_calls(
            answer,
            implementations,
            signoff=signoff,
            session_id=session_id,
            principal=principal,
            timeout=timeout,
            on_submitted=on_submitted,
            tools=tools,
        )
        history.extend(cast(list[dict[str, Any]], results))
    raise InvalidRequest(f"the model still called tools after {max_rounds} rounds; stopping")
