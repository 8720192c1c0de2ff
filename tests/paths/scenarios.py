"""The scenario set every decision path is held to: what each decision must end as, everywhere.

One :class:`Scenario` names a decision (or none, for expiry; or two at once, for the race)
and the outcome it must have whatever carried it: the request's final state, a normalized
projection of its audit entries, the text the model is told, and how often the tool ran.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from signoff.integrations.outcomes import DENIED_NO_DECISION, edit_note
from tests.serving import Server, agent_token, bearer, free_port, start_server

Kind = Literal["approval", "choice", "questions"]

AGENT_NAME = "paths-bot"
"""The agent token's name: audit entries by it are the agent's."""

TOOL = "deploy"
"""The gated tool every approval scenario calls."""

SOON_TOOL = "deploy_soon"
"""The same tool under a name the server's policy expires after :data:`EXPIRES_IN` seconds."""

EXPIRES_IN = 2

ARGS: dict[str, Any] = {"service": "api", "version": "1.2"}
EDITED: dict[str, Any] = {"service": "api", "version": "1.3"}
REASON = "not during the freeze"
FEEDBACK = "Deploy to staging first."
PROMPT = "Which database?"
OPTIONS = ["Postgres", "SQLite", "MySQL"]
CHOICE = "SQLite"
QUESTION = "Which region?"
ANSWER = "eu-west-1"
ANSWER_FEEDBACK = "Keep it small."

POLICY = f"""
[tools]
need_approval = ["*"]

[[rules]]
tool = "{SOON_TOOL}"
action = "ask"
expires_in = {EXPIRES_IN}
on_expire = "reject"
"""
"""The operator's tools.toml of the paths server: everything asks, one tool expires soon."""


def tool_result(args: Mapping[str, Any]) -> str:
    """What the gated tool returns, in every path's implementation."""
    return f"deployed {args['service']} {args['version']}"


@dataclass(frozen=True)
class Scenario:
    """One decision and the outcome it must have on every path."""

    name: str
    kind: Kind
    decision: dict[str, Any] | None
    """What the person decides; None when nobody does (expiry, or the race's two below)."""
    state: str
    """The request's final status."""
    ran: tuple[dict[str, Any], ...]
    """The arguments the tool ran with, once per run."""
    told: str
    """What the model is told, normalized by :func:`normalize`."""
    audit: tuple[tuple[Any, ...], ...]
    """The audit projection (:func:`project`) of the request."""
    via: str | None = "person"
    """The final decision record's ``via``."""
    race: tuple[dict[str, Any], dict[str, Any]] | None = None
    """Two decisions made at once; the first decides the outcome above when it wins."""
    refused: dict[str, Any] | None = None
    """A decision tried first that must be refused (422), the request staying pending."""

    @property
    def tool(self) -> str:
        """The tool name an approval scenario calls."""
        return SOON_TOOL if self.name == "expiry" else TOOL


def _submit(kind: Kind) -> tuple[Any, ...]:
    return ("submit", "agent", None, "pending", kind)


def _ran(args: Mapping[str, Any]) -> tuple[tuple[Any, ...], ...]:
    return (
        ("claim", "agent", "approved", "executing", dict(args)),
        ("complete", "agent", "executing", "completed", True),
    )


APPROVE = {"type": "approve"}
BROKEN = {"service": ["rm", "-rf", "/"], "version": "1.3"}
"""An edit that breaks the tool's schema (a string made a list): issue 16's item 2."""

ARGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"service": {"type": "string"}, "version": {"type": "string"}},
    "required": ["service", "version"],
}
"""The gated tool's parameters, as a framework gives them to the model."""
REJECT = {"type": "reject", "reason": REASON}

