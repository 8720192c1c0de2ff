"""OpenAI Agents SDK runs on ScriptedModel scripts, decided through signoff in process and
over HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import pytest
from agents import (
    Agent,
    RunContextWrapper,
    Runner,
    RunState,
    function_tool,
    set_tracing_disabled,
)
from agents.testing import ScriptedModel, assistant_message, function_call

from signoff.backends import Backend
from signoff.domain.requests import ApprovalRequest, Request
from signoff.errors import InvalidDecision, InvalidRequest, InvalidTransition, TaskNotFound
from signoff.integrations.openai_agents import (
    apply_decisions,
    edit_problem,
    resume_with_signoff,
    run_with_signoff,
    signoff_args,
    signoff_edits,
    task_agent,
)
from signoff.integrations.outcomes import edit_note
from tests.integrations.conftest import Sides

Ran = list[tuple[str, str, dict[str, Any]]]


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    """No trace ever leaves the process (there is no network, and no API key)."""
    set_tracing_disabled(True)


def make_agent(model: ScriptedModel, ran: Ran, name: str = "ops") -> Agent[Any]:
    """An agent whose gated tools record (tool, call id, args) as they run.

    ``write_file`` reads edits through signoff_args; ``delete`` does not.
    """

    @function_tool(needs_approval=True)
    async def write_file(ctx: RunContextWrapper[Any], path: str, content: str) -> str:
        """Write a file."""
        args = signoff_args(ctx, {"path": path, "content": content})
        ran.append(("write_file", getattr(ctx, "tool_call_id", ""), args))
        return f"wrote {len(args['content'])} bytes to {args['path']}"

    @function_tool(needs_approval=True)
    async def delete(ctx: RunContextWrapper[Any], path: str) -> str:
        """Delete a file."""
        ran.append(("delete", getattr(ctx, "tool_call_id", ""), {"path": path}))
        return f"deleted {path}"

    return Agent(name=name, model=model, tools=[write_file, delete])


def three_calls() -> list[Any]:
    """One model turn with three parallel gated calls."""
    return [
        function_call("write_file", {"path": "a.txt", "content": "A"}, call_id="call_a"),
        function_call("write_file", {"path": "b.txt", "content": "B"}, call_id="call_b"),
        function_call("delete", {"path": "/etc"}, call_id="call_c"),
    ]


def tool_outputs(model: ScriptedModel) -> dict[str, str]:
    """The function-call outputs the model was given in its last call, by call id."""
    last = model.last_call
    assert last is not None and isinstance(last.input, list)
    return {
        item["call_id"]: item["output"]
        for item in last.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


async def decide_when_filed(
    person: Backend, ids: asyncio.Future[list[str]], decide: Callable[[Request], dict[str, Any]]
) -> None:
    """As a person: once the requests are filed, decide each one as ``decide`` says."""
    for request_id in await ids:
        request = await person.get(request_id)
        await person.decide(request_id, decide(request))


def by_call(decisions: dict[str, dict[str, Any]]) -> Callable[[Request], dict[str, Any]]:
    """A decider that looks the decision up by the request's tool_call_id."""

    def decide(request: Request) -> dict[str, Any]:
        assert isinstance(request, ApprovalRequest) and request.tool_call_id is not None
        return decisions[request.tool_call_id]

    return decide


MIXED: dict[str, dict[str, Any]] = {
    "call_a": {"type": "approve"},
    "call_b": {"type": "approve", "args": {"path": "b.txt", "content": "edited"}},
    "call_c": {"type": "reject", "reason": "never delete /etc"},
}


