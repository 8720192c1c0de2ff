"""schemathesis against a real ``signoff serve``, with hostile strings, as an agent and an approver.

The schema is loaded over HTTP from the running server. Every generated case is rewritten by
:func:`tests.security.hostile.hostile` (a lone surrogate, NUL, terminal escapes, bidi marks,
numbers past 64 bits, NaN and broken JSON where schemathesis itself would never go), then:

- stateless: each case is sent with the agent's token and the approver's (and, for calls
  that take a request id, again on a real pending request the agent has just filed: as the
  agent, then as the approver);
- stateful: schemathesis follows the schema's OpenAPI links from a submitted request's id
  to reading, deciding, waiting on, claiming, reporting, cancelling, resuming and auditing
  it, each step with the agent's or the approver's token, drawn per step.

No answer may be a 5xx; every error body is exactly ``{error, detail}`` (one line); no answer
to the agent shows a request approved on its decision; and afterwards the audit chain holds
no decision or vote by the agent and no move to approved made by the agent. The same runs
against a PostgreSQL-backed server (skipped without PostgreSQL, failed when CI=true).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import FlakyStrategyDefinition
from hypothesis.stateful import Bundle, rule
from schemathesis.generation.stateful.state_machine import StepInput, StepOutput

from signoff.server.app import API
from tests.conftest import PG_DSN, new_schema, pg_execute, postgres_dsn
from tests.security.hostile import VALID_BODIES, AnyCase, hostile
from tests.serving import Server, bearer, free_port, new_token, start_server

AGENT, APPROVER = "fuzz-agent", "fuzz-approver"
EVENTS = f"{API}/events"
LIFECYCLE = rf"^{API}/(requests|decisions|audit|resume)"
"""The calls a request's life goes through, which the stateful run follows by links."""


@dataclass
class Live:
    """The running server and its tokens: the admin's, and the agent's and approver's by name."""

    server: Server
    admin: str
    tokens: dict[str, str]

    def name_of(self, authorization: str | None) -> str | None:
        """Whose bearer token an ``Authorization`` header carries, if one of ours."""
        for name, token in self.tokens.items():
            if authorization == f"Bearer {token}":
                return name
        return None


def start_live(db: str, tmp: Path) -> Live:
    """A real server on ``db`` with an agent and an approver."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp), "COLUMNS": "200"}
    server = start_server(db, free_port(), env)
    try:
        assert server.admin_token is not None
        tokens = {}
        for name, role in ((AGENT, "agent"), (APPROVER, "approver")):
            tokens[name] = new_token(server, name, role)[0]
    except BaseException:
        server.stop()
        raise
    return Live(server, server.admin_token, tokens)


@pytest.fixture(scope="module")
def on_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A real server on its own SQLite file, for this module."""
    tmp = tmp_path_factory.mktemp("fuzz-sqlite")
    live = start_live(f"sqlite:///{tmp / 'serve.db'}", tmp)
    try:
        yield live
    finally:
        if live.server.process.poll() is None:
            live.server.stop()


@pytest.fixture(scope="module")
def on_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A real server on a PostgreSQL database of its own (skipped without one; failed on CI)."""
    dsn, database = asyncio.run(postgres_dsn()), new_schema()
    asyncio.run(pg_execute(f"CREATE DATABASE {database}", dsn))
    try:
        live = start_live(dsn.rsplit("/", 1)[0] + f"/{database}", tmp_path_factory.mktemp("pg"))
        try:
            yield live
        finally:
            if live.server.process.poll() is None:
                live.server.stop()
    finally:
        asyncio.run(pg_execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)", PG_DSN))


def load_schema(live: Live, roles: dict[str, str] | None = None, *, calm: bool = False) -> Any:
    """The schema the server serves, each case rewritten by :func:`hostile` (``roles``: whose
    token each case carries, drawn per case)."""
    schema = schemathesis.openapi.from_url(f"{live.server.base}/openapi.json", timeout=10)
    schema.hooks.register_hook_with_name(hostile(roles, calm=calm), "flatmap_case")
    return schema


def fuzz_settings(examples: int, steps: int | None = None) -> settings:
    """Runs without shrinking (each shrink step is a round trip to a server); reproducible,
    except stateful ones (``steps`` per scenario), which a restart must not simply repeat."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=steps is None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        stateful_step_count=steps or 50,  # hypothesis' default
    )