QUESTIONS_TOLD = (
    f"The person answered. Continue the task using their reply. Feedback: {ANSWER_FEEDBACK} "
    f"Q: {QUESTION} A: {ANSWER}"
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(
            name="approve",
            kind="approval",
            decision=APPROVE,
            state="completed",
            ran=(ARGS,),
            told=tool_result(ARGS),
            audit=(
                _submit("approval"),
                ("decide", "person", "pending", "approved", "approve", None),
                *_ran(ARGS),
            ),
        ),
        Scenario(
            name="edit",
            kind="approval",
            decision={"type": "approve", "args": EDITED},
            state="completed",
            ran=(EDITED,),
            told=f"{tool_result(EDITED)} {edit_note(EDITED, ARGS)}",
            audit=(
                _submit("approval"),
                ("decide", "person", "pending", "approved", "approve", EDITED),
                *_ran(EDITED),
            ),
        ),
        Scenario(
            name="reject",
            kind="approval",
            decision=REJECT,
            state="rejected",
            ran=(),
            told=f"A person rejected this call: {REASON}. It was not run.",
            audit=(
                _submit("approval"),
                ("decide", "person", "pending", "rejected", "reject", REASON),
            ),
        ),
        Scenario(
            name="respond",
            kind="approval",
            decision={"type": "respond", "feedback": FEEDBACK},
            state="rejected",
            ran=(),
            told=FEEDBACK,
            audit=(
                _submit("approval"),
                ("decide", "person", "pending", "rejected", "respond", FEEDBACK),
            ),
        ),
        Scenario(
            name="choose",
            kind="choice",
            decision={"type": "choose", "choice": CHOICE},
            state="approved",
            ran=(),
            told=CHOICE,
            audit=(
                _submit("choice"),
                ("decide", "person", "pending", "approved", "choose", CHOICE),
            ),
        ),
        Scenario(
            name="answer",
            kind="questions",
            decision={"type": "answer", "answers": {"q1": ANSWER}, "feedback": ANSWER_FEEDBACK},
            state="approved",
            ran=(),
            told=QUESTIONS_TOLD,
            audit=(
                _submit("questions"),
                ("decide", "person", "pending", "approved", "answer", [ANSWER]),
            ),
        ),
        Scenario(
            name="expiry",
            kind="approval",
            decision=None,
            state="expired",
            ran=(),
            told=DENIED_NO_DECISION,
            audit=(_submit("approval"), ("expire", "expiry", "pending", "expired")),
            via="expiry",
        ),
        Scenario(
            name="bad-edit",
            kind="approval",
            decision=APPROVE,
            state="completed",
            ran=(ARGS,),
            told=tool_result(ARGS),
            audit=(
                _submit("approval"),
                ("decide", "person", "pending", "approved", "approve", None),
                *_ran(ARGS),
            ),
            refused={"type": "approve", "args": BROKEN},
        ),
        Scenario(
            name="race",
            kind="approval",
            decision=None,
            state="completed",
            ran=(ARGS,),
            told=tool_result(ARGS),
            audit=(
                _submit("approval"),
                ("decide", "person", "pending", "approved", "approve", None),
                *_ran(ARGS),
            ),
            race=(APPROVE, REJECT),
        ),
    ]
}
"""Every scenario by name."""

FORBIDDEN_EDIT = Scenario(
    name="forbidden-edit",
    kind="approval",
    decision=APPROVE,
    state="completed",
    ran=(ARGS,),
    told=tool_result(ARGS),
    audit=SCENARIOS["approve"].audit,
    refused={"type": "approve", "args": EDITED},
)
"""An edit the review forbids (LangGraph: approve and reject only) is refused; then approved.

Not in :data:`SCENARIOS`: only a path whose review narrows the decisions runs it."""

REJECT_WON = SCENARIOS["reject"]
"""The race's outcome when the rejection wins."""


def scenarios(
    *kinds: Kind, skip: tuple[str, ...] = (), only: tuple[str, ...] = ()
) -> list[Scenario]:
    """The scenarios of these kinds (all without), less ``skip``, only ``only`` if given."""
    return [
        s
        for s in SCENARIOS.values()
        if (not kinds or s.kind in kinds) and s.name not in skip and (not only or s.name in only)
    ]


def decision_for(decision: dict[str, Any], request: Mapping[str, Any]) -> dict[str, Any]:
    """``decision`` for this request: an answer goes to the request's own first question id."""
    if decision["type"] != "answer":
        return decision
    first = request["questions"][0]["id"]
    return {**decision, "answers": {first: ANSWER}}


def normalize(told: object) -> str:
    """What the model was told as one line: a list joined, whitespace collapsed."""
    if isinstance(told, list):
        told = " ".join(str(t) for t in told)
    return re.sub(r"\s+", " ", str(told)).strip()