async def test_parallel_calls_with_mixed_decisions(sides: Sides) -> None:
    """Three parallel calls decided approve / edit / reject by a person while the agent waits."""
    model = ScriptedModel([three_calls(), [assistant_message("done")]])
    ran: Ran = []
    filed: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()

    async def on_pause(task_id: str | None, ids: list[str]) -> None:
        assert task_id is not None
        filed.set_result(ids)

    person = asyncio.create_task(decide_when_filed(sides.person, filed, by_call(MIXED)))
    result = await run_with_signoff(
        make_agent(model, ran),
        "tidy up",
        signoff=sides.agent,
        session_id="s-mixed",
        store=sides.service.store,
        editable={"write_file"},
        on_pause=on_pause,
        timeout=30,
    )
    await person

    assert result.final_output == "done"
    assert sorted(ran) == [
        ("write_file", "call_a", {"path": "a.txt", "content": "A"}),
        ("write_file", "call_b", {"path": "b.txt", "content": "edited"}),
    ]
    outputs = tool_outputs(model)
    assert outputs["call_a"] == "wrote 1 bytes to a.txt"
    # the edited call's output is followed by the edit note every integration gives the model
    assert outputs["call_b"] == "wrote 6 bytes to b.txt\n\n" + edit_note(
        {"path": "b.txt", "content": "edited"}, {"path": "b.txt", "content": "B"}
    )
    assert outputs["call_c"] == "A person rejected this call: never delete /etc. It was not run."
    requests: dict[str | None, ApprovalRequest] = {}
    for request_id in filed.result():
        request = await sides.agent.get(request_id)
        assert isinstance(request, ApprovalRequest)
        requests[request.tool_call_id] = request
    assert requests["call_a"].tool_name == "write_file"
    assert requests["call_a"].tool_args == {"path": "a.txt", "content": "A"}
    assert {k: r.status for k, r in requests.items()} == {
        "call_a": "completed",
        "call_b": "completed",
        "call_c": "rejected",
    }
    reported = requests["call_b"].result
    assert reported is not None and reported.result == "wrote 6 bytes to b.txt"  # the tool's own
    tasks = await sides.service.store.list_tasks(status="Completed")
    assert [(t.agent, t.output) for t in tasks] == [("openai-agents:ops", "done")]
    seen = json.dumps(model.last_call.input if model.last_call else None, default=str)
    for word in ("req_", "signoff", '"status": "pending"', "approved_args"):
        assert word not in seen, f"the model was shown {word!r}"  # no protocol content


async def test_restart_resumes_from_the_stored_run_state(sides: Sides) -> None:
    """A run paused in one process is resumed by another, with a new agent of the same name."""
    first_model = ScriptedModel([three_calls()])
    ran: Ran = []
    paused: asyncio.Future[tuple[str, list[str]]] = asyncio.get_running_loop().create_future()

    async def on_pause(task_id: str | None, ids: list[str]) -> None:
        assert task_id is not None
        paused.set_result((task_id, ids))

    first = asyncio.create_task(
        run_with_signoff(
            make_agent(first_model, ran),
            "tidy up",
            signoff=sides.agent,
            session_id="s-restart",
            store=sides.service.store,
            on_pause=on_pause,
        )
    )
    task_id, ids = await paused
    first.cancel()  # the first process dies while it waits
    with pytest.raises(asyncio.CancelledError):
        await first
    stored = await sides.service.store.get_task(task_id)
    assert stored is not None and stored.status == "Paused"
    assert [p.tool_call_id for p in stored.pending] == ["call_a", "call_b", "call_c"]
    assert await sides.service.store.find_task(ids[0]) == stored

    decisions = {**MIXED, "call_b": {"type": "approve"}}
    for request_id in ids:
        await sides.person.decide(
            request_id, by_call(decisions)(await sides.person.get(request_id))
        )

    second_model = ScriptedModel([[assistant_message("resumed")]])
    result = await resume_with_signoff(
        make_agent(second_model, ran), task_id, signoff=sides.agent, store=sides.service.store
    )

    assert result.final_output == "resumed"
    assert [call_id for _, call_id, _ in sorted(ran)] == ["call_a", "call_b"]
    assert set(tool_outputs(second_model)) == {"call_a", "call_b", "call_c"}
    done = await sides.service.store.get_task(task_id)
    assert done is not None and done.status == "Completed" and done.output == "resumed"
    kinds = [h.kind for h in done.history if h.kind in ("approval", "rejection")]
    assert sorted(kinds) == ["approval", "approval", "rejection"]
    with pytest.raises(InvalidTransition):
        await resume_with_signoff(
            make_agent(second_model, ran), task_id, signoff=sides.agent, store=sides.service.store
        )


