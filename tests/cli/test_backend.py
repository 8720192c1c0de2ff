"""Every CLI command against a real server with ``--server URL --token T``, as with ``--db``."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.cli.running import remote
from tests.serving import Server


def test_commands_work_over_http(server: Server) -> None:
    """token create, submit, pending, show, approve, grants, audit, watch: all over HTTP."""
    admin = server.admin_token
    assert admin is not None
    created = remote(server, admin, "token", "create", "bot", "--role", "agent")
    assert created.returncode == 0, created.stderr
    bot = created.stdout.strip()
    assert "bot" in remote(server, admin, "token", "list").stdout
    submitted = remote(server, bot, "submit", "--tool", "shell", "--args", '{"c": 1}')
    request = json.loads(submitted.stdout)
    assert request["status"] == "pending"
    listed = json.loads(remote(server, admin, "pending", "--json").stdout)
    assert [r["id"] for r in listed] == [request["id"]]
    assert "shell" in remote(server, admin, "show", request["id"]).stdout
    denied = remote(server, bot, "approve", request["id"])
    assert denied.returncode == 3 and denied.stderr.startswith("error: ")
    assert remote(server, admin, "approve", request["id"], "--scope", "session").returncode == 0
    assert "grt_" in remote(server, admin, "grants", "list").stdout
    assert remote(server, admin, "audit", "verify").returncode == 0
    assert "decide" in remote(server, admin, "audit", "log", "--request", request["id"]).stdout
    watched = remote(server, admin, "watch", "--since", "0", "--count", "2", "--json")
    assert [json.loads(line)["type"] for line in watched.stdout.splitlines()] == [
        "created",
        "decided",
    ]
    missing = remote(server, admin, "show", "req_missing")
    assert missing.returncode == 3 and "req_missing" in missing.stderr


def test_submit_wait_over_http_gets_the_rejection(server: Server) -> None:
    """submit --wait against the server exits 1 when a person rejects from another process."""
    admin = server.admin_token
    assert admin is not None
    bot = remote(server, admin, "token", "create", "bot", "--role", "agent").stdout.strip()
    waiter = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "signoff",
            "submit",
            "--tool",
            "deploy",
            "--wait",
            "--tool-call-id",
            "d1",
            "--server",
            server.base,
            "--token",
            bot,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=server.env,
    )
    try:
        for _ in range(100):
            pending = json.loads(remote(server, admin, "pending", "--json").stdout)
            if pending:
                break
        assert pending
        rejected = remote(server, admin, "reject", pending[0]["id"], "--reason", "freeze")
        assert rejected.returncode == 0, rejected.stderr
        out, err = waiter.communicate(timeout=30)
    finally:
        waiter.kill()
    assert waiter.returncode == 1, err
    assert json.loads(out)["decision"]["decision"]["reason"] == "freeze"


def test_target_errors_are_one_line(server: Server) -> None:
    """--db with --server, or --server without a token, fail with one line and exit 3."""
    both = subprocess.run(
        [
            sys.executable,
            "-m",
            "signoff",
            "pending",
            "--db",
            server.db,
            "--server",
            server.base,
            "--token",
            "x",
        ],
        capture_output=True,
        text=True,
        env=server.env,
        timeout=60,
        check=False,
    )
    assert both.returncode == 3 and "not both" in both.stderr
    env = {k: v for k, v in server.env.items() if k != "SIGNOFF_TOKEN"}
    no_token = subprocess.run(
        [sys.executable, "-m", "signoff", "pending", "--server", server.base],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert no_token.returncode == 3 and "--token" in no_token.stderr
    bad = remote(server, "so_wrong", "pending")
    assert bad.returncode == 3 and "token" in bad.stderr


def test_token_revoke_locally_and_over_http(server: Server) -> None:
    """A revoked token stops working at once; revoking needs an admin and a known id."""
    admin = server.admin_token
    assert admin is not None
    made = remote(server, admin, "token", "create", "carol", "--role", "approver")
    carol = made.stdout.strip()
    token_id = made.stderr.split()[1]
    assert token_id.startswith("tok_")
    assert remote(server, carol, "pending").returncode == 0
    refused = remote(server, carol, "token", "revoke", token_id)
    assert refused.returncode == 3 and "may not revoke tokens" in refused.stderr
    done = remote(server, admin, "token", "revoke", token_id)
    assert done.returncode == 0 and "revoked token" in done.stdout, done.stderr
    gone = remote(server, carol, "pending")
    assert gone.returncode == 3 and "revoked" in gone.stderr
    again = remote(server, admin, "token", "revoke", token_id)
    assert again.returncode == 3 and "already revoked" in again.stderr
    unknown = server.cli("token", "revoke", "tok_nope")
    assert unknown.returncode == 3 and unknown.stderr == "error: no token with id 'tok_nope'\n"
    local = server.cli("token", "create", "dave", "--role", "agent")
    local_id = local.stderr.split()[1]
    assert server.cli("token", "revoke", local_id).returncode == 0
    assert "token.revoke" in server.cli("audit", "log").stdout
    listed = server.cli("token", "list").stdout
    assert local_id in listed and token_id in listed
