"""``signoff bridge opencode`` against a stand-in OpenCode and a real ``signoff serve``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from signoff.domain.requests import ApprovalRequest, Request
from signoff.integrations.opencode import reply_for
from tests.hooks.opencode_standin import (
    SIGNOFF,
    OpenCodeStandIn,
    decide,
    filed,
    permission,
    run_bridge,
    run_standin,
    serve_signoff,
    settled,
    unique,
)
from tests.serving import Server, agent_token, free_port, start_server


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    """One signoff server for the module, and an agent token on it."""
    yield from serve_signoff(tmp_path_factory.mktemp("opencode"))


@pytest.fixture
async def standin() -> AsyncIterator[OpenCodeStandIn]:
    """A stand-in OpenCode with a password."""
    async with run_standin(password="hunter2") as running:
        yield running


async def test_approve_answers_once(shared: tuple[Server, str], standin: OpenCodeStandIn) -> None:
    """A person's plain approval replies `once`, on a request filed with OpenCode's ids."""
    server, token = shared
    session, asked = unique("ses"), unique("per")
    async with run_bridge(standin, server, token):
        standin.ask(permission(asked, session))
        [request] = await filed(server, session)
        assert (request["tool_name"], request["tool_call_id"]) == ("bash", asked)
        assert request["tool_args"]["patterns"] == ["git push origin main"]
        assert request["context"]["via"] == "opencode"
        assert request["editable"] is False
        assert (await decide(server, request["id"], {"type": "approve"})).status_code == 200
        assert await standin.reply_to(asked) == {"reply": "once"}


async def test_session_approval_answers_always_and_grant_needs_nobody(
    shared: tuple[Server, str], standin: OpenCodeStandIn
) -> None:
    """Approved for the session: `always`; a later matching call is `always` with no person."""
    server, token = shared
    session, first, later = unique("ses"), unique("per"), unique("per")
    async with run_bridge(standin, server, token):
        standin.ask(permission(first, session))
        [request] = await filed(server, session)
        await decide(server, request["id"], {"type": "approve", "scope": "session"})
        assert (await standin.reply_to(first))["reply"] == "always"
        standin.ask(permission(later, session, patterns=["git push origin dev"]))
        assert (await standin.reply_to(later))["reply"] == "always"
        [_, granted] = await filed(server, session, 2)
        assert granted["status"] == "approved" and granted["grant_id"]


async def test_reject_sends_the_reason(
    shared: tuple[Server, str], standin: OpenCodeStandIn
) -> None:
    """A rejection with a reason replies `reject` with that reason for the model."""
    server, token = shared
    session, asked = unique("ses"), unique("per")
    async with run_bridge(standin, server, token):
        standin.ask(permission(asked, session))
        [request] = await filed(server, session)
        await decide(server, request["id"], {"type": "reject", "reason": "not on main"})
        body = await standin.reply_to(asked)
        assert body["reply"] == "reject"
        assert "not on main" in body["message"]


async def test_answered_in_opencode_cancels_the_request(
    shared: tuple[Server, str], standin: OpenCodeStandIn
) -> None:
    """When OpenCode's own UI answers, the signoff request is canceled, not left to approve."""
    server, token = shared
    session, asked = unique("ses"), unique("per")
    async with run_bridge(standin, server, token):
        standin.ask(permission(asked, session))
        [request] = await filed(server, session)
        standin.answer_itself(asked, "once")
        assert (await settled(server, request["id"]))["status"] == "canceled"
        assert (await decide(server, request["id"], {"type": "approve"})).status_code == 409
    assert standin.replies == []


async def test_pending_before_start_is_taken_up_and_ctrl_c_stops_cleanly(
    shared: tuple[Server, str], standin: OpenCodeStandIn
) -> None:
    """A permission already waiting is filed on start; SIGINT ends the bridge without a trace."""
    server, token = shared
    session, asked = unique("ses"), unique("per")
    standin.ask(permission(asked, session))
    async with run_bridge(standin, server, token) as bridge:
        [request] = await filed(server, session)
        await decide(server, request["id"], {"type": "approve"})
        assert (await standin.reply_to(asked))["reply"] == "once"
        bridge.send_signal(signal.SIGINT)
        _, err = bridge.communicate(timeout=20)
        assert bridge.returncode == 0, err
        assert "Traceback" not in err


async def test_signoff_down_rejects(tmp_path: Path, standin: OpenCodeStandIn) -> None:
    """With signoff unreachable the permission is rejected, saying why."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200"}
    server = start_server(f"sqlite:///{tmp_path / 'serve.db'}", free_port(), env)
    token = agent_token(server, "opencode")
    asked = unique("per")
    async with run_bridge(standin, server, token):
        server.stop()
        standin.ask(permission(asked, unique("ses")))
        body = await standin.reply_to(asked)
    assert body["reply"] == "reject"
    assert "signoff" in body["message"]


def _approved(*, grant_id: str | None = None, args: dict[str, Any] | None = None) -> Request:
    """An approved request for ``ls``, by a grant or with a person's ``args``."""
    return ApprovalRequest.model_validate(
        {
            "id": "req_1",
            "status": "approved",
            "session_id": "ses_1",
            "requested_by": "opencode",
            "created_at": "2026-11-24T00:00:00Z",
            "updated_at": "2026-11-24T00:00:00Z",
            "allowed_decisions": ["approve", "reject"],
            "tool_name": "bash",
            "tool_args": {"patterns": ["ls"]},
            "grant_id": grant_id,
            "decision": {
                "decision": {"type": "approve", "args": args},
                "decided_by": "grant" if grant_id else "ann",
                "via": "grant" if grant_id else "person",
                "decided_at": "2026-11-24T00:00:00Z",
            },
        }
    )