async def test_resume_refuses_another_agents_or_an_unknown_task(sides: Sides) -> None:
    """A stored pause resumes only with an agent of the same name, and only if it exists."""
    task_id = await pause_and_die(sides, make_agent(ScriptedModel([three_calls()]), []), "s-name")
    other = make_agent(ScriptedModel(), [], name="someone-else")
    with pytest.raises(InvalidRequest, match="openai-agents:ops"):
        await resume_with_signoff(other, task_id, signoff=sides.agent, store=sides.service.store)
    with pytest.raises(TaskNotFound):
        await resume_with_signoff(
            make_agent(ScriptedModel(), []),
            "task_nope",
            signoff=sides.agent,
            store=sides.service.store,
        )
    assert task_agent(other) == "openai-agents:someone-else"


async def test_rejection_reason_and_feedback_reach_the_model(sides: Sides) -> None:
    """A reject's reason and a respond's feedback are what the model reads for those calls."""
    model = ScriptedModel(
        [
            [
                function_call("delete", {"path": "x"}, call_id="r1"),
                function_call("delete", {"path": "y"}, call_id="r2"),
            ],
            [assistant_message("ok")],
        ]
    )
    ran: Ran = []
    decisions = {
        "r1": {"type": "reject", "reason": "x is still in use"},
        "r2": {"type": "respond", "feedback": "Ask the owner of y first."},
    }
    filed: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()

    async def on_pause(task_id: str | None, ids: list[str]) -> None:
        assert task_id is None  # no store: nothing kept
        filed.set_result(ids)

    person = asyncio.create_task(decide_when_filed(sides.person, filed, by_call(decisions)))
    result = await run_with_signoff(
        make_agent(model, ran),
        "clean",
        signoff=sides.agent,
        session_id="s-reason",
        on_pause=on_pause,
    )
    await person
    assert result.final_output == "ok" and ran == []
    assert tool_outputs(model) == {
        "r1": "A person rejected this call: x is still in use. It was not run.",
        "r2": "Ask the owner of y first.",
    }


async def test_edits_reach_the_tool_only_through_the_override(sides: Sides) -> None:
    """An edit runs through signoff_args; an edit of a tool not declared editable is refused."""
    model = ScriptedModel(
        [
            [
                function_call("write_file", {"path": "p", "content": "old"}, call_id="e1"),
                function_call("delete", {"path": "keep"}, call_id="e2"),
            ],
            [assistant_message("edited")],
        ]
    )
    ran: Ran = []
    decisions = {
        "e1": {"type": "approve", "args": {"path": "p", "content": "new text"}},
        "e2": {"type": "approve", "args": {"path": "other"}},
    }
    filed: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()

    async def on_pause(task_id: str | None, ids: list[str]) -> None:
        filed.set_result(ids)

    person = asyncio.create_task(decide_when_filed(sides.person, filed, by_call(decisions)))
    await run_with_signoff(
        make_agent(model, ran),
        "edit",
        signoff=sides.agent,
        session_id="s-edit",
        editable={"write_file"},
        on_pause=on_pause,
    )
    await person
    assert ran == [("write_file", "e1", {"path": "p", "content": "new text"})]
    outputs = tool_outputs(model)
    assert outputs["e1"] == "wrote 8 bytes to p\n\n" + edit_note(
        {"path": "p", "content": "new text"}, {"path": "p", "content": "old"}
    )
    assert "does not take edited arguments" in outputs["e2"]
    statuses = {}
    for request_id in filed.result():
        request = await sides.agent.get(request_id)
        assert isinstance(request, ApprovalRequest)
        statuses[request.tool_call_id] = (request.status, request.approved_args)
    assert statuses["e1"] == ("completed", {"path": "p", "content": "new text"})
    assert statuses["e2"][0] == "failed"


