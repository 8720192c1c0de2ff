"""Attack: an agent probes another agent's request ids through the batch decision endpoint."""

from __future__ import annotations

from typing import Any

import httpx

from signoff.server.app import API
from tests.serving import Server, agent_token, bearer


def _without_id(result: dict[str, Any]) -> dict[str, Any]:
    """The result with its id taken out, wherever it appears."""
    rid = result["id"]
    return {k: v.replace(rid, "ID") if isinstance(v, str) else v for k, v in result.items()}


def test_another_agents_request_looks_unknown_in_a_batch(server: Server) -> None:
    """Agent B's batch gets for agent A's request id exactly what it gets for an unknown id."""
    alice, bob = agent_token(server, "alice"), agent_token(server, "bob")
    with httpx.Client(base_url=server.base, timeout=30) as http:
        made = http.post(
            f"{API}/requests", json={"session_id": "s", "tool_name": "t"}, headers=bearer(alice)
        )
        assert made.status_code == 201, made.text
        theirs, unknown = made.json()["id"], "req_" + "x" * 22
        for kind in ({"type": "approve"}, {"type": "reject", "reason": "probe"}):
            answer = http.post(
                f"{API}/decisions", json={"ids": [theirs, unknown], **kind}, headers=bearer(bob)
            )
            assert answer.status_code in (200, 403, 404), answer.text
            if answer.status_code != 200:
                continue  # the whole batch refused: it says nothing about any id
            results = answer.json()["results"]
            assert [r["id"] for r in results] == [theirs, unknown]
            assert _without_id(results[0]) == _without_id(results[1])
            assert results[0]["code"] == 404 and results[0]["error"] == "RequestNotFound"
        still = http.get(f"{API}/requests/{theirs}", headers=bearer(alice))
        assert still.json()["status"] == "pending"
