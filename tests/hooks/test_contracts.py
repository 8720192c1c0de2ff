"""Claude Code, Codex CLI and Cursor hooks: their documented stdin in, their documented reply out.

These agents need a model to fire a hook, so the contract is tested from the hook's side: each
fixture under ``fixtures/`` is the JSON the agent sends today for one event (field names from
its docs, see /tmp/brief/contract_facts.md), fed to a real ``signoff hook AGENT`` process that
files through a real ``signoff serve``; a person decides over the HTTP API while the hook
waits. The reply is checked against a JSON Schema written from the agent's docs, and then
read the way the agent reads it (allow, deny, edited input), exit code included: only exit 2
or an explicit deny blocks in these agents, so exit 1 must never happen.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import jsonschema
import pytest

from signoff.integrations.hooks.contracts import AgentName, Verdict, parse_call, reply
from tests.serving import Server, agent_token, bearer, free_port, start_server

FIXTURES = Path(__file__).parent / "fixtures"
API = "/api/v1"

EVENTS: list[tuple[str, str]] = [
    ("claude-code", "PreToolUse"),
    ("claude-code", "PermissionRequest"),
    ("codex", "PreToolUse"),
    ("codex", "PermissionRequest"),
    ("cursor", "beforeShellExecution"),
    ("cursor", "beforeMCPExecution"),
    ("cursor", "preToolUse"),
]
"""Every event signoff answers for these three agents; one fixture each."""

EDITABLE = {
    ("claude-code", "PreToolUse"),
    ("claude-code", "PermissionRequest"),
    ("codex", "PreToolUse"),
    ("cursor", "preToolUse"),
}
"""Events whose documented reply can carry edited input; the rest must deny and say why."""

SESSION_KEY = {"claude-code": "session_id", "codex": "session_id", "cursor": "conversation_id"}
"""Where each agent puts the id signoff files the request under as its session."""

IDS = [f"{agent}-{event}" for agent, event in EVENTS]


# -- the documented reply schemas -----------------------------------------------------------

_UNIVERSAL = {  # fields every Claude Code / Codex hook reply may carry
    "continue": {"type": "boolean"},
    "stopReason": {"type": "string"},
    "suppressOutput": {"type": "boolean"},
    "systemMessage": {"type": "string"},
}

_CODEX_UNIVERSAL = {  # Codex fails the hook open on continue:false, stopReason, suppressOutput
    "continue": {"const": True},
    "systemMessage": {"type": "string"},
}


def _reply_schema(
    top: dict[str, Any],
    event: str,
    properties: dict[str, Any],
    *,
    required: tuple[str, ...] = (),
    output_required: bool = False,
    **rules: Any,
) -> dict[str, Any]:
    """A Claude Code / Codex hook reply: the ``top`` fields and a ``hookSpecificOutput`` for
    ``event`` with ``properties`` (and ``required`` ones, and further schema ``rules``), no
    other field anywhere; ``output_required``: the reply must carry a hookSpecificOutput."""
    output = {
        "type": "object",
        "required": ["hookEventName", *required],
        "properties": {"hookEventName": {"const": event}, **properties},
        "additionalProperties": False,
        **rules,
    }
    schema: dict[str, Any] = {"type": "object", "properties": {**top, "hookSpecificOutput": output}}
    if output_required:
        schema["required"] = ["hookSpecificOutput"]
    schema["additionalProperties"] = False
    return schema


def _decision_schema(properties: dict[str, Any], **rules: Any) -> dict[str, Any]:
    """A PermissionRequest reply's ``decision``: a ``behavior`` (allow or deny) and
    ``properties`` (with further schema ``rules``), no other field."""
    return {
        "type": "object",
        "required": ["behavior"],
        "properties": {"behavior": {"enum": ["allow", "deny"]}, **properties},
        "additionalProperties": False,
        **rules,
    }


CLAUDE_PRE_TOOL_USE = _reply_schema(
    # code.claude.com/docs/en/hooks, "PreToolUse decision control"
    _UNIVERSAL,
    "PreToolUse",
    {
        "permissionDecision": {"enum": ["allow", "deny", "ask", "defer"]},
        "permissionDecisionReason": {"type": "string"},
        "updatedInput": {"type": "object"},
        "additionalContext": {"type": "string"},
    },
    required=("permissionDecision",),
    output_required=True,
)

CLAUDE_PERMISSION_REQUEST = _reply_schema(
    # code.claude.com/docs/en/hooks, "PermissionRequest decision control"
    _UNIVERSAL,
    "PermissionRequest",
    {
        "decision": _decision_schema(
            {
                "updatedInput": {"type": "object"},
                "updatedPermissions": {"type": "array"},
                "message": {"type": "string"},
                "interrupt": {"type": "boolean"},
            },
            # updatedInput only with allow, message only with deny
            allOf=[
                {
                    "if": {"required": ["updatedInput"]},
                    "then": {"properties": {"behavior": {"const": "allow"}}},
                },
                {
                    "if": {"required": ["message"]},
                    "then": {"properties": {"behavior": {"const": "deny"}}},
                },
            ],
        ),
    },
    required=("decision",),
    output_required=True,
)

_NON_BLANK = {"type": "string", "pattern": r"\S"}

CODEX_PRE_TOOL_USE = _reply_schema(
    # openai/codex codex-rs/hooks/schema/generated/pre-tool-use.command.output.schema.json,
    # narrowed by what codex-rs/hooks/src/engine/output_parser.rs accepts: "allow" only with
    # updatedInput, updatedInput only with "allow", "deny" only with a non-blank reason, no
    # "ask", and no continue:false / stopReason / suppressOutput (each fails the hook open)
    _CODEX_UNIVERSAL,
    "PreToolUse",
    {
        "permissionDecision": {"enum": ["allow", "deny"]},
        "permissionDecisionReason": {"type": "string"},
        "updatedInput": {"type": "object"},
        "additionalContext": {"type": "string"},
    },
    allOf=[
        {
            "if": {
                "properties": {"permissionDecision": {"const": "allow"}},
                "required": ["permissionDecision"],
            },
            "then": {"required": ["updatedInput"]},
        },
        {
            "if": {"required": ["updatedInput"]},
            "then": {
                "properties": {"permissionDecision": {"const": "allow"}},
                "required": ["permissionDecision"],
            },
        },
        {
            "if": {
                "properties": {"permissionDecision": {"const": "deny"}},
                "required": ["permissionDecision"],
            },
            "then": {
                "properties": {"permissionDecisionReason": _NON_BLANK},
                "required": ["permissionDecisionReason"],
            },
        },
        {
            "if": {"required": ["permissionDecisionReason"]},
            "then": {"required": ["permissionDecision"]},
        },
    ],
)

CODEX_PERMISSION_REQUEST = _reply_schema(
    # openai/codex .../permission-request.command.output.schema.json; output_parser.rs fails
    # closed on updatedInput, updatedPermissions and interrupt:true, so none may appear
    _CODEX_UNIVERSAL,
    "PermissionRequest",
    {
        "decision": _decision_schema(
            {"message": {"type": "string"}, "interrupt": {"const": False}}
        ),
    },
)


def _cursor_schema(*, edits: bool) -> dict[str, Any]:
    """cursor.com/docs/agent/hooks: ``permission`` with messages; ``updated_input`` on
    preToolUse only; never ``ask`` (preToolUse accepts it without enforcing it)."""
    properties: dict[str, Any] = {
        "permission": {"enum": ["allow", "deny"]},
        "user_message": {"type": "string"},
        "agent_message": {"type": "string"},
    }
    if edits:
        properties["updated_input"] = {"type": "object"}
    return {
        "type": "object",
        "required": ["permission"],
        "properties": properties,
        "additionalProperties": False,
    }


SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("claude-code", "PreToolUse"): CLAUDE_PRE_TOOL_USE,
    ("claude-code", "PermissionRequest"): CLAUDE_PERMISSION_REQUEST,
    ("codex", "PreToolUse"): CODEX_PRE_TOOL_USE,
    ("codex", "PermissionRequest"): CODEX_PERMISSION_REQUEST,
    ("cursor", "beforeShellExecution"): _cursor_schema(edits=False),
    ("cursor", "beforeMCPExecution"): _cursor_schema(edits=False),
    ("cursor", "preToolUse"): _cursor_schema(edits=True),
}

for _schema in SCHEMAS.values():
    jsonschema.Draft7Validator.check_schema(_schema)


# -- what the agent makes of a reply --------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What the agent does with the hook's answer, read as its docs say."""

    runs: bool
    reason: str
    """What the model (or, for an allow, the log) is told."""
    updated_input: dict[str, Any] | None