async def test_requests_carry_the_function_tools_schema(sides: Sides) -> None:
    """Each filed request carries the FunctionTool's params_json_schema; an edit breaking it
    is 422 with the request still pending, and a fitting edit then runs."""
    model = ScriptedModel(
        [
            [function_call("write_file", {"path": "p", "content": "old"}, call_id="s1")],
            [assistant_message("done")],
        ]
    )
    ran: Ran = []
    agent = make_agent(model, ran)
    filed: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()

    async def on_pause(task_id: str | None, ids: list[str]) -> None:
        filed.set_result(ids)

    async def person() -> None:
        (request_id,) = await filed
        request = await sides.person.get(request_id)
        assert isinstance(request, ApprovalRequest)
        tool = next(t for t in agent.tools if getattr(t, "name", "") == "write_file")
        assert request.args_schema == getattr(tool, "params_json_schema", None)
        bad = {"path": ["a", "b"], "content": "new"}
        with pytest.raises(InvalidDecision, match="args/path"):
            await sides.person.decide(request_id, {"type": "approve", "args": bad})
        assert (await sides.person.get(request_id)).status == "pending"
        good = {"path": "p", "content": "new"}
        await sides.person.decide(request_id, {"type": "approve", "args": good})

    deciding = asyncio.create_task(person())
    await run_with_signoff(
        agent,
        "edit",
        signoff=sides.agent,
        session_id="s-schema",
        editable={"write_file"},
        on_pause=on_pause,
        timeout=30,
    )
    await deciding
    assert ran == [("write_file", "s1", {"path": "p", "content": "new"})]


async def test_edits_are_checked_against_the_tool_schema() -> None:
    """Edited arguments with unknown names, missing required ones or wrong types are refused."""
    agent = make_agent(ScriptedModel(), [])
    assert edit_problem(agent, "write_file", {"path": "p", "content": "c"}) is None
    assert edit_problem(agent, "write_file", {"path": "p"}) == "content: required"
    assert edit_problem(agent, "write_file", {"path": 3, "content": "c"}) is not None
    assert edit_problem(agent, "write_file", {"path": "p", "content": "c", "x": 1}) is not None
    assert edit_problem(agent, "nope", {}) is not None


async def test_the_edit_note_stays_on_later_turns_and_only_where_the_edit_ran(
    sides: Sides,
) -> None:
    """The edit note follows an edited call's output on every later model call, and is never
    added to a call that ran with the proposed arguments."""
    model = ScriptedModel(
        [
            [function_call("write_file", {"path": "p", "content": "old"}, call_id="n1")],
            [function_call("delete", {"path": "tmp"}, call_id="n2")],
            [assistant_message("done")],
        ]
    )
    ran: Ran = []
    decisions = {
        "n1": {"type": "approve", "args": {"path": "p", "content": "new"}},
        "n2": {"type": "approve", "args": {"path": "elsewhere"}},
    }
    deciding: list[asyncio.Task[None]] = []

    async def on_pause(task_id: str | None, ids: list[str]) -> None:
        filed: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        filed.set_result(ids)
        deciding.append(
            asyncio.create_task(decide_when_filed(sides.person, filed, by_call(decisions)))
        )

    await run_with_signoff(
        make_agent(model, ran),
        "two turns",
        signoff=sides.agent,
        session_id="s-notes",
        editable={"write_file", "delete"},
        on_pause=on_pause,
        timeout=30,
    )
    await asyncio.gather(*deciding)
    outputs = tool_outputs(model)
    assert outputs["n1"] == "wrote 3 bytes to p\n\n" + edit_note(
        {"path": "p", "content": "new"}, {"path": "p", "content": "old"}
    )
    assert outputs["n2"] == "deleted tmp"  # delete never read its edit: no note, reported failed
    assert ran[-1] == ("delete", "n2", {"path": "tmp"})


