"""The request commands (``submit``, ``pending``, ``show``, ``approve``, ``wait``...).

Each test runs ``signoff`` as a real subprocess on a real SQLite file."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

from signoff.domain.principals import Principal
from signoff.service import Service
from signoff.store.sqlite import SQLiteStore
from tests.cli.running import Run, submit

WORKER = Principal(name="worker", role="admin")


def test_submit_then_pending_show_and_approve(cli: Run) -> None:
    """A submitted call is listed, shown with its args, approved, and shows as approved."""
    request = submit(cli, args={"command": "make deploy"})
    assert request["status"] == "pending"
    listed = cli("pending", "--json")
    assert [r["id"] for r in json.loads(listed.stdout)] == [request["id"]]
    shown = cli("show", request["id"])
    assert "make deploy" in shown.stdout and "shell" in shown.stdout
    assert cli("approve", request["id"]).returncode == 0
    after = json.loads(cli("show", request["id"], "--json").stdout)
    assert after["status"] == "approved"
    assert after["decision"]["decided_by"] == "alice"


def test_submit_with_a_schema_refuses_an_edit_that_breaks_it(cli: Run) -> None:
    """submit --args-schema stores the schema; approve --args breaking it exits 3 with one
    error line and leaves the call pending; a schema signoff refuses is one error line."""
    schema = {"type": "object", "properties": {"command": {"type": "string"}}}
    request = submit(cli, "--args-schema", json.dumps(schema))
    shown = json.loads(cli("show", request["id"], "--json").stdout)
    assert shown["args_schema"] == schema
    edit = cli("approve", request["id"], "--args", '{"command": ["rm", "-rf", "/"]}')
    assert edit.returncode == 3, edit.stderr
    assert edit.stderr.startswith("error: ") and len(edit.stderr.splitlines()) == 1
    assert "args/command" in edit.stderr
    assert json.loads(cli("show", request["id"], "--json").stdout)["status"] == "pending"
    bad = {"properties": {"command": {"pattern": "^(a+)+$"}}}
    refused = cli("submit", "--tool", "shell", "--args-schema", json.dumps(bad))
    assert refused.returncode == 3, refused.stderr
    assert refused.stderr.startswith("error: ") and len(refused.stderr.splitlines()) == 1
    assert "regular expressions" in refused.stderr


def test_wait_returns_when_another_process_approves(
    cli: Run, env: dict[str, str], project: Path
) -> None:
    """submit --wait blocks until a second process approves, then exits 0 with the JSON."""
    waiter = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "signoff",
            "submit",
            "--tool",
            "shell",
            "--args",
            '{"command": "ls"}',
            "--tool-call-id",
            "call-1",
            "--wait",
            "--timeout",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=project,
    )
    try:
        request_id = None
        for _ in range(100):
            pending = json.loads(cli("pending", "--json").stdout)
            if pending:
                request_id = pending[0]["id"]
                break
            time.sleep(0.1)
        assert request_id is not None
        assert cli("approve", request_id, "--args", '{"command": "ls -la"}').returncode == 0
        out, err = waiter.communicate(timeout=30)
    finally:
        waiter.kill()
    assert waiter.returncode == 0, err
    decision = json.loads(out)
    assert decision["status"] == "approved"
    assert decision["args"] == {"command": "ls -la"}


def test_wait_exit_codes_for_reject_expiry_and_timeout(cli: Run) -> None:
    """--wait exits 1 when rejected, 2 when the request expires, 2 when the wait times out
    (which cancels the request)."""
    request = submit(cli, "--tool-call-id", "c-rej")
    assert cli("reject", request["id"], "--reason", "not today").returncode == 0
    again = cli(
        "submit",
        "--tool",
        "shell",
        "--args",
        '{"command": "ls"}',
        "--tool-call-id",
        "c-rej",
        "--wait",
    )
    assert again.returncode == 1
    assert json.loads(again.stdout)["decision"]["decision"]["reason"] == "not today"
    expired = cli("submit", "--tool", "shell", "--expires-in", "1", "--wait", "--timeout", "30")
    assert expired.returncode == 2
    assert json.loads(expired.stdout)["status"] == "expired"
    timed_out = cli("submit", "--tool", "shell", "--wait", "--timeout", "0.3")
    assert timed_out.returncode == 2
    assert json.loads(timed_out.stdout)["status"] == "canceled"


def test_bad_input_is_one_line_and_a_specific_exit_code(cli: Run) -> None:
    """Bad JSON, unknown ids, finished requests and unknown options fail cleanly."""
    bad_json = cli("submit", "--tool", "shell", "--args", "{nope")
    assert bad_json.returncode == 3
    assert bad_json.stderr.startswith("error: --args is not valid JSON")
    assert len(bad_json.stderr.strip().splitlines()) == 1
    not_object = cli("submit", "--tool", "shell", "--args", "[1]")
    assert not_object.returncode == 3 and "JSON object" in not_object.stderr
    unknown = cli("approve", "req_nope")
    assert unknown.returncode == 3
    assert unknown.stderr.strip() == "error: no request with id 'req_nope'"
    request = submit(cli)
    assert cli("reject", request["id"], "--reason", "no").returncode == 0
    twice = cli("approve", request["id"])
    assert twice.returncode == 3 and "rejected, not pending" in twice.stderr
    choose = cli("choose", request["id"], "a")
    assert choose.returncode == 3
    usage = cli("approve", request["id"], "--bogus")
    assert usage.returncode == 64
    for done in (bad_json, unknown, twice, choose, usage):
        assert "Traceback" not in done.stderr
    assert json.loads(cli("show", request["id"], "--json").stdout)["version"] == 2


def test_policy_deny_and_allow_decide_at_submit(cli: Run, project: Path) -> None:
    """A project tools.toml denies one call and allows another at once, naming the rule."""
    (project / ".signoff").mkdir()
    (project / ".signoff" / "tools.toml").write_text(
        '[tools]\nneed_approval = ["shell"]\n\n'
        '[[rules]]\ntool = "shell"\nargs = { command = "rm *" }\naction = "deny"\nname = "no-rm"\n'
    )
    denied = cli("submit", "--tool", "shell", "--args", '{"command": "rm -rf /"}', "--wait")
    assert denied.returncode == 1
    assert "no-rm" in json.loads(denied.stdout)["decision"]["decision"]["reason"]
    allowed = cli("submit", "--tool", "read_file", "--args", '{"path": "x"}', "--wait")
    assert allowed.returncode == 0
    check = cli("policy", "check", "shell", "--args", '{"command": "ls"}')
    assert check.returncode == 0 and "ask" in check.stdout
    deny = cli("policy", "check", "shell", "--args", '{"command": "rm x"}', "--exit-code")
    assert deny.returncode == 1 and 'rules[0] "no-rm"' in deny.stdout
    (project / ".signoff" / "tools.toml").write_text('[tools]\nneed_aproval = ["shell"]\n')
    broken = cli("policy", "check", "shell")
    assert broken.returncode == 3
    assert broken.stderr.startswith("error: ") and "need_aproval" in broken.stderr
    refused = cli("submit", "--tool", "shell")
    assert refused.returncode == 3 and "Traceback" not in refused.stderr


def test_choice_and_questions_from_the_command_line(cli: Run, tmp_path: Path) -> None:
    """choose validates against the options; answer records per-question answers."""
    import asyncio

    from signoff.domain.principals import Principal
    from signoff.service import Service
    from signoff.store.sqlite import SQLiteStore

    agent = Principal(name="bot", role="agent")

    async def make() -> tuple[str, str]:
        async with Service(SQLiteStore(tmp_path / "signoff.db"), read_file=None) as service:
            choice = await service.submit(
                {"session_id": "s", "kind": "choice", "prompt": "Which?", "options": ["a", "b"]},
                agent,
            )
            questions = await service.submit(
                {"session_id": "s", "kind": "questions", "questions": ["Why?"]}, agent
            )
            return choice.request.id, questions.request.id

    choice_id, questions_id = asyncio.run(make())
    outside = cli("choose", choice_id, "c")
    assert outside.returncode == 3 and "not one of the options" in outside.stderr
    assert cli("choose", choice_id, "b").returncode == 0
    assert cli("answer", questions_id, "--answer", "q1=because").returncode == 0
    answered = json.loads(cli("show", questions_id, "--json").stdout)
    assert answered["decision"]["decision"]["answers"] == {"q1": "because"}
    shown = cli("show", choice_id)
    assert "choose" in shown.stdout


def test_watch_prints_events_from_another_process(
    cli: Run, env: dict[str, str], project: Path
) -> None:
    """watch --since 0 --count 2 sees a submit and a decision made by other processes."""
    watcher = subprocess.Popen(
        [sys.executable, "-m", "signoff", "watch", "--since", "0", "--count", "2", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=project,
    )
    try:
        request = submit(cli)
        cli("approve", request["id"])
        out, err = watcher.communicate(timeout=30)
    finally:
        watcher.kill()
    assert watcher.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["type"] for e in events] == ["created", "decided"]
    assert events[1]["request"]["status"] == "approved"


def test_show_names_the_claimant_and_the_lease_of_an_executing_call(
    cli: Run, env: dict[str, str]
) -> None:
    """signoff show of a claimed call says who claimed it, when, and until when its lease holds."""
    request = submit(cli, args={"command": "make deploy"})
    assert cli("approve", request["id"]).returncode == 0

    async def claim() -> None:
        store = SQLiteStore(env["SIGNOFF_DB"].removeprefix("sqlite:///"))
        async with Service(store, read_file=None) as service:
            await service.claim(request["id"], {"command": "make deploy"}, WORKER, lease=90)

    asyncio.run(claim())
    shown = cli("show", request["id"])
    assert shown.returncode == 0, shown.stderr
    claimed = json.loads(cli("show", request["id"], "--json").stdout)
    at = claimed["claimed_at"][:19].replace("T", " ")
    until = claimed["lease_until"][:19].replace("T", " ")
    assert f"by worker at {at}; lease until {until}" in shown.stdout