def read_reply(agent: str, event: str, body: dict[str, Any], code: int, stderr: str) -> Outcome:
    """The agent's reading of stdout JSON, exit code and stderr for ``event``."""
    assert code in (0, 2), f"exit {code}: the agent would run the tool anyway"
    if code == 2:
        # every agent blocks on exit 2; Claude Code and Codex take the reason from stderr
        # (Codex blocks only if stderr is not blank)
        assert stderr.strip(), "exit 2 with nothing on stderr"
        return Outcome(runs=False, reason=stderr.strip(), updated_input=None)
    if agent == "cursor":
        return Outcome(
            runs=body["permission"] == "allow",
            reason=body.get("agent_message", ""),
            updated_input=body.get("updated_input"),
        )
    output = body.get("hookSpecificOutput")
    if output is None:  # Codex PreToolUse: no decision means the call proceeds
        return Outcome(runs=True, reason="", updated_input=None)
    if event == "PermissionRequest":
        decision = output["decision"]
        return Outcome(
            runs=decision["behavior"] == "allow",
            reason=decision.get("message", ""),
            updated_input=decision.get("updatedInput"),
        )
    return Outcome(
        runs=output["permissionDecision"] == "allow",
        reason=output.get("permissionDecisionReason", ""),
        updated_input=output.get("updatedInput"),
    )


