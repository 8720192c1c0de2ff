"""Attack: an agent reuses another agent's session_id, tool_call_id and Idempotency-Key."""

from __future__ import annotations

from typing import Any

import httpx

from signoff.server.app import API
from tests.serving import Server, agent_token, bearer

SECRET = "cat /home/alice/.ssh/id_ed25519 # alice-only"


def _call(command: str) -> dict[str, Any]:
    """An approval body in session "s" with tool_call_id "call-1"."""
    return {
        "session_id": "s",
        "kind": "approval",
        "tool_name": "shell",
        "tool_args": {"command": command},
        "tool_call_id": "call-1",
    }


def _submit(http: httpx.Client, token: str, body: dict[str, Any]) -> httpx.Response:
    """POST /requests with ``token`` and A's Idempotency-Key."""
    return http.post(
        f"{API}/requests", json=body, headers={**bearer(token), "Idempotency-Key": "idem-1"}
    )


def test_another_agents_call_ids_never_return_its_request(server: Server) -> None:
    """B reusing A's call ids and Idempotency-Key files its own call and sees nothing of A's."""
    alice, bob = agent_token(server, "alice"), agent_token(server, "bob")
    with httpx.Client(base_url=server.base, timeout=30) as http:
        first = _submit(http, alice, _call(SECRET))
        assert first.status_code == 201, first.text
        theirs = first.json()["id"]

        # different args: before the fix a 422 "already used in session" told B the ids exist
        probe = _submit(http, bob, _call("ls"))
        assert probe.status_code == 201, probe.text
        assert probe.json()["requested_by"] == "bob"
        assert theirs not in probe.text and "alice" not in probe.text
        assert SECRET not in probe.text
        mine = probe.json()["id"]

        # the same args: before the fix B got A's request back (200), id and all
        again = _submit(http, bob, _call("ls"))
        assert again.status_code == 200, again.text
        assert again.json()["id"] == mine

        alice_again = _submit(http, alice, _call(SECRET))
        assert alice_again.status_code == 200, alice_again.text
        assert alice_again.json()["id"] == theirs
        assert alice_again.json()["tool_args"] == {"command": SECRET}


def test_same_args_as_another_agent_still_get_a_request_of_ones_own(server: Server) -> None:
    """B sending exactly A's call (same ids, args and key) gets a new request, not A's (201)."""
    alice, bob = agent_token(server, "alice"), agent_token(server, "bob")
    with httpx.Client(base_url=server.base, timeout=30) as http:
        first = _submit(http, alice, _call(SECRET))
        assert first.status_code == 201, first.text
        theirs = first.json()["id"]
        copy = _submit(http, bob, _call(SECRET))
        assert copy.status_code == 201, copy.text
        assert copy.json()["id"] != theirs and theirs not in copy.text
        assert copy.json()["requested_by"] == "bob"
        listed = http.get(f"{API}/requests", headers=bearer(bob)).json()["items"]
        assert [item["id"] for item in listed] == [copy.json()["id"]]
        decided = http.get(f"{API}/requests/{theirs}", headers=bearer(alice)).json()
        assert decided["status"] == "pending" and decided["requested_by"] == "alice"