def own_session(case: AnyCase, scenario: str) -> None:
    """A submit's session and idempotency key made the scenario's own, so that a replayed
    submit opens a new request (201) rather than finding an earlier scenario's (200)."""
    if isinstance(case.body, dict) and isinstance(case.body.get("session_id"), str):
        case.body = {**case.body, "session_id": f"{case.body['session_id']}~{scenario}"}
    if isinstance(case.body, dict) and isinstance(case.body.get("idempotency_key"), str):
        case.body = {**case.body, "idempotency_key": f"{case.body['idempotency_key']}~{scenario}"}
    if "Idempotency-Key" in case.headers:
        case.headers["Idempotency-Key"] = f"{case.headers['Idempotency-Key']}~{scenario}"


def check_answer(status: int, text: str, what: str) -> None:
    """No 5xx; an error body is exactly ``{error, detail}``, two strings, the detail one line."""
    assert status < 500, (what, status, text)
    if status >= 400:
        try:
            body = json.loads(text)
        except ValueError:
            raise AssertionError((what, status, "error body is not JSON", text)) from None
        assert isinstance(body, dict) and set(body) == {"error", "detail"}, (what, status, text)
        assert isinstance(body["error"], str) and isinstance(body["detail"], str), (what, text)
        assert "\n" not in body["detail"], (what, text)


def check_not_approved_by_agent(text: str, what: str) -> None:
    """No request in an answer to the agent carries a decision or a vote by the agent."""
    try:
        body = json.loads(text)
    except ValueError:
        return
    requests = body.get("items", [body]) if isinstance(body, dict) else []
    for request in requests:
        if not isinstance(request, dict):
            continue
        deciders = [vote.get("decided_by") for vote in request.get("votes") or []]
        deciders.append((request.get("decision") or {}).get("decided_by"))
        assert AGENT not in deciders, (what, "decided by the agent", request)


def send(case: AnyCase, live: Live, token: str | None = None) -> tuple[int, str]:
    """``case`` sent to the server (with ``token`` if given); its status and body text.

    The event stream is read only as far as its status (and its body when that is an error).
    """
    headers = bearer(token) if token is not None else None
    if case.path == EVENTS:
        auth = headers or {"Authorization": case.headers["Authorization"]}
        url = f"{live.server.base}{case.formatted_path}"
        with httpx.stream("GET", url, params=case.query, headers=auth, timeout=15) as response:
            return response.status_code, response.read().decode() if response.is_error else ""
    answer = case.call(headers=headers, timeout=15)
    return answer.status_code, answer.text


def audit_shows_no_agent_decision(live: Live) -> None:
    """The audit chain: no decision or vote by the agent, no move to approved by the agent."""
    audit = httpx.get(f"{live.server.base}{API}/audit", headers=bearer(live.admin), timeout=30)
    assert audit.status_code == 200, audit.text
    entries = audit.json()["items"]
    decisions = [e for e in entries if e["action"] in {"decide", "vote"}]
    assert decisions, "the fuzz run never decided anything: it proves nothing about decisions"
    by_agent = [
        e
        for e in entries
        if e["actor"] == AGENT
        and (e["action"] in {"decide", "vote"} or e["to_status"] == "approved")
    ]
    assert by_agent == [], by_agent
    verified = httpx.get(
        f"{live.server.base}{API}/audit/verify", headers=bearer(live.admin), timeout=30
    )
    assert verified.status_code == 200 and verified.json()["ok"], verified.text


def file_request(live: Live) -> str:
    """The id of a new pending request the agent files."""
    created = httpx.post(
        f"{live.server.base}{API}/requests",
        json={"session_id": "fuzz", "tool_name": "write_file", "tool_args": {"path": "/etc/x"}},
        headers=bearer(live.tokens[AGENT]),
        timeout=10,
    )
    assert created.status_code == 201, created.text
    request_id: str = created.json()["id"]
    return request_id


