"""Attack: an executor claims a call and dies (or goes silent); the call must not stay executing.

A claim carries a lease; past it, the server fails the call itself (never running it again),
and only the claimant may renew it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from typing import Any

import httpx

from signoff.domain.transitions import LEASE_LAPSED
from signoff.server.app import API
from tests.serving import Server, agent_token, bearer

ARGS = {"command": "make deploy"}

_DYING_CLAIMANT = """
import sys, time
import signoff
with signoff.Client(sys.argv[1], sys.argv[2]) as client:
    client.claim(sys.argv[3], {"command": "make deploy"}, lease=1)
    print("claimed", flush=True)
    time.sleep(600)
"""


def _approved_call(server: Server, agent: str) -> str:
    assert server.admin_token is not None
    made = httpx.post(
        f"{server.base}{API}/requests",
        json={"session_id": "s", "tool_name": "shell", "tool_args": ARGS},
        headers=bearer(agent),
    )
    assert made.status_code == 201, made.text
    rid: str = made.json()["id"]
    decided = httpx.post(
        f"{server.base}{API}/requests/{rid}/decision",
        json={"type": "approve"},
        headers=bearer(server.admin_token),
    )
    assert decided.status_code == 200, decided.text
    return rid


def _until_failed(server: Server, rid: str, within: float) -> dict[str, Any]:
    assert server.admin_token is not None
    deadline = time.monotonic() + within
    while True:
        got = httpx.get(f"{server.base}{API}/requests/{rid}", headers=bearer(server.admin_token))
        body: dict[str, Any] = got.json()
        if body["status"] != "executing" or time.monotonic() > deadline:
            return body
        time.sleep(0.2)


def test_a_claimant_that_dies_leaves_its_call_failed_by_the_server(server: Server) -> None:
    """A claimant killed mid-call (lease 1 s): within seconds the server fails it, for good."""
    assert server.admin_token is not None
    agent = agent_token(server)
    rid = _approved_call(server, agent)
    claimant = subprocess.Popen(
        [sys.executable, "-c", _DYING_CLAIMANT, server.base, agent, rid],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=server.env,
    )
    try:
        assert claimant.stdout is not None
        assert claimant.stdout.readline().strip() == "claimed", claimant.stderr
    finally:
        claimant.send_signal(signal.SIGKILL)
        claimant.communicate()

    failed = _until_failed(server, rid, within=8)
    assert failed["status"] == "failed", failed
    assert failed["result"]["error"] == LEASE_LAPSED
    assert (failed["result"]["ok"], failed["result"]["reported_by"]) == (False, "system")
    audit = httpx.get(
        f"{server.base}{API}/audit", params={"request_id": rid}, headers=bearer(server.admin_token)
    ).json()["items"]
    last = audit[-1]
    assert (last["action"], last["actor"], last["from_status"], last["to_status"]) == (
        "fail",
        "system",
        "executing",
        "failed",
    )
    assert last["details"]["via"] == "lease"
    # never run again: no new claim, no late result, no renewal
    for tail, body in (("claim", {"args": ARGS}), ("result", {"ok": True}), ("lease", {})):
        again = httpx.post(
            f"{server.base}{API}/requests/{rid}/{tail}", json=body, headers=bearer(agent)
        )
        assert again.status_code == 409, (tail, again.text)
    assert httpx.get(f"{server.base}{API}/audit/verify", headers=bearer(server.admin_token)).json()[
        "ok"
    ]


def test_only_the_claimant_renews_and_only_within_bounds(server: Server) -> None:
    """Admins and other agents cannot renew a claim; a bad lease is 422 {error, detail}."""
    assert server.admin_token is not None
    agent, other = agent_token(server, "bot"), agent_token(server, "other-bot")
    rid = _approved_call(server, agent)
    claimed = httpx.post(
        f"{server.base}{API}/requests/{rid}/claim",
        json={"args": ARGS, "lease": 30},
        headers=bearer(agent),
    )
    assert claimed.status_code == 200, claimed.text
    first_end = claimed.json()["lease_until"]
    renew = f"{server.base}{API}/requests/{rid}/lease"
    assert httpx.post(renew, json={}, headers=bearer(server.admin_token)).status_code == 403
    assert httpx.post(renew, json={}, headers=bearer(other)).status_code == 404
    for lease in (0, 0.5, 3601, "soon"):
        bad = httpx.post(renew, json={"lease": lease}, headers=bearer(agent))
        assert bad.status_code == 422, bad.text
        assert set(bad.json()) == {"error", "detail"}
    unchanged = httpx.get(f"{server.base}{API}/requests/{rid}", headers=bearer(agent)).json()
    assert unchanged["lease_until"] == first_end
    renewed = httpx.post(renew, json={"lease": 60}, headers=bearer(agent))
    assert renewed.status_code == 200, renewed.text
    assert renewed.json()["lease_until"] > first_end
    done = httpx.post(
        f"{server.base}{API}/requests/{rid}/result", json={"ok": True}, headers=bearer(agent)
    )
    assert done.status_code == 200 and done.json()["status"] == "completed"
