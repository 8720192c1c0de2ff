"""A scripted stand-in for an LLM, so `signoff chat` and the demo run with no API key.

`demo_model()` is a pydantic-ai `FunctionModel` that reads the last user prompt, matches it
against a handful of phrasings, and answers with the tool calls those phrasings name:

    "create notes.md saying hello"     write_file(path="notes.md", content="hello\\n")
    "write hello to notes.md"          write_file(path="notes.md", content="hello\\n")
    "run ls -la"                       shell(command="ls -la")
    "delete old logs"                  shell(command="find logs -name '*.log' -mtime +30 -delete")
    "ask me which database to use"     human_intervention_request(prompt=..., options=[...])
    "ask me some questions"            request_human_input(questions=[...])

Requests joined by "and" (or "then", or ";") become parallel calls in one response. Once
the tools have answered, it replies with a text summary quoting each outcome, so a run always
ends. It calls only tools the agent offers, never guesses, and the same conversation always
gets the same reply: it is a fixture for trying signoff out, not a language model.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

try:
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        ModelResponsePart,
        RetryPromptPart,
        TextContent,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
    from pydantic_ai.tools import ToolDefinition
except ImportError as exc:
    raise ImportError(
        "signoff's demo model needs pydantic-ai: pip install 'signoff[pydantic-ai]'"
    ) from exc

__all__ = ["DEMO_MODEL_NAME", "demo_model", "resolve_model"]

DEMO_MODEL_NAME = "signoff-demo (scripted, no LLM)"
"""The name the demo model reports, shown wherever a model name is shown."""

_DEMO_ALIASES = frozenset({"", "demo"})

_DATABASE_PROMPT = "Which database should I use?"
_DATABASE_OPTIONS = ("PostgreSQL", "SQLite", "MySQL")
_OLD_LOGS_COMMAND = "find logs -name '*.log' -mtime +30 -delete"
_QUESTIONS = (
    ("name", "What should the project be called?", True),
    ("python", "Which Python version should it target?", True),
    ("notes", "Anything else I should know before I start?", False),
)
_MAX_QUOTED_LINES = 20
"""Longer tool results are cut in the summary, so a big `ls` does not flood the chat."""

_UNDERSTOOD = (
    ('"create notes.md saying hello" or "write hello to notes.md"', "write_file"),
    ('"run ls -la"', "shell"),
    ('"delete old logs"', "shell"),
    ('"ask me which database to use"', "human_intervention_request"),
    ('"ask me some questions"', "request_human_input"),
)
"""What the help offers, each with the tool it needs: only those the agent has are offered."""
_HELP_END = """\
Join requests with "and" to get several tool calls at once.
For free conversation, choose a real model, such as openai:gpt-5."""


def demo_model() -> FunctionModel:
    """The scripted demo model: deterministic tool calls from plain-English prompts."""
    return FunctionModel(_respond, stream_function=_stream, model_name=DEMO_MODEL_NAME)


def resolve_model(name: str | None) -> FunctionModel | str:
    """The model to hand to `pydantic_ai.Agent`: the demo for None or "demo", else `name`.

    Any other string (`"openai:gpt-5"`, `"anthropic:..."`) is passed through unchanged, for
    pydantic-ai to resolve.
    """
    if name is None or name.strip().lower() in _DEMO_ALIASES:
        return demo_model()
    return name


# --- the reply -------------------------------------------------------------------------------


async def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """One scripted response to the conversation so far."""
    return ModelResponse(parts=_reply_parts(messages, info))


async def _stream(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    """The same response as `_respond`, streamed: text word by word, or all calls at once."""
    parts = _reply_parts(messages, info)
    calls = [part for part in parts if isinstance(part, ToolCallPart)]
    if calls:
        yield {
            index: DeltaToolCall(
                name=call.tool_name,
                json_args=call.args_as_json_str(),
                tool_call_id=call.tool_call_id,
            )
            for index, call in enumerate(calls)
        }
        return
    text = "".join(part.content for part in parts if isinstance(part, TextPart))
    for word in re.findall(r"\s*\S+", text):
        yield word


def _reply_parts(messages: Sequence[ModelMessage], info: AgentInfo) -> list[ModelResponsePart]:
    """Tool calls for a fresh prompt; a text summary once tools have answered; else help."""
    tools = {tool.name: tool for tool in info.function_tools}
    pending = _since_last_response(messages)
    outcomes = [line for message in pending for line in _outcome_lines(message)]
    if outcomes:
        # Tools have answered: always end in text, so a run can never loop.
        return [TextPart(_summary(outcomes, _skipped(_last_prompt(messages), tools)))]
    prompt = _last_prompt(pending)
    if prompt is None:
        return [TextPart(_help(tools))]
    steps = _plan(prompt)
    if not steps:
        return [TextPart(_help(tools))]
    turn = 1 + sum(isinstance(message, ModelResponse) for message in messages)
    offered = [step for step in steps if step.tool_name in tools]
    if not offered:
        return [TextPart("\n".join(_missing_line(step) for step in steps))]
    return [
        ToolCallPart(
            step.tool_name,
            step.build(tools[step.tool_name]),
            tool_call_id=f"signoff-demo-{turn}-{index}",
        )
        for index, step in enumerate(offered, start=1)
    ]


def _since_last_response(messages: Sequence[ModelMessage]) -> list[ModelRequest]:
    """The requests after the model last spoke: what this reply answers."""
    pending: list[ModelRequest] = []
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            break
        pending.append(message)
    pending.reverse()
    return pending


def _last_prompt(messages: Sequence[ModelMessage]) -> str | None:
    """The text of the last user prompt in `messages`, if there is one."""
    for message in reversed(messages):
        if not isinstance(message, ModelRequest):
            continue
        for part in reversed(message.parts):
            if isinstance(part, UserPromptPart):
                return _prompt_text(part)
    return None


def _prompt_text(part: UserPromptPart) -> str:
    """The text of a prompt; images and other media are ignored."""
    if isinstance(part.content, str):
        return part.content
    return " ".join(
        item if isinstance(item, str) else item.content
        for item in part.content
        if isinstance(item, str | TextContent)
    )


# --- summaries -------------------------------------------------------------------------------


def _outcome_lines(message: ModelRequest) -> list[str]:
    """One summary line per tool result in `message`, quoting what came back."""
    lines: list[str] = []
    for part in message.parts:
        if isinstance(part, ToolReturnPart):
            lines.append(_outcome_line(part.tool_name, part.outcome, part.model_response_str()))
        elif isinstance(part, RetryPromptPart):
            # A legacy retry that a caller handed in itself; pydantic-ai translates its own.
            lines.append(
                _outcome_line(part.tool_name or "the tool", "retried", part.model_response())
            )
    return lines


def _outcome_line(tool_name: str, outcome: str, content: str) -> str:
    """`write_file: wrote notes.md`, `shell was not run: too risky`, and so on."""
    lead = {
        "success": f"{tool_name}:",
        "denied": f"{tool_name} was not run:",
        "failed": f"{tool_name} failed:",
        "retried": f"{tool_name} asked for a retry (the demo does not retry):",
        "interrupted": f"{tool_name} was interrupted:",
    }.get(outcome, f"{tool_name} ({outcome}):")
    return f"- {lead} {_quote(content)}"


def _quote(content: str) -> str:
    """`content` on the summary line, indented when it runs over several lines."""
    lines = content.strip("\n").splitlines() or [""]
    if len(lines) > _MAX_QUOTED_LINES:
        cut = len(lines) - _MAX_QUOTED_LINES
        lines = [*lines[:_MAX_QUOTED_LINES], f"... ({cut} more lines)"]
    return "\n  ".join(lines)


def _summary(outcomes: list[str], skipped: list[str]) -> str:
    """The closing text of a turn: every tool outcome, then what could not be done."""
    return "\n".join(["Here is what happened:", *outcomes, *skipped])


def _skipped(prompt: str | None, tools: dict[str, ToolDefinition]) -> list[str]:
    """Lines for the requests of `prompt` this agent has no tool for."""
    if prompt is None:
        return []
    return [_missing_line(step) for step in _plan(prompt) if step.tool_name not in tools]


def _missing_line(step: _Step) -> str:
    """Why a request got no tool call."""
    return (
        f'- "{step.clause}" would need a `{step.tool_name}` tool, '
        f"and this agent has no tool of that name."
    )


def _help(tools: dict[str, ToolDefinition]) -> str:
    """What the demo understands with this agent's tools (nothing it has no tool for), and
    which tools the agent offers."""
    lines = [f"- {phrase} ({tool})" for phrase, tool in _UNDERSTOOD if tool in tools]
    intro = "I am signoff's demo model: a script, not an LLM."
    if lines:
        intro += " With this agent's tools I understand:"
    else:
        needed = ", ".join(dict.fromkeys(tool for _, tool in _UNDERSTOOD))
        intro += f" This agent has none of the tools I call ({needed})."
    offered = ", ".join(sorted(tools)) or "none"
    return "\n".join([intro, *lines, _HELP_END, f"This agent's tools: {offered}."])


# --- prompts into steps ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Step:
    """One request found in a prompt: the tool it needs and how to build its arguments."""

    clause: str
    """The words of the prompt this step came from."""
    tool_name: str
    """The tool it calls."""
    build: Callable[[ToolDefinition], dict[str, Any]]
    """The call's arguments, given the tool's definition (some shapes depend on its schema)."""


_PATH = r"""(?P<path>"[^"]+"|'[^']+'|`[^`]+`|\S+)"""
_SEPARATOR = re.compile(r"(\s*,?\s+(?:and\s+then|and|then)\s+|\s*;\s*)", re.IGNORECASE)
_POLITE = re.compile(r"^(?:(?:please|now|also|can\s+you|could\s+you)\s+)+", re.IGNORECASE)
_CREATE = re.compile(
    r"^(?:create|make|add)\s+(?:a\s+|the\s+)?(?:new\s+)?(?:file\s+)?(?:called\s+|named\s+)?"
    + _PATH
    + r"(?:\s+(?:saying|containing|that\s+says|with(?:\s+the)?(?:\s+(?:content|text))?)\s+"
    r"(?P<text>.+))?$",
    re.IGNORECASE | re.DOTALL,
)
_WRITE = re.compile(
    r"^write\s+(?P<text>.+?)\s+(?:to|into|in)\s+(?:the\s+)?(?:file\s+)?" + _PATH + "$",
    re.IGNORECASE | re.DOTALL,
)
_RUN = re.compile(r"^(?:run|execute)\s+(?P<command>.+)$", re.IGNORECASE | re.DOTALL)
_DELETE_LOGS = re.compile(r"^(?:delete|remove|clean\s+up)\b.*\blogs?\b", re.IGNORECASE)
_QUESTIONS_ASKED = re.compile(r"\bquestions?\b", re.IGNORECASE)
_DATABASE_ASKED = re.compile(r"^ask\b.*\bdatabases?\b", re.IGNORECASE)