def run_stateless(live: Live, examples: int) -> None:
    """Every operation's hostile cases, sent as the agent and as the approver."""
    schema = load_schema(live)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 20
    for operation in operations:

        @given(case=operation.as_strategy())
        @fuzz_settings(examples)
        def fuzz(case: AnyCase) -> None:
            for name in (AGENT, APPROVER):
                what = f"{case.method} {case.formatted_path} as {name}: {case!r}"
                status, text = send(case, live, live.tokens[name])
                check_answer(status, text, what)
                if name == AGENT and status < 400:
                    check_not_approved_by_agent(text, what)
            if "request_id" in (case.path_parameters or {}):
                # the same hostile call on a real pending request the agent just filed: first
                # by the agent (its own request), then by the approver (who may decide it)
                case.path_parameters = {**case.path_parameters, "request_id": file_request(live)}
                for name in (AGENT, APPROVER):
                    what = f"{case.method} {case.formatted_path} as {name}, on a real request"
                    status, text = send(case, live, live.tokens[name])
                    check_answer(status, text, what)
                    if name == AGENT and status < 400:
                        check_not_approved_by_agent(text, what)

        fuzz()


def run_stateful(live: Live, scenarios: int, steps: int) -> None:
    """schemathesis' state machine over the schema's links, each step as agent or approver."""
    schema = load_schema(live, live.tokens, calm=True).include(path_regex=LIFECYCLE)
    submit = schema[f"{API}/requests"]["POST"]
    plain = st.sampled_from(VALID_BODIES[submit.label]).map(
        lambda body: submit.Case(
            body=body, media_type="application/json", headers=bearer(live.tokens[AGENT])
        )
    )
    # mostly a plain request by the agent, so that there is a request to follow links from
    submits = st.one_of(plain, plain, submit.as_strategy()).map(StepInput.initial)
    created: set[str] = set()
    followed: list[str] = []  # calls made on a request the run created

    generated = schema.as_state_machine()
    # schemathesis reads session_id as a key to a "session" nothing creates, so it starts
    # scenarios with calls on random ids (run statelessly above) rather than with a submit:
    # those roots are dropped, and a submit rule starts every sequence instead
    roots = {name: None for name in dir(generated) if name.startswith("RANDOM__")}
    assert roots, "schemathesis names its root rules differently now: update this test"

    class Workflow(generated):  # type: ignore[misc,valid-type]
        """The generated link-following machine, started by submits, with our checks."""

        locals().update(roots)

        def setup(self) -> None:
            self.scenario = secrets.token_hex(4)

        def teardown(self) -> None:
            finished.append(self.scenario)

        @rule(target=Bundle("catch_all"), input=submits)
        def submit(self, input: StepInput) -> StepOutput:
            self.recorder.record_case(case=input.case)
            output: StepOutput = self.step(input)
            return output

        def call(self, case: AnyCase, **kwargs: Any) -> Any:
            if case.operation.label == submit.label:
                own_session(case, self.scenario)
            kwargs.setdefault("timeout", 15)
            return case.call(**kwargs)

        def validate_response(self, response: Any, case: AnyCase, **kwargs: Any) -> None:
            who = live.name_of(case.headers.get("Authorization"))
            what = f"{case.method} {case.formatted_path} as {who}: {case!r}"
            try:
                check_answer(response.status_code, response.text, what)
                if who == AGENT and response.status_code < 400:
                    check_not_approved_by_agent(response.text, what)
            except AssertionError as failed:
                failures.append(failed)  # kept even if hypothesis' replay turns out flaky
                raise
            if case.path_parameters.get("request_id") in created:
                followed.append(f"{case.operation.label} {response.status_code}")
            if case.operation.label == f"POST {API}/requests" and response.status_code == 201:
                created.add(response.json()["id"])

    finished: list[str] = []
    failures: list[AssertionError] = []
    for _ in range(6):
        # a sequence replayed against a server that has moved on (a grant made in one
        # scenario approves a later one's request) draws differently; schemathesis restarts
        # then too
        with contextlib.suppress(FlakyStrategyDefinition):
            Workflow.run(settings=fuzz_settings(scenarios, steps=steps))
        if failures:
            raise failures[0]
        if len(finished) >= scenarios:
            break
    assert len(finished) >= scenarios, f"{len(finished)} of {scenarios} scenarios ran"
    # the links were followed: many calls on requests the run made, some of them successful
    # (how many succeed depends on the draw: one run in several gave 11 of 40, so the bar is
    # "clearly some", not "half")
    assert len(created) >= scenarios // 2, created
    assert len(followed) >= scenarios, followed
    assert sum(call.endswith(" 200") for call in followed) >= scenarios // 8, followed


def test_hostile_cases_as_agent_and_approver_on_sqlite(on_sqlite: Live) -> None:
    """Hostile generated requests to every operation (SQLite): no 5xx, one error shape."""
    run_stateless(on_sqlite, examples=20)
    audit_shows_no_agent_decision(on_sqlite)


