"""Attack: an agent's args_schema against a real server (issue 16, item 2).

The schema comes from the agent, so it may only make a person's edit stricter: a remote
``$ref`` is refused and never fetched, regular expressions and oversized schemas are refused,
a schema cannot be swapped by submitting again, and an edit that breaks it is 422 on every
decider path (HTTP, CLI) with the request still pending.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from signoff.server.app import API
from tests.serving import Server, agent_token, bearer

SHELL: dict[str, Any] = {
    "type": "object",
    "properties": {"command": {"type": "string"}},
    "required": ["command"],
    "additionalProperties": False,
}


def _body(schema: Any, call_id: str = "c1") -> dict[str, Any]:
    return {
        "session_id": "s",
        "tool_name": "shell",
        "tool_args": {"command": "ls"},
        "tool_call_id": call_id,
        "args_schema": schema,
    }


@pytest.fixture
def listener() -> Iterator[tuple[str, list[bytes]]]:
    """A TCP listener on 127.0.0.1 that records every connection made to it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    sock.settimeout(0.2)
    seen: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    seen.append(conn.recv(1024))
                except OSError:
                    seen.append(b"")

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}", seen
    stop.set()
    thread.join()
    sock.close()


def test_a_remote_ref_is_refused_and_never_fetched(
    server: Server, listener: tuple[str, list[bytes]]
) -> None:
    """$ref to a URL (top level, nested, or relative to a remote $id) is 422; no fetch."""
    url, seen = listener
    token = agent_token(server)
    schemas = [
        {"$ref": f"{url}/schema.json"},
        {"type": "object", "properties": {"command": {"$ref": f"{url}/command.json"}}},
        {"$id": f"{url}/base.json", "properties": {"command": {"$ref": "other.json"}}},
        {"$dynamicRef": f"{url}/x.json"},
    ]
    with httpx.Client(base_url=server.base, headers=bearer(token), timeout=30) as http:
        for n, schema in enumerate(schemas):
            made = http.post(f"{API}/requests", json=_body(schema, f"c{n}"))
            assert made.status_code == 422, made.text
            assert "only refer inside itself" in made.json()["detail"]
        assert http.get(f"{API}/requests").json()["items"] == []
    assert seen == []


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"properties": {"command": {"type": "string", "pattern": "^(a+)+$"}}}, "regular"),
        ({"patternProperties": {"^(a|aa)+$": {}}}, "regular"),
        ({"enum": ["x" * 70_000]}, "the limit is"),
        ({"type": "nope"}, "not a valid JSON Schema"),
        ({"not": {}, "allOf": [{"minLength": -1}]}, "not a valid JSON Schema"),
    ],
)
def test_schemas_that_cannot_be_applied_safely_are_refused(
    server: Server, schema: dict[str, Any], why: str
) -> None:
    """Regular expressions, oversized and invalid schemas: 422 naming why, nothing filed."""
    with httpx.Client(
        base_url=server.base, headers=bearer(agent_token(server)), timeout=30
    ) as http:
        made = http.post(f"{API}/requests", json=_body(schema))
        assert made.status_code == 422, made.text
        assert made.json()["error"] == "InvalidInput"
        assert why in made.json()["detail"]
        assert http.get(f"{API}/requests").json()["items"] == []


def test_a_deeply_nested_schema_is_422_not_a_crash(server: Server) -> None:
    """Schemas nested past 32 levels (or hundreds deep) are refused with 422, never a 500."""

    def nested(levels: int) -> dict[str, Any]:
        deep: dict[str, Any] = {"type": "object"}
        for _ in range(levels):
            deep = {"type": "object", "properties": {"a": deep}}
        return deep

    with httpx.Client(
        base_url=server.base, headers=bearer(agent_token(server)), timeout=30
    ) as http:
        made = http.post(f"{API}/requests", json=_body(nested(20)))
        assert made.status_code == 422, made.text
        assert "nests deeper than 32 levels" in made.json()["detail"]
        made = http.post(f"{API}/requests", json=_body(nested(150)))
        assert made.status_code == 422, made.text
        assert made.json()["error"] == "InvalidInput"


def test_submitting_again_cannot_swap_the_schema(server: Server) -> None:
    """The same call again with a looser schema returns the request with its first schema."""
    with httpx.Client(
        base_url=server.base, headers=bearer(agent_token(server)), timeout=30
    ) as http:
        first = http.post(f"{API}/requests", json=_body(SHELL))
        assert first.status_code == 201, first.text
        again = http.post(f"{API}/requests", json=_body({"type": "object"}))
        assert again.status_code == 200, again.text
        assert again.json()["id"] == first.json()["id"]
        assert again.json()["args_schema"] == SHELL


def test_an_edit_breaking_the_schema_is_refused_on_every_decider_path(server: Server) -> None:
    """HTTP: 422 with the validation error; CLI: exit 3 and one error line; still pending,
    and no claim of the broken args can run."""
    assert server.admin_token is not None
    agent = agent_token(server)
    with (
        httpx.Client(base_url=server.base, headers=bearer(agent), timeout=30) as bot,
        httpx.Client(base_url=server.base, headers=bearer(server.admin_token), timeout=30) as me,
    ):
        rid = bot.post(f"{API}/requests", json=_body(SHELL)).json()["id"]
        bad = {"command": ["rm", "-rf", "/"]}
        refused = me.post(f"{API}/requests/{rid}/decision", json={"type": "approve", "args": bad})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"] == "InvalidDecision"
        assert "args/command" in refused.json()["detail"]
        command = [
            sys.executable,
            "-m",
            "signoff",
            "approve",
            rid,
            "--args",
            json.dumps(bad),
            "--server",
            server.base,
            "--token",
            server.admin_token,
        ]
        cli = subprocess.run(
            command, capture_output=True, text=True, env=server.env, timeout=60, check=False
        )
        assert cli.returncode == 3, cli.stderr
        assert cli.stderr.startswith("error: ") and len(cli.stderr.splitlines()) == 1
        assert "args/command" in cli.stderr
        assert me.get(f"{API}/requests/{rid}").json()["status"] == "pending"
        claimed = bot.post(f"{API}/requests/{rid}/claim", json={"args": bad})
        assert claimed.status_code == 409, claimed.text
        audit = me.get(f"{API}/audit", params={"request_id": rid}).json()["items"]
        assert [e["action"] for e in audit] == ["submit"]