def _plan(prompt: str) -> list[_Step]:
    """The steps `prompt` asks for, in order; empty when nothing is understood.

    The prompt is cut at "and", "then" and ";", but a piece that is not a request of its own
    stays with the one before: "write salt and pepper to list.md" is one write.
    """
    pieces = _SEPARATOR.split(prompt.strip())
    steps: list[_Step] = []
    clause = pieces[0]
    for separator, piece in zip(pieces[1::2], pieces[2::2], strict=True):
        if _step(piece) is None:
            clause += separator + piece
            continue
        steps.extend(_found(clause))
        clause = piece
    steps.extend(_found(clause))
    return steps


def _found(clause: str) -> list[_Step]:
    step = _step(clause)
    return [] if step is None else [step]


def _step(clause: str) -> _Step | None:
    """The step one clause asks for, if the demo understands it."""
    words = _POLITE.sub("", clause.strip())
    plain = words.rstrip(".!? ")
    if match := _CREATE.match(plain):
        return _write_step(clause, match["path"], match["text"] or "")
    if match := _WRITE.match(plain):
        return _write_step(clause, match["path"], match["text"])
    if match := _RUN.match(words.rstrip("!? ")):
        command = _unquote(re.sub(r"(?<=[^\s.])\.$", "", match["command"].strip()))
        return _Step(clause=clause, tool_name="shell", build=lambda _: {"command": command})
    if _DELETE_LOGS.match(plain):
        return _Step(
            clause=clause, tool_name="shell", build=lambda _: {"command": _OLD_LOGS_COMMAND}
        )
    if _QUESTIONS_ASKED.search(plain):
        return _Step(clause=clause, tool_name="request_human_input", build=_questions_args)
    if _DATABASE_ASKED.match(plain):
        return _Step(
            clause=clause,
            tool_name="human_intervention_request",
            build=lambda _: {"prompt": _DATABASE_PROMPT, "options": list(_DATABASE_OPTIONS)},
        )
    return None