def test_following_links_as_agent_or_approver_on_sqlite(on_sqlite: Live) -> None:
    """Link-driven sequences on real requests (SQLite): no 5xx, nothing approved by the agent."""
    run_stateful(on_sqlite, scenarios=40, steps=10)
    audit_shows_no_agent_decision(on_sqlite)


def test_hostile_cases_and_links_on_postgres(on_postgres: Live) -> None:
    """The same two runs, shorter, against PostgreSQL (which refuses NUL in text columns)."""
    run_stateless(on_postgres, examples=6)
    run_stateful(on_postgres, scenarios=15, steps=8)
    audit_shows_no_agent_decision(on_postgres)


@pytest.mark.parametrize("store", ["on_sqlite", "on_postgres"])
@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        pytest.param(
            "",
            '{"session_id": "s", "tool_name": "t", "tool_args": {"n": NaN}}',
            "tool_args.n",
            id="NaN-in-tool-args",
        ),
        pytest.param(
            "",
            '{"session_id": "s", "tool_name": "t", "context": [1e999]}',
            "context.0",
            id="1e999-in-context",
        ),
        pytest.param(
            "/decision",
            '{"type": "approve", "args": {"n": -Infinity}}',
            "args.n",
            id="-Infinity-in-edited-args",
        ),
    ],
)
def test_what_the_fuzz_found_stays_fixed(
    request: pytest.FixtureRequest, store: str, path: str, body: str, field: str
) -> None:
    """NaN/Infinity/1e999 in a body are 422 naming the field (they were 500), and an agent's
    NUL in its tool args leaves audit verify working on every store (503 on PostgreSQL)."""
    live: Live = request.getfixturevalue(store)
    target = f"{API}/requests" + (f"/{file_request(live)}{path}" if path else "")
    token = live.tokens[APPROVER if path else AGENT]
    sent = httpx.post(
        f"{live.server.base}{target}",
        content=body.encode(),
        headers={**bearer(token), "Content-Type": "application/json"},
        timeout=10,
    )
    assert sent.status_code == 422, sent.text
    check_answer(sent.status_code, sent.text, target)
    assert f"{field} is not a finite number" in sent.json()["detail"], sent.text
    nul = httpx.post(
        f"{live.server.base}{API}/requests",
        json={"session_id": "s", "tool_name": "t", "tool_args": {"text": "a\x00b"}},
        headers=bearer(live.tokens[AGENT]),
        timeout=10,
    )
    assert nul.status_code == 201, nul.text
    verified = httpx.get(
        f"{live.server.base}{API}/audit/verify", headers=bearer(live.admin), timeout=30
    )
    assert verified.status_code == 200 and verified.json()["ok"], verified.text


def test_hostile_rewrites_reach_every_kind() -> None:
    """The rewrite hook draws surrogates, NaN, broken UTF-8 and huge numbers, not only text."""
    schema = schemathesis.openapi.from_dict(_submit_only_schema())
    schema.hooks.register_hook_with_name(hostile(), "flatmap_case")
    seen: list[bytes] = []

    @given(case=schema["/requests"]["POST"].as_strategy())
    @fuzz_settings(300)
    def draw(case: AnyCase) -> None:
        body = case.body
        seen.append(body if isinstance(body, bytes) else b"json: " + json.dumps(body).encode())

    draw()
    text = b"\n".join(s for s in seen if s.startswith(b"json: ")).decode()
    raw = b"\n".join(s for s in seen if not s.startswith(b"json: "))
    assert "\\ud800" in text or "\\udfff" in text
    assert "\\u0000" in text and "\\u001b" in text and "\\u202e" in text
    assert str(2**70) in text or str(2**63) in text
    assert b"NaN" in raw or b"Infinity" in raw or b"1e999" in raw
    assert b"\xff" in raw or b"\xed\xa0\x80" in raw or b"\xc3" in raw or b"\x80" in raw


def _submit_only_schema() -> dict[str, Any]:
    body = {
        "type": "object",
        "required": ["session_id", "tool_args"],
        "properties": {
            "session_id": {"type": "string", "minLength": 1},
            "tool_args": {"type": "object", "properties": {"n": {"type": "integer"}}},
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/requests": {
                "post": {
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": body}},
                    },
                    "responses": {"201": {"description": "made"}},
                }
            }
        },
    }