def _who(actor: str) -> str:
    if actor == AGENT_NAME or actor.startswith("agent:"):
        return "agent"
    if actor in ("expiry", "policy", "grant", "system", "lease"):
        return actor
    return "person"


def project(entries: list[Mapping[str, Any]]) -> tuple[tuple[Any, ...], ...]:
    """The audit entries of one request, as (action, who, from, to, what it carried)."""
    out: list[tuple[Any, ...]] = []
    for entry in entries:
        details = entry.get("details") or {}
        row: tuple[Any, ...] = (
            entry["action"],
            _who(entry["actor"]),
            entry["from_status"],
            entry["to_status"],
        )
        if entry["action"] == "submit":
            row += (details["request"]["kind"],)
        elif entry["action"] == "decide":
            decision = details.get("decision") or {}
            kind = str(decision.get("type"))
            carried = {
                "approve": decision.get("args"),
                "reject": decision.get("reason"),
                "respond": decision.get("feedback"),
                "choose": decision.get("choice"),
                "answer": sorted((decision.get("answers") or {}).values()),
            }.get(kind)
            row += (kind, carried)
        elif entry["action"] == "claim":
            row += (details.get("args"),)
        elif entry["action"] == "complete":
            row += (details.get("ok"),)
        out.append(row)
    return tuple(out)


@dataclass
class Outcome:
    """What one combination of paths ended with, to compare against its scenario."""

    request_id: str
    told: str
    ran: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class PathsServer:
    """The module's real ``signoff serve`` with the paths policy, and tokens on it."""

    server: Server
    agent_token: str
    home: Path

    @property
    def admin_token(self) -> str:
        """The admin token (a person deciding over HTTP)."""
        assert self.server.admin_token is not None
        return self.server.admin_token

    @property
    def api(self) -> str:
        """The API's base URL."""
        return f"{self.server.base}/api/v1"

    @property
    def db_path(self) -> Path:
        """The server's SQLite file."""
        return Path(self.server.db.removeprefix("sqlite:///"))


ROOT = Path(__file__).resolve().parents[2]
"""The checkout, so the server can import :mod:`tests.paths.hosted_agent`."""


def serve_paths(home: Path) -> Iterator[PathsServer]:
    """Start a real ``signoff serve`` on its own SQLite file with :data:`POLICY` and the
    hosted agent ``deploy``; stop it after."""
    (home / "signoff").mkdir(parents=True, exist_ok=True)
    (home / "signoff" / "tools.toml").write_text(POLICY)
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(home),
        "COLUMNS": "200",
        "SIGNOFF_PATHS_TOOL_LOG": str(home / "hosted.jsonl"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    running = start_server(
        f"sqlite:///{home / 'serve.db'}",
        free_port(),
        env,
        "--agent",
        "deploy=tests.paths.hosted_agent:hosted",
        cwd=str(home),
    )
    try:
        yield PathsServer(running, agent_token(running, AGENT_NAME), home)
    finally:
        if running.process.poll() is None:
            running.stop()


def check(
    paths: PathsServer,
    scenario: Scenario,
    outcome: Outcome,
    via: str | None = None,
    told: Mapping[str, str] | None = None,
) -> None:
    """Assert the outcome is the scenario's (the race's: whichever decision won).

    ``via`` is the channel the decision must be recorded under when it is not the scenario's
    (``mcp-elicitation`` for an answer given in an MCP client's own prompt); ``told`` gives,
    by the name of the scenario that decided the outcome, what a path documents telling its
    model instead.
    """
    with httpx.Client(base_url=paths.api, headers=bearer(paths.admin_token), timeout=30) as http:
        request = http.get(f"/requests/{outcome.request_id}").json()
        entries = http.get("/audit", params={"request_id": outcome.request_id}).json()["items"]
    expected = scenario
    if scenario.race is not None and request["status"] == "rejected":
        expected = REJECT_WON
    got = (
        request["status"],
        project(entries),
        normalize(outcome.told),
        [dict(a) for a in outcome.ran],
        (request.get("decision") or {}).get("via"),
    )
    want = (
        expected.state,
        expected.audit,
        normalize((told or {}).get(expected.name, expected.told)),
        [dict(a) for a in expected.ran],
        via or expected.via,
    )
    assert got == want, f"{scenario.name}: got {got!r}\nwant {want!r}"