def test_signoff_args_outside_a_run_returns_the_defaults() -> None:
    """Without edits in effect (or for another call id) a tool gets the model's arguments."""
    ctx: RunContextWrapper[None] = RunContextWrapper(context=None)
    assert signoff_args(ctx, {"a": 1}) == {"a": 1}
    with signoff_edits({"other": {"a": 2}}) as read:
        assert signoff_args(ctx, {"a": 1}) == {"a": 1}
    assert read == set()


async def paused_state(agent: Agent[Any]) -> RunState[Any, Any]:
    """The run state of ``agent`` paused on its first turn."""
    result = await Runner.run(agent, "go")
    assert len(result.interruptions) == 3
    return result.to_state()


async def test_an_interruption_not_in_the_state_is_refused(sides: Sides) -> None:
    """Decisions for call ids the state does not hold, or missing for one it does, are refused."""
    ran: Ran = []
    state = await paused_state(make_agent(ScriptedModel([three_calls()]), ran))
    ids = {}
    for call_id, args in [
        ("call_a", {"path": "a.txt", "content": "A"}),
        ("call_b", {"path": "b.txt", "content": "B"}),
        ("call_c", {"path": "/etc"}),
        ("call_zzz", {"path": "a.txt", "content": "A"}),
    ]:
        submitted = await sides.agent.submit(
            {
                "session_id": "s-refuse",
                "kind": "approval",
                "tool_name": "delete" if call_id == "call_c" else "write_file",
                "tool_args": args,
                "tool_call_id": call_id,
            }
        )
        ids[call_id] = (await sides.person.decide(submitted.request.id, {"type": "approve"})).id
    decided = {k: await sides.agent.get(v) for k, v in ids.items()}

    everything = [(k, decided[k]) for k in ("call_a", "call_b", "call_c")]
    with pytest.raises(InvalidRequest, match="call_zzz"):
        apply_decisions(state, [*everything, ("call_zzz", decided["call_zzz"])])
    with pytest.raises(InvalidRequest, match="no decision for interruption 'call_c'"):
        apply_decisions(state, everything[:2])
    with pytest.raises(InvalidRequest, match="not the request for call"):
        apply_decisions(state, [*everything[:2], ("call_c", decided["call_a"])])
    assert {i.call_id for i in state.get_interruptions()} == {"call_a", "call_b", "call_c"}

    applied = apply_decisions(state, everything)
    assert set(applied.approved) == {"call_a", "call_b", "call_c"} and applied.edits == {}


async def pause_and_die(sides: Sides, agent: Agent[Any], session_id: str, **kw: Any) -> str:
    """Run ``agent`` until it pauses, then kill the run as a crash would: the task id."""
    paused: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def on_pause(task_id: str | None, ids: list[str]) -> None:
        assert task_id is not None
        paused.set_result(task_id)

    run = asyncio.create_task(
        run_with_signoff(
            agent,
            "go",
            signoff=sides.agent,
            session_id=session_id,
            store=sides.service.store,
            on_pause=on_pause,
            **kw,
        )
    )
    task_id = await paused
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    return task_id


async def test_two_resumers_of_one_pause_get_one_winner(sides: Sides) -> None:
    """Two processes resuming the same stored pause: one runs it, the other is refused."""
    ran: Ran = []
    task_id = await pause_and_die(sides, make_agent(ScriptedModel([three_calls()]), ran), "s-two")
    task = await sides.service.store.get_task(task_id)
    assert task is not None
    await sides.person.decide_many(task.request_ids, "approve")
    models = [ScriptedModel([[assistant_message("one")]]) for _ in range(2)]
    outcomes = await asyncio.gather(
        *(
            resume_with_signoff(
                make_agent(m, ran), task_id, signoff=sides.agent, store=sides.service.store
            )
            for m in models
        ),
        return_exceptions=True,
    )
    assert sum(isinstance(o, InvalidTransition) for o in outcomes) == 1
    assert len(ran) == 3  # every approved call ran exactly once
    done = await sides.service.store.get_task(task_id)
    assert done is not None and done.status == "Completed"