# -- the hook process and the person --------------------------------------------------------


@dataclass(frozen=True)
class Signoff:
    """The module's server and the two tokens the tests use."""

    server: Server
    agent: str
    admin: str
    home: Path
    """An empty XDG_CONFIG_HOME, so no saved hook settings leak in."""


@pytest.fixture(scope="module")
def signoff(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Signoff]:
    """One real ``signoff serve`` for the whole module."""
    home = tmp_path_factory.mktemp("hooks_contracts")
    env = {**_base_env(), "XDG_CONFIG_HOME": str(home), "COLUMNS": "200"}
    server = start_server(f"sqlite:///{home / 'serve.db'}", free_port(), env)
    try:
        assert server.admin_token is not None
        yield Signoff(server, agent_token(server, "coding-agent"), server.admin_token, home)
    finally:
        if server.process.poll() is None:
            server.stop()


def _base_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}


def fixture_input(agent: str, event: str) -> tuple[dict[str, Any], str]:
    """The documented stdin for ``event``, under a session of its own (and a fresh call id,
    since the same session and call id would return the same request)."""
    data: dict[str, Any] = json.loads((FIXTURES / f"{agent}.{event}.json").read_text())
    session = f"{data[SESSION_KEY[agent]]}-{uuid.uuid4().hex[:8]}"
    data[SESSION_KEY[agent]] = session
    if "tool_use_id" in data:
        data["tool_use_id"] = f"{data['tool_use_id']}-{uuid.uuid4().hex[:8]}"
    return data, session


@dataclass(frozen=True)
class Ran:
    """One finished ``signoff hook`` process."""

    code: int
    body: dict[str, Any]
    stderr: str