def test_edited_approval_is_refused() -> None:
    """An approval with edited arguments, which OpenCode cannot run, replies `reject`."""
    answer = reply_for(_approved(args={"patterns": ["rm -rf /"]}))
    assert answer.reply == "reject"
    assert answer.message is not None and "edited" in answer.message


async def test_reconnects_after_opencode_restarts(
    shared: tuple[Server, str], standin: OpenCodeStandIn
) -> None:
    """OpenCode restarts: the permission it forgot is withdrawn, the new one is answered."""
    server, token = shared
    session, forgotten, fresh = unique("ses"), unique("per"), unique("per")
    port = int(standin.url.rsplit(":", 1)[1])
    async with run_bridge(standin, server, token):
        standin.ask(permission(forgotten, session))
        [request] = await filed(server, session)
        await standin.stop()
        async with run_standin(password="hunter2", port=port) as restarted:
            restarted.ask(permission(fresh, session))
            await restarted.connected()
            assert (await settled(server, request["id"]))["status"] == "canceled"
            [_, later] = await filed(server, session, 2)
            await decide(server, later["id"], {"type": "approve"})
            assert (await restarted.reply_to(fresh))["reply"] == "once"


async def bridge_that_stops(
    standin: OpenCodeStandIn, server: Server, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run ``signoff bridge opencode`` against ``standin`` with ``env`` added to the server's
    environment, to its end; it must end with a failure (not 0, not killed by the timeout)."""
    done = await asyncio.to_thread(
        subprocess.run,
        [SIGNOFF, "bridge", "opencode", "--url", standin.url, "--server", server.base],
        capture_output=True,
        text=True,
        env={**server.env, **env},
        timeout=60,
        check=False,
    )
    assert done.returncode not in (0, None)
    return done


async def test_wrong_opencode_password_stops_with_a_message(
    shared: tuple[Server, str], standin: OpenCodeStandIn
) -> None:
    """OpenCode refusing the password ends the bridge with one line saying what to check."""
    server, token = shared
    env = {"SIGNOFF_TOKEN": token, "OPENCODE_SERVER_PASSWORD": "wrong"}
    done = await bridge_that_stops(standin, server, env)
    assert "OPENCODE_SERVER_PASSWORD" in done.stderr and "Traceback" not in done.stderr


async def test_older_opencode_events_and_reply_route(shared: tuple[Server, str]) -> None:
    """An OpenCode before the permission API: `permission.updated` in, the session route out."""
    server, token = shared
    session, asked = unique("ses"), unique("per")
    async with run_standin(legacy=True) as old, run_bridge(old, server, token):
        old.ask(permission(asked, session))
        [request] = await filed(server, session)
        assert request["tool_args"]["patterns"] == ["git push origin main"]
        assert request["context"]["call_id"] == f"call_{asked}"
        await decide(server, request["id"], {"type": "reject", "reason": "later"})
        assert await old.reply_to(asked) == {"response": "reject"}


async def test_an_edit_gets_its_diff_preview(
    shared: tuple[Server, str], standin: OpenCodeStandIn
) -> None:
    """The edit tool's metadata (filepath, unified diff) gives the inbox its diff preview."""
    server, token = shared
    session, asked = unique("ses"), unique("per")
    diff = (
        "Index: /repo/app.py\n" + "=" * 67 + "\n--- /repo/app.py\n+++ /repo/app.py\n"
        "@@ -1,3 +1,3 @@\n a\n-b\n+c\n d\n"
    )
    edit = permission(
        asked,
        session,
        kind="edit",
        patterns=["app.py"],
        metadata={"filepath": "/repo/app.py", "diff": diff},
    )
    async with run_bridge(standin, server, token):
        standin.ask(edit)
        [request] = await filed(server, session)
        assert request["tool_args"]["filepath"] == "/repo/app.py"
        assert request["preview"]["new"] == "a\nc\nd"
        await decide(server, request["id"], {"type": "approve"})
        assert (await standin.reply_to(asked))["reply"] == "once"


def test_no_always_answers_once_for_a_grant() -> None:
    """With --no-always a call a standing grant approved is answered `once`, not `always`."""
    request = _approved(grant_id="grt_1", args={"patterns": ["ls"]})
    assert reply_for(request).reply == "always"
    assert reply_for(request, use_always=False).reply == "once"


async def test_a_token_signoff_refuses_stops_the_bridge(
    shared: tuple[Server, str], standin: OpenCodeStandIn
) -> None:
    """A wrong signoff token ends the bridge at start instead of rejecting every call."""
    server, _ = shared
    env = {"SIGNOFF_TOKEN": "so_not_a_token", "OPENCODE_SERVER_PASSWORD": "hunter2"}
    done = await bridge_that_stops(standin, server, env)
    assert "signoff refused the token" in done.stderr and "Traceback" not in done.stderr
    assert not standin.followed.is_set()