async def test_an_undecided_call_is_withdrawn_and_not_run(sides: Sides) -> None:
    """A call nobody decides before the timeout is canceled, and the model is told so."""
    model = ScriptedModel(
        [[function_call("delete", {"path": "z"}, call_id="t1")], [assistant_message("gave up")]]
    )
    ran: Ran = []
    result = await run_with_signoff(
        make_agent(model, ran), "go", signoff=sides.agent, session_id="s-timeout", timeout=0.2
    )
    assert result.final_output == "gave up" and ran == []
    assert tool_outputs(model) == {"t1": "No decision came in time, so the call was not run."}


@dataclass
class Who:
    """A typed run context, which the SDK stores only through a serializer."""

    user: str


async def test_a_typed_context_survives_a_restart(sides: Sides) -> None:
    """A dataclass context is stored with a serializer and rebuilt with a deserializer."""
    seen: list[Who] = []

    def agent(model: ScriptedModel) -> Agent[Any]:
        @function_tool(needs_approval=True)
        async def whoami(ctx: RunContextWrapper[Who]) -> str:
            """Say who runs this."""
            seen.append(ctx.context)
            return ctx.context.user

        return Agent(name="typed", model=model, tools=[whoami])

    first = ScriptedModel([[function_call("whoami", {}, call_id="w1")]])
    task_id = await pause_and_die(
        sides, agent(first), "s-typed", context=Who("bob"), context_serializer=asdict
    )
    task = await sides.service.store.get_task(task_id)
    assert task is not None
    await sides.person.decide(task.request_ids[0], {"type": "approve"})
    second = ScriptedModel([[assistant_message("bye")]])
    result = await resume_with_signoff(
        agent(second),
        task_id,
        signoff=sides.agent,
        store=sides.service.store,
        context_deserializer=lambda data: Who(**data),
        context_serializer=asdict,
    )
    assert result.final_output == "bye" and seen == [Who("bob")]


async def test_a_resume_that_cannot_claim_every_call_fails_those_it_claimed(sides: Sides) -> None:
    """One approved call claimed elsewhere: resume stops, and the call it claimed ends failed."""
    model = ScriptedModel([three_calls()[:2], [assistant_message("unreachable")]])
    ran: Ran = []
    filed: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()

    async def on_pause(task_id: str | None, ids: list[str]) -> None:
        filed.set_result(ids)

    async def person() -> None:
        by_id = {}
        for request_id in await filed:
            request = await sides.person.get(request_id)
            assert isinstance(request, ApprovalRequest)
            by_id[request.tool_call_id] = request
        # call_b is approved and taken by another executor before call_a is decided
        await sides.person.decide(by_id["call_b"].id, {"type": "approve"})
        await sides.agent.claim(by_id["call_b"].id, by_id["call_b"].tool_args)
        await sides.person.decide(by_id["call_a"].id, {"type": "approve"})

    deciding = asyncio.create_task(person())
    with pytest.raises(InvalidTransition):
        await run_with_signoff(
            make_agent(model, ran),
            "write",
            signoff=sides.agent,
            session_id="s-taken",
            store=sides.service.store,
            on_pause=on_pause,
            timeout=30,
        )
    await deciding
    assert ran == []
    statuses = {}
    for request_id in filed.result():
        request = await sides.agent.get(request_id)
        assert isinstance(request, ApprovalRequest)
        statuses[request.tool_call_id] = (request.status, request.result)
    status_a, result_a = statuses["call_a"]
    assert status_a == "failed" and result_a is not None and result_a.error is not None
    assert result_a.error.startswith("not run: ") and "already claimed" in result_a.error
    assert statuses["call_b"][0] == "executing"  # the other executor's to report