def run_hook(
    signoff: Signoff, agent: str, stdin: str, *, timeout: float = 30, server: str | None = None
) -> Ran:
    """Run ``signoff hook AGENT`` as the agent would, with ``stdin`` as its input."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "signoff",
            "hook",
            agent,
            "--timeout",
            str(timeout),
            "--server",
            server or signoff.server.base,
            "--token",
            signoff.agent,
        ],
        input=stdin,
        capture_output=True,
        text=True,
        env=signoff.server.env,
        timeout=120,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, f"stdout must be one JSON object: {done.stdout!r} {done.stderr!r}"
    body = json.loads(lines[0])
    assert isinstance(body, dict)
    return Ran(done.returncode, body, done.stderr)


def requests_in(signoff: Signoff, session: str) -> list[dict[str, Any]]:
    """Every request filed under ``session``, any status."""
    response = httpx.get(
        f"{signoff.server.base}{API}/requests",
        params={"session_id": session},
        headers=bearer(signoff.admin),
        timeout=10,
    )
    response.raise_for_status()
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def all_requests(signoff: Signoff) -> int:
    """How many requests the server holds."""
    response = httpx.get(
        f"{signoff.server.base}{API}/requests",
        params={"limit": 500},
        headers=bearer(signoff.admin),
        timeout=10,
    )
    response.raise_for_status()
    return len(response.json()["items"])


class Person(threading.Thread):
    """Someone at the inbox: waits for the hook's request to arrive, then decides it."""

    def __init__(self, signoff: Signoff, session: str, decision: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.signoff, self.session, self.decision = signoff, session, decision
        self.seen: dict[str, Any] | None = None
        self.error: str | None = None

    def run(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pending = [
                r for r in requests_in(self.signoff, self.session) if r["status"] == "pending"
            ]
            if pending:
                self.seen = pending[0]
                response = httpx.post(
                    f"{self.signoff.server.base}{API}/requests/{pending[0]['id']}/decision",
                    json=self.decision,
                    headers=bearer(self.signoff.admin),
                    timeout=10,
                )
                if response.status_code != 200:
                    self.error = response.text
                return
            time.sleep(0.05)
        self.error = "the hook's request never arrived"


def decide(
    signoff: Signoff, agent: str, event: str, decision: dict[str, Any]
) -> tuple[Ran, Person]:
    """Run the hook on the event's fixture while a person gives ``decision``."""
    data, session = fixture_input(agent, event)
    person = Person(signoff, session, decision)
    person.start()
    ran = run_hook(signoff, agent, json.dumps(data))
    person.join(timeout=30)
    assert person.error is None, person.error
    return ran, person


def checked(agent: str, event: str, ran: Ran) -> Outcome:
    """The reply validated against the agent's documented schema, then read as the agent does."""
    jsonschema.validate(ran.body, SCHEMAS[(agent, event)])
    return read_reply(agent, event, ran.body, ran.code, ran.stderr)


# -- the tests: each scenario on every event at once (seven hook processes in parallel) ------


def on_every_event(signoff: Signoff, scenario: Callable[[Signoff, str, str], None]) -> None:
    """Run ``scenario`` for each event concurrently; fail naming every event that failed."""
    with ThreadPoolExecutor(max_workers=len(EVENTS)) as pool:
        futures = {
            pool.submit(scenario, signoff, *pair): name
            for pair, name in zip(EVENTS, IDS, strict=True)
        }
    failures = {futures[f]: f.exception() for f in futures if f.exception() is not None}
    assert not failures, "\n\n".join(f"{name}: {exc}" for name, exc in failures.items())


def approved(signoff: Signoff, agent: str, event: str) -> None:
    """A person's yes: exit 0 and the documented allow, no edit attached; the request the
    person saw carries what the agent sent (session, call id, input, cwd, transcript)."""
    data, session = fixture_input(agent, event)
    person = Person(signoff, session, {"type": "approve"})
    person.start()
    ran = run_hook(signoff, agent, json.dumps(data))
    person.join(timeout=30)
    assert person.error is None, person.error
    outcome = checked(agent, event, ran)
    assert ran.code == 0 and outcome.runs and outcome.updated_input is None
    seen = person.seen
    assert seen is not None
    assert seen["session_id"] == session
    assert seen["tool_call_id"] == data.get("tool_use_id")
    sent = data.get("tool_input")
    if isinstance(sent, str):  # Cursor's beforeMCPExecution sends its input as a JSON string
        sent = json.loads(sent)
    if sent is not None:
        assert seen["tool_args"] == sent
    else:  # Cursor's beforeShellExecution: the command is the input
        assert seen["tool_args"]["command"] == data["command"]
    context = json.dumps(seen["context"])
    for key in ("cwd", "transcript_path"):
        if data.get(key):
            assert data[key] in context, key


def rejected(signoff: Signoff, agent: str, event: str) -> None:
    """A person's no: the documented deny (exit 0), and their reason reaches the model."""
    why = f"not on a Friday ({uuid.uuid4().hex[:6]})"
    ran, _ = decide(signoff, agent, event, {"type": "reject", "reason": why})
    outcome = checked(agent, event, ran)
    assert ran.code == 0 and not outcome.runs
    assert why in outcome.reason
    if agent == "cursor":
        assert why in ran.body["user_message"]  # the person at Cursor sees it too


def edited(signoff: Signoff, agent: str, event: str) -> None:
    """An approval with edited arguments: the edit travels where the event carries one;
    elsewhere a deny that names the approved arguments, never a run as proposed."""
    data, _ = fixture_input(agent, event)
    args = {"command": "echo edited-by-a-person"}
    if agent == "claude-code" and event == "PreToolUse":
        args = {**data["tool_input"], "content": "LIMIT = 10\n"}  # the whole input, edited
    ran, _ = decide(signoff, agent, event, {"type": "approve", "args": args})
    outcome = checked(agent, event, ran)
    assert ran.code == 0
    if (agent, event) in EDITABLE:
        assert outcome.runs and outcome.updated_input == args
    else:
        assert not outcome.runs and outcome.updated_input is None
        assert "edited-by-a-person" in outcome.reason


def unanswered(signoff: Signoff, agent: str, event: str) -> None:
    """Nobody answers within ``--timeout 1``: exit 2, a deny, and the request is canceled,
    not left pending for someone to approve after the agent moved on."""
    data, session = fixture_input(agent, event)
    ran = run_hook(signoff, agent, json.dumps(data), timeout=1)
    outcome = checked(agent, event, ran)
    assert ran.code == 2 and not outcome.runs
    assert [r["status"] for r in requests_in(signoff, session)] == ["canceled"]


def unreachable(signoff: Signoff, agent: str, event: str) -> None:
    """signoff unreachable: exit 2 and a deny, never a pass."""
    data, _ = fixture_input(agent, event)
    ran = run_hook(signoff, agent, json.dumps(data), server=f"http://127.0.0.1:{free_port()}")
    outcome = checked(agent, event, ran)
    assert ran.code == 2 and not outcome.runs
    assert "signoff" in outcome.reason


def test_approved_call_runs(signoff: Signoff) -> None:
    """Approve: allow in each event's documented shape, with the agent's fields filed."""
    on_every_event(signoff, approved)


def test_rejected_call_is_blocked_with_the_reason(signoff: Signoff) -> None:
    """Reject: deny in each event's documented shape, the person's reason to the model."""
    on_every_event(signoff, rejected)


def test_edited_call_runs_edited_or_is_denied_saying_why(signoff: Signoff) -> None:
    """Approve with edits: updatedInput / updated_input where documented, else deny."""
    on_every_event(signoff, edited)


def test_no_decision_in_time_blocks_and_withdraws_the_request(signoff: Signoff) -> None:
    """--timeout 1 with nobody answering: exit 2, deny, request canceled."""
    on_every_event(signoff, unanswered)


def test_server_down_blocks(signoff: Signoff) -> None:
    """No server: exit 2, deny."""
    on_every_event(signoff, unreachable)


NOT_JSON = '{"hook_event_name": "PreToolUse", "tool_name": '

WRONG_SHAPE: list[tuple[str, str, str, str, Any]] = [
    # (agent, event, what, key, value): the event's fixture with one documented field broken
    ("claude-code", "PreToolUse", "tool_input a string of words", "tool_input", "rm -rf /"),
    ("claude-code", "PermissionRequest", "no tool_name", "tool_name", None),
    ("codex", "PreToolUse", "tool_input a number", "tool_input", 7),
    (
        "codex",
        "PermissionRequest",
        "an event signoff does not answer",
        "hook_event_name",
        "SessionStart",
    ),
    ("cursor", "beforeShellExecution", "no command", "command", None),
    ("cursor", "beforeMCPExecution", "tool_name a number", "tool_name", 3),
    ("cursor", "preToolUse", "tool_input a list", "tool_input", ["npm", "install"]),
]


def malformed_cases() -> list[tuple[str, str, str, str | None]]:
    """(agent, what, stdin, the event whose shape the deny takes, if it names one we answer)."""
    cases: list[tuple[str, str, str, str | None]] = [
        (agent, "not JSON", NOT_JSON, None) for agent in ("claude-code", "codex", "cursor")
    ]
    cases.append(("claude-code", "a JSON array", '[{"tool_name": "Bash"}]', None))
    for agent, event, what, key, value in WRONG_SHAPE:
        data, _ = fixture_input(agent, event)
        if value is None:
            del data[key]
        else:
            data[key] = value
        answered = data.get("hook_event_name") == event
        cases.append((agent, what, json.dumps(data), event if answered else None))
    return cases


def test_malformed_input_blocks_and_files_nothing(signoff: Signoff) -> None:
    """Input that is not the agent's JSON (not JSON, or JSON of the wrong shape): exit 2, a
    deny (in the event's shape when it names one signoff answers), and no request filed."""
    before = all_requests(signoff)

    def one(agent: str, what: str, text: str, event: str | None) -> None:
        ran = run_hook(signoff, agent, text)
        assert ran.code == 2, what
        if event is not None:
            outcome = checked(agent, event, ran)
        else:  # no event to answer: the agent's default shape, still a deny
            assert _denies(agent, ran.body), (what, ran.body)
            outcome = read_reply(agent, "", ran.body, ran.code, ran.stderr)
        assert not outcome.runs, what

    cases = malformed_cases()
    with ThreadPoolExecutor(max_workers=len(EVENTS)) as pool:
        futures = {pool.submit(one, *case): f"{case[0]}: {case[1]}" for case in cases}
    failures = {futures[f]: f.exception() for f in futures if f.exception() is not None}
    assert not failures, "\n\n".join(f"{name}: {exc}" for name, exc in failures.items())
    assert all_requests(signoff) == before


def _denies(agent: str, body: dict[str, Any]) -> bool:
    """Whether a reply's JSON says deny in any of the agent's documented shapes."""
    if agent == "cursor":
        return body.get("permission") == "deny"
    output = body.get("hookSpecificOutput", {})
    decision = output.get("decision", {})
    return bool(output.get("permissionDecision") == "deny" or decision.get("behavior") == "deny")


# -- the pure reply, for verdicts a person's decision does not produce ----------------------


@pytest.mark.parametrize(("agent", "event"), EVENTS, ids=IDS)
@pytest.mark.parametrize("failure", [False, True], ids=["decision", "failure"])
def test_a_deny_without_a_reason_still_blocks(agent: str, event: str, failure: bool) -> None:
    """A blank reason is filled in: Codex reads a deny without one (or exit 2 with an empty
    stderr) as a failed hook and runs the call."""
    answer = reply(cast(AgentName, agent), event, Verdict(allow=False, reason=" ", failure=failure))
    jsonschema.validate(answer.body, SCHEMAS[(agent, event)])
    outcome = read_reply(agent, event, answer.body, answer.exit_code, answer.stderr or "-")
    assert not outcome.runs and outcome.reason.strip() not in ("", "-")


def test_cursor_mcp_call_is_named_by_its_server_and_workspace() -> None:
    """beforeMCPExecution: the server is the mcp.json key (launch strings vary), and the
    workspace root stands in for the cwd it does not send."""
    data = json.loads((FIXTURES / "cursor.beforeMCPExecution.json").read_text())
    call = parse_call("cursor", data)
    assert call.tool_name == "mcp:github:create_issue"
    assert call.tool_input == {"repo": "acme/api", "title": "Rate limit the login endpoint"}
    assert call.cwd == "/home/dev/acme" and call.session_id == data["conversation_id"]
