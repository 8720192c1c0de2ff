"""The one-line outcomes the demo, ``submit --wait`` and the terminal inbox print, on a real
service: every kind and ending, agent text escaped and cut to one line."""

from __future__ import annotations

from typing import Any

from signoff.backends import LocalBackend
from signoff.domain.requests import QuestionsRequest, Request
from signoff.terminal.outcome_lines import call_label, decided_notice, outcome_line
from signoff.testing import ADMIN, AGENT, APPROVER, memory_service


async def desk() -> tuple[LocalBackend, LocalBackend, LocalBackend]:
    """The agent, a person (alice) and the admin (root) on one memory service."""
    service = memory_service()
    return (
        LocalBackend(service, AGENT),
        LocalBackend(service, APPROVER),
        LocalBackend(service, ADMIN),
    )


async def filed(agent: LocalBackend, **body: Any) -> Request:
    """A request from the agent in session s."""
    return (await agent.submit({"session_id": "s", **body})).request


async def test_a_tool_calls_line_waits_for_its_result_and_names_edits() -> None:
    """Approved: no line until it ran, then who, the call and the result; an edit says so;
    a failure says why."""
    agent, alice, root = await desk()
    call = await filed(agent, tool_name="write_file", tool_args={"path": "notes.md", "x": 1})
    approved = await alice.decide(call.id, {"type": "approve"})
    assert outcome_line(approved) is None
    assert decided_notice(approved) == "Approved write_file notes.md"
    await root.claim(call.id, {"path": "notes.md", "x": 1})
    done = await root.complete(call.id, "wrote 6 bytes")
    assert outcome_line(done) == "approved by alice: write_file notes.md -> wrote 6 bytes"
    other = await filed(agent, tool_name="shell", tool_args={"command": "make"})
    edited = await alice.decide(other.id, {"type": "approve", "args": {"command": "make -n"}})
    assert decided_notice(edited) == "Approved with edits shell make"
    await root.claim(other.id, {"command": "make -n"})
    failed = await root.fail(other.id, "exit 2")
    assert outcome_line(failed) == "approved with edits by alice: shell make -> failed: exit 2"


async def test_rejections_answers_and_system_endings() -> None:
    """A rejection quotes its reason; a choice and questions give the answers; a canceled
    request says so; a pending one has no line."""
    agent, alice, _ = await desk()
    shell = await filed(agent, tool_name="shell", tool_args={"command": "rm -rf build"})
    assert outcome_line(shell) is None
    rejected = await alice.decide(shell.id, {"type": "reject", "reason": "too risky"})
    assert outcome_line(rejected) == "rejected by alice (too risky): shell rm -rf build"
    assert decided_notice(rejected) == "Rejected shell rm -rf build"
    choice = await filed(agent, kind="choice", prompt="Which database?", options=["PG", "SQLite"])
    chosen = await alice.decide(choice.id, {"type": "choose", "choice": "PG"})
    assert outcome_line(chosen) == "answered by alice: Which database? -> PG"
    assert decided_notice(chosen) == "Answered Which database?"
    questions = await filed(agent, kind="questions", questions=["Name?", "Why?"])
    assert isinstance(questions, QuestionsRequest)
    ids = [q.id for q in questions.questions]
    answer = {"type": "answer", "answers": {ids[0]: "Ada", ids[1]: "because"}}
    answered = await alice.decide(questions.id, answer)
    assert outcome_line(answered) == "answered by alice: Name? -> Name?: Ada; Why?: because"
    gone = await filed(agent, tool_name="deploy", tool_args={})
    canceled = await agent.cancel(gone.id)
    assert outcome_line(canceled) == "canceled: deploy"


async def test_agent_text_is_escaped_cut_and_on_one_line() -> None:
    """Escapes, bidi marks and newlines an agent sends are visible escapes; long text is cut
    with an ellipsis; nothing can start a new line or move the cursor."""
    agent, alice, _ = await desk()
    hostile = await filed(
        agent,
        tool_name="shell\x1b]0;x\x07",
        tool_args={"command": "ls\u202e\n" + "a" * 200},
    )
    label = call_label(hostile)
    assert label.startswith("shell\\x1b]0;x\\x07 ls\\u202e\\x0aa")
    assert label.endswith("…") and len(label) == 60
    rejected = await alice.decide(hostile.id, {"type": "reject", "reason": "no\x1b[2J"})
    line = outcome_line(rejected)
    assert line is not None and line.startswith("rejected by alice (no\\x1b[2J): shell")
    assert not any(ord(c) < 32 or c == "\u202e" for c in line)
