"""Attack: an edit preview used to read what the request's own preview could not.

``POST /requests/{id}/preview`` makes a call's preview again for arguments a person edits.
Whoever sends them (a person's stolen session, an agent's token, a path pasted from the
agent's text) must get nothing the original preview could not have read: no file outside
the server's preview root, not its database, no system file; and huge or
hostile arguments must not crash the server.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.domain.previews import MAX_PREVIEW_BYTES
from signoff.server.app import API
from tests.serving import Server, agent_token, bearer, free_port, new_token, start_server

CANARY = "canary-5d1b8e42"


@dataclass
class Setup:
    """A running server, its agent and person tokens, and the files around it."""

    server: Server
    agent: str
    person: str
    outside: Path


def _start(base: Path) -> Iterator[Setup]:
    root, outside = base / "root", base / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "notes.md").write_text("inside\n")
    (outside / "secret.txt").write_text(f"outside {CANARY}\n")
    (root / "escape").symlink_to(outside / "secret.txt")
    (root / "out").symlink_to(outside)
    (root / "big.txt").write_text(CANARY + "\n" + "x" * MAX_PREVIEW_BYTES)
    env = {**os.environ, "XDG_CONFIG_HOME": str(base / "config"), "SIGNOFF_CANARY": CANARY}
    db = f"sqlite:///{root / 'serve.db'}"
    server = start_server(db, free_port(), env, "--preview-root", str(root), cwd=str(root))
    try:
        yield Setup(server, agent_token(server), new_token(server, "alice", "approver")[0], outside)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def rooted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """A server with --preview-root ROOT (its database inside ROOT too)."""
    yield from _start(tmp_path_factory.mktemp("rooted"))


def _request(setup: Setup) -> str:
    with httpx.Client(base_url=setup.server.base, headers=bearer(setup.agent)) as http:
        made = http.post(
            f"{API}/requests",
            json={
                "session_id": "s",
                "kind": "approval",
                "tool_name": "write_file",
                "tool_args": {"path": "notes.md", "content": "agent\n"},
            },
        )
    assert made.status_code == 201, made.text
    request_id: str = made.json()["id"]
    return request_id


def _preview(setup: Setup, request_id: str, args: Any, token: str) -> httpx.Response:
    with httpx.Client(base_url=setup.server.base, headers=bearer(token), timeout=60) as http:
        return http.post(f"{API}/requests/{request_id}/preview", json={"args": args})


def _paths(setup: Setup) -> list[str]:
    return [
        "/etc/passwd",
        "/proc/self/environ",
        "../outside/secret.txt",
        str(setup.outside / "secret.txt"),
        "escape",
        "out/secret.txt",
        "~/secret.txt",
        "serve.db",
        "serve.db-wal",
        "big.txt",
        "/dev/zero",
    ]


def test_an_edited_path_reads_nothing_the_original_could_not(rooted: Setup) -> None:
    """Escapes, symlinks, the database, system files: never read into an edit's preview."""
    request_id = _request(rooted)
    for path in _paths(rooted):
        for args in (
            {"path": path, "content": "new\n"},
            {"path": path, "old_string": "root", "new_string": "toor"},
        ):
            answer = _preview(rooted, request_id, args, rooted.person)
            assert answer.status_code == 200, answer.text
            for secret in (CANARY, "root:x:0:0", "SQLite format"):
                assert secret not in answer.text, (path, answer.text[:500])
            preview = answer.json()["preview"]
            assert preview["old_source"] in ("none", "agent"), (path, preview)
            assert "not read" in preview["note"]


def test_an_agent_token_previews_nothing(rooted: Setup) -> None:
    """An agent gets 403 for its own request's preview too, and no file is read for it."""
    request_id = _request(rooted)
    answer = _preview(rooted, request_id, {"path": "escape", "content": "x"}, rooted.agent)
    assert answer.status_code == 403 and CANARY not in answer.text


def test_huge_and_odd_arguments_are_refused_or_previewed_without_a_crash(rooted: Setup) -> None:
    """Past the body limit 413; a large edit is previewed; NUL and deep nesting answered."""
    request_id = _request(rooted)
    huge = _preview(
        rooted, request_id, {"path": "notes.md", "content": "x" * 2_000_000}, rooted.person
    )
    assert huge.status_code == 413 and set(huge.json()) == {"error", "detail"}
    lines = "\n".join(f"line {n}" for n in range(60_000))
    large = _preview(rooted, request_id, {"path": "notes.md", "content": lines}, rooted.person)
    assert large.status_code == 200 and "+line 59999" in large.json()["preview"]["diff"]
    nul = _preview(rooted, request_id, {"path": "notes.md\x00", "content": "x"}, rooted.person)
    assert nul.status_code == 200 and nul.json()["preview"]["old_source"] == "none"
    deep = '{"args": {"path": "notes.md", "content": ' + "[" * 5_000 + "]" * 5_000 + "}}"
    with httpx.Client(base_url=rooted.server.base, headers=bearer(rooted.person)) as http:
        nested = http.post(
            f"{API}/requests/{request_id}/preview",
            content=deep,
            headers={"Content-Type": "application/json"},
        )
    assert nested.status_code in (200, 422), nested.text[:300]
    with httpx.Client(base_url=rooted.server.base) as http:
        assert http.get("/healthz").status_code == 200
