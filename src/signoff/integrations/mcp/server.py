"""signoff's own MCP server: any MCP-capable agent can ask a person through the inbox.

``signoff mcp-server`` serves three tools (the S2 and S4 systems of the design):

- ``human_intervention_request(prompt, options, context?, multi_select?, allow_other?,
  timeout_s?)`` opens a ``choice`` request and returns only the chosen option's text (a
  list of them for multi-select), or one sentence saying the person declined or did not
  answer in time. The answer is checked against ``options`` by signoff.
- ``request_human_input(questions)`` opens a ``questions`` request: the person approves
  (finish), answers with feedback (continue with their answers) or rejects (stop).
- ``signoff_await(request_id)`` waits again for a request that is still open.

With ``permission_wait`` (``signoff mcp-server --permission-prompt``) it also serves
``approval_prompt``, the tool ``claude -p --permission-prompt-tool mcp__signoff__approval_prompt``
asks before a call its rules would prompt for (see
:mod:`signoff.integrations.hooks.permission_prompt`): it files the call, waits up to
``permission_wait`` seconds and answers allow (with the input to run) or deny.

Each call is held for at most ``hold`` seconds; a request nobody has answered by then stays
open in the inbox (until its ``timeout_s`` runs out) and the call returns its id and how
to wait again with ``signoff_await``.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

try:
    import mcp_types as types
    from mcp.server import Server
    from mcp.server.context import ServerRequestContext
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("signoff mcp-server needs the MCP SDK: pip install 'signoff[mcp]'") from exc

from signoff.__version__ import __version__
from signoff.backends import Backend
from signoff.domain.requests import ChoiceRequest, QuestionsRequest, Request
from signoff.domain.submission import MAX_EXPIRES_IN, NewRequest
from signoff.errors import CallerError
from signoff.integrations.hooks.permission_prompt import PROMPT_TOOL, answer_prompt
from signoff.integrations.mcp.holding import (
    AWAIT_TOOL,
    HOLD_SECONDS,
    await_tool,
    clamp_hold,
    held_request_id,
    text_result,
    waiting_result,
)
from signoff.integrations.outcomes import choice_result, questions_result
from signoff.service import validation_message

__all__ = ["ASK_TOOL", "INPUT_TOOL", "SignoffMcpServer"]

ASK_TOOL = "human_intervention_request"
INPUT_TOOL = "request_human_input"

_NOT_OURS = "{id} is a tool call request; only signoff mcp-proxy runs those."

DEFAULT_TIMEOUT_S = 3600.0
"""How long a request stays open for a person when the model does not say."""


class SignoffMcpServer:
    """The tools, acting through ``backend`` as the agent that asks."""

    def __init__(
        self,
        backend: Backend,
        *,
        session_id: str,
        hold: float = HOLD_SECONDS,
        default_timeout_s: float = DEFAULT_TIMEOUT_S,
        permission_wait: float | None = None,
    ) -> None:
        self.backend = backend
        self.session_id = session_id
        self.hold = clamp_hold(hold)
        if not 0 < default_timeout_s <= MAX_EXPIRES_IN:
            raise ValueError(f"the timeout must be above 0 and at most {MAX_EXPIRES_IN:.0f} s")
        self.default_timeout_s = default_timeout_s
        if permission_wait is not None and permission_wait <= 0:
            raise ValueError("the permission prompt's wait must be above 0 s")
        self.permission_wait = permission_wait
        """Seconds ``approval_prompt`` waits for a decision; None: the tool is not offered."""

    def server(self) -> Server[Any]:
        """The lowlevel MCP server to serve."""
        return Server(
            "signoff",
            version=__version__,
            instructions=(
                f"Ask a person: {ASK_TOOL} for a choice among options, {INPUT_TOOL} for open "
                f"questions. If a call says the person has not answered yet, call {AWAIT_TOOL} "
                "with the request id it gave to wait again."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = [_ask_tool(), _input_tool(), await_tool()]
        if self.permission_wait is not None:
            tools.append(_prompt_tool())
        return types.ListToolsResult(tools=tools)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args: dict[str, Any] = dict(params.arguments or {})
        if params.name == PROMPT_TOOL and self.permission_wait is not None:
            # never an error result: Claude Code reads only the JSON text, allow or deny
            answer = await answer_prompt(
                self.backend, args, session_id=self.session_id, wait=self.permission_wait
            )
            return text_result(json.dumps(answer, ensure_ascii=False))
        try:
            if params.name == ASK_TOOL:
                fields = self._choice_fields(args)
            elif params.name == INPUT_TOOL:
                _known(args, {"questions"})
                fields = {
                    "kind": "questions",
                    "questions": args.get("questions"),
                    "expires_in": self.default_timeout_s,
                }
            elif params.name == AWAIT_TOOL:
                request = await self.backend.get(held_request_id(args))
                if request.kind == "approval":
                    return text_result(_NOT_OURS.format(id=request.id), error=True)
                return await self._settle(request)
            else:
                return text_result(f"There is no tool named {params.name!r}.", error=True)
            new = NewRequest.model_validate({"session_id": self.session_id, **fields})
            submitted = await self.backend.submit(new)
        except ValidationError as exc:
            return text_result(f"Invalid arguments: {validation_message(exc)}", error=True)
        except CallerError as exc:
            return text_result(exc.message, error=True)
        return await self._settle(submitted.request)

    def _choice_fields(self, args: dict[str, Any]) -> dict[str, Any]:
        _known(args, {"prompt", "options", "context", "multi_select", "allow_other", "timeout_s"})
        timeout = args.get("timeout_s")
        if timeout is None:
            timeout = self.default_timeout_s
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise CallerError("timeout_s must be a positive number of seconds")
        fields: dict[str, Any] = {
            "kind": "choice",
            "prompt": args.get("prompt"),
            "options": args.get("options"),
            "multi_select": args.get("multi_select", False),
            "allow_other": args.get("allow_other", False),
            "expires_in": min(float(timeout), MAX_EXPIRES_IN),
        }
        if args.get("context") is not None:
            fields["context"] = args["context"]
        return fields

    async def _settle(self, request: Request) -> types.CallToolResult:
        if request.status == "pending":
            request = await self.backend.wait(request.id, self.hold)
        if request.status == "pending":
            what = "The question" if request.kind != "approval" else "The call"
            return waiting_result(request, what)
        if isinstance(request, ChoiceRequest):
            chosen = choice_result(request)
            structured = {"choice": chosen} if request.status == "approved" else None
            if isinstance(chosen, list):
                return text_result("\n".join(chosen), structured=structured)
            return text_result(chosen, structured=structured)
        if isinstance(request, QuestionsRequest):
            return text_result(questions_result(request))
        return text_result(_NOT_OURS.format(id=request.id), error=True)


def _known(args: dict[str, Any], names: set[str]) -> None:
    unknown = set(args) - names
    if unknown:
        raise CallerError(f"unknown argument(s): {', '.join(sorted(unknown))}")


def _ask_tool() -> types.Tool:
    return types.Tool(
        name=ASK_TOOL,
        title="Ask a person to choose",
        description=(
            "Ask a person to choose among options, and wait for their choice. Use it when a "
            "decision belongs to the user. The result is exactly the chosen option's text (one "
            "per line when multi_select is true), or a sentence saying they declined or did "
            "not answer in time."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "description": "The question, for the person."},
                "options": {
                    "type": "array",
                    "items": {"type": "string"},
                    "minItems": 1,
                    "description": "Distinct, short options in the order to show them.",
                },
                "context": {"type": "string", "description": "Background the person needs."},
                "multi_select": {"type": "boolean", "default": False},
                "allow_other": {
                    "type": "boolean",
                    "default": False,
                    "description": "Whether the person may type an answer not in options.",
                },
                "timeout_s": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": "Seconds the question stays open for the person.",
                },
            },
            "required": ["prompt", "options"],
            "additionalProperties": False,
        },
    )


def _prompt_tool() -> types.Tool:
    return types.Tool(
        name=PROMPT_TOOL,
        title="Claude Code's permission prompt",
        description=(
            "Claude Code calls this itself (claude -p --permission-prompt-tool "
            "mcp__signoff__approval_prompt) before a tool call its permission rules would ask "
            "about; a person decides in signoff. Do not call it yourself. The result is JSON: "
            '{"behavior": "allow", "updatedInput": {...}} or {"behavior": "deny", "message": ...}.'
        ),
        input_schema={
            "type": "object",
            "properties": {
                "tool_name": {"type": "string", "description": "The tool about to be called."},
                "input": {"type": "object", "description": "Its input."},
                "tool_use_id": {"type": "string", "description": "Claude Code's id for the call."},
            },
            "required": ["tool_name", "input"],
        },
    )


def _input_tool() -> types.Tool:
    return types.Tool(
        name=INPUT_TOOL,
        title="Ask a person questions",
        description=(
            "Ask a person one or more open questions and wait for their reply. They may approve "
            "(then finish), answer with feedback (continue using it) or reject (stop)."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "questions": {
                    "type": "array",
                    "items": {"type": "string"},
                    "minItems": 1,
                    "description": "Self-contained questions, in the order to ask them.",
                }
            },
            "required": ["questions"],
            "additionalProperties": False,
        },
    )