def _write_step(clause: str, path: str, text: str) -> _Step:
    content = _unquote(text.strip())
    if content and not content.endswith("\n"):
        content += "\n"
    target = _unquote(path)
    return _Step(
        clause=clause,
        tool_name="write_file",
        build=lambda _: {"path": target, "content": content},
    )


def _unquote(text: str) -> str:
    """`text` without one pair of surrounding quotes or backticks."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        return text[1:-1]
    return text


def _questions_args(tool: ToolDefinition) -> dict[str, Any]:
    """The demo's questions, as plain text or as `{id, text, required}`, as the tool takes them."""
    if _wants_question_objects(tool):
        return {
            "questions": [
                {"id": key, "text": text, "required": required}
                for key, text, required in _QUESTIONS
            ]
        }
    return {"questions": [text for _, text, _ in _QUESTIONS]}


def _wants_question_objects(tool: ToolDefinition) -> bool:
    """Whether the tool's `questions` items are objects rather than strings."""
    schema = tool.parameters_json_schema
    questions = schema.get("properties", {}).get("questions", {})
    items = _resolve(schema, questions.get("items", {}))
    variants = [_resolve(schema, v) for v in items.get("anyOf", [items])]
    if any(variant.get("type") == "string" for variant in variants):
        return False
    return any(variant.get("type") == "object" or "properties" in variant for variant in variants)


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """`node`, or the local definition its `$ref` points at."""
    ref = node.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return node
    target: Any = schema
    for key in ref[2:].split("/"):
        target = target.get(key, {}) if isinstance(target, dict) else {}
    return target if isinstance(target, dict) else {}
