"""``signoff answer ID`` with no options: plain prompts, read from stdin in scripts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from signoff.cli.prompting import ask_decision
from signoff.domain.decisions import REASON_REQUIRED
from signoff.domain.requests import RequestAdapter
from signoff.errors import InvalidDecision
from signoff.service import Service
from signoff.store.sqlite import SQLiteStore
from signoff.testing import AGENT


async def filed(db: Path, body: dict[str, Any]) -> str:
    """Submit a request straight to the database; its id."""
    async with Service(SQLiteStore(db), read_file=None) as service:
        return (await service.submit(body, AGENT)).request.id


async def read(db: Path, request_id: str) -> dict[str, Any]:
    """The request as JSON."""
    async with Service(SQLiteStore(db), read_file=None) as service:
        request = await service.get(request_id)
    out: dict[str, Any] = RequestAdapter.dump_python(request, mode="json")
    return out


def answer(db: Path, request_id: str, lines: str) -> subprocess.CompletedProcess[str]:
    """Run ``signoff answer ID`` with ``lines`` on stdin (not a terminal)."""
    return signoff(db, lines, "answer", request_id)


def signoff(db: Path, lines: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``signoff ARGS`` on ``db`` as alice, with ``lines`` on stdin (not a terminal)."""
    env = {**os.environ, "SIGNOFF_USER": "alice", "XDG_CONFIG_HOME": str(db.parent)}
    return subprocess.run(
        [sys.executable, "-m", "signoff", *args, "--db", f"sqlite:///{db}"],
        input=lines,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


CHOICE = {
    "session_id": "s",
    "kind": "choice",
    "prompt": "Which DB?",
    "options": ["PostgreSQL", "SQLite", "MySQL"],
}


async def test_a_numbered_menu_answers_a_choice(tmp_path: Path) -> None:
    """Typing 2 picks the second option; the menu lists every option by number."""
    db = tmp_path / "s.db"
    request_id = await filed(db, CHOICE)
    done = answer(db, request_id, "2\n")
    assert done.returncode == 0, done.stderr
    assert "  1) PostgreSQL" in done.stdout and "  3) MySQL" in done.stdout
    decided = await read(db, request_id)
    assert decided["decision"]["decision"]["choice"] == "SQLite"


async def test_out_of_range_from_a_script_is_one_error_line(tmp_path: Path) -> None:
    """A number outside the menu exits 3 with one line, and changes nothing."""
    db = tmp_path / "s.db"
    request_id = await filed(db, CHOICE)
    done = answer(db, request_id, "9\n")
    assert done.returncode == 3 and done.stderr == "error: choose 1 to 3, not '9'\n"
    assert (await read(db, request_id))["status"] == "pending"


async def test_y_n_and_a_reason_for_a_tool_call(tmp_path: Path) -> None:
    """n then a reason rejects with that reason; y approves."""
    db = tmp_path / "s.db"
    first = await filed(db, {"session_id": "s", "tool_name": "shell", "tool_args": {"c": 1}})
    second = await filed(db, {"session_id": "s", "tool_name": "shell", "tool_args": {"c": 2}})
    assert answer(db, first, "n\nnot on a friday\n").returncode == 0
    assert answer(db, second, "y\n").returncode == 0
    rejected, approved = await read(db, first), await read(db, second)
    assert rejected["decision"]["decision"]["reason"] == "not on a friday"
    assert approved["status"] == "approved"


async def test_a_rejection_without_a_reason_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """``signoff reject --reason ' '`` and ``signoff answer`` with n and a blank reason from
    a script: exit 3, one line naming the rule, still pending; at a terminal the reason is
    asked again until one is given."""
    db = tmp_path / "s.db"
    request_id = await filed(db, {"session_id": "s", "tool_name": "shell", "tool_args": {}})
    blank = signoff(db, "", "reject", request_id, "--reason", " \t")
    assert (blank.returncode, blank.stderr) == (3, f"error: {REASON_REQUIRED}\n")
    scripted = answer(db, request_id, "n\n   \n")
    assert (scripted.returncode, scripted.stderr) == (3, f"error: {REASON_REQUIRED}\n")
    assert (await read(db, request_id))["status"] == "pending"
    request = RequestAdapter.validate_python(await read(db, request_id))
    lines = iter(["n", "", "  ", "Ask me first"])
    said: list[str] = []
    decision = ask_decision(request, lambda _: next(lines), interactive=True, say=said.append)
    assert decision == {"type": "reject", "reason": "Ask me first"}
    assert said == [REASON_REQUIRED, REASON_REQUIRED]


async def test_one_prompt_per_question_and_eof(tmp_path: Path) -> None:
    """Each question gets a line, then feedback; no input at all is an error, nothing changes."""
    db = tmp_path / "s.db"
    body = {
        "session_id": "s",
        "kind": "questions",
        "questions": [{"id": "v", "text": "Version?", "required": True}, "Notes?"],
    }
    request_id = await filed(db, body)
    empty = answer(db, request_id, "")
    assert empty.returncode == 3 and empty.stderr == "error: no answer on standard input\n"
    done = answer(db, request_id, "2.4\n\nship it\n")
    assert done.returncode == 0, done.stderr
    decision = (await read(db, request_id))["decision"]["decision"]
    assert decision["answers"] == {"v": "2.4"} and decision["feedback"] == "ship it"
    again = answer(db, request_id, "x\n")
    assert again.returncode == 3 and "is approved; there is nothing to answer" in again.stderr


def test_at_a_terminal_a_bad_answer_is_asked_again() -> None:
    """Interactive: an invalid pick is explained and asked again, then accepted."""
    request = RequestAdapter.validate_python(
        {
            "id": "req_x",
            "kind": "choice",
            "session_id": "s",
            "requested_by": "a",
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
            "allowed_decisions": ["choose", "reject"],
            "prompt": "Pick",
            "options": ["a", "b"],
            "multi_select": True,
            "allow_other": True,
        }
    )
    lines = iter(["0", "1, zebra"])
    said: list[str] = []
    decision = ask_decision(request, lambda _: next(lines), interactive=True, say=said.append)
    assert decision == {"type": "choose", "choices": ["a", "zebra"]}
    assert "choose 1 to 2, not '0'" in said
    with pytest.raises(InvalidDecision):
        ask_decision(request, lambda _: "", interactive=False, say=said.append)
