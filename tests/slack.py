"""A local stand-in for Slack's Web API, and interaction payloads signed as Slack signs them."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.serving import Server, free_port

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
"""The signing secret the test server is given."""
BOT_TOKEN = "xoxb-test-token"
CHANNEL = "C0SIGNOFF"
MESSAGE_TS = "1700000000.000100"


@dataclass
class SlackStandIn:
    """Slack's Web API on a local port: records each call, answers like Slack does."""

    base_url: str
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    rate_limit_next: int = 0
    """Answer the next N calls 429 with Retry-After: 1."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def of(self, method: str) -> list[dict[str, Any]]:
        """The parameters of every call to ``method`` so far."""
        with self.lock:
            return [params for name, params in self.calls if name == method]

    def wait_for(self, method: str, count: int = 1, timeout: float = 10) -> list[dict[str, Any]]:
        """The calls to ``method`` once there are ``count`` of them."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.of(method)
            if len(found) >= count:
                return found
            time.sleep(0.02)
        raise AssertionError(f"{method} called {len(self.of(method))} times, not {count}")


@contextlib.contextmanager
def slack_stand_in() -> Iterator[SlackStandIn]:
    """Serve the stand-in on a free port in a thread, for a whole module."""
    port = free_port()
    state = SlackStandIn(base_url=f"http://127.0.0.1:{port}/api/")

    async def method(request: Request) -> JSONResponse:
        name = request.path_params["method"]
        if state.rate_limit_next > 0:
            state.rate_limit_next -= 1
            return JSONResponse(
                {"ok": False, "error": "ratelimited"}, status_code=429, headers={"Retry-After": "1"}
            )
        raw = await request.body()
        params = json.loads(raw) if raw else {}
        if request.headers.get("authorization") != f"Bearer {BOT_TOKEN}":
            return JSONResponse({"ok": False, "error": "invalid_auth"})
        with state.lock:
            state.calls.append((name, params))
        answer: dict[str, Any] = {"ok": True}
        if name == "chat.postMessage":
            channel = params.get("channel", "")
            answer |= {"channel": CHANNEL if channel.startswith("#") else channel, "ts": MESSAGE_TS}
        if name == "chat.update":
            answer |= {"channel": params.get("channel"), "ts": params.get("ts")}
        return JSONResponse(answer)

    app = Starlette(routes=[Route("/api/{method}", method, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(1000):  # uvicorn offers no event for "listening"
        if server.started:
            break
        time.sleep(0.01)
    yield state
    server.should_exit = True
    thread.join(timeout=10)


def sign(body: str, timestamp: int | None = None, secret: str = SIGNING_SECRET) -> dict[str, str]:
    """The headers Slack sends: ``v0=`` HMAC-SHA256 of ``v0:TIMESTAMP:BODY``."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    base = f"v0:{stamp}:{body}".encode()
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": "application/x-www-form-urlencoded",
    }


def form(payload: dict[str, Any]) -> str:
    """A payload as Slack posts it: form-encoded JSON in a ``payload`` field."""
    return urlencode({"payload": json.dumps(payload)})


def click(user: str, action_id: str, value: str, *, menu: bool = False) -> dict[str, Any]:
    """A ``block_actions`` payload: ``user`` clicked a button (or picked in a menu)."""
    action: dict[str, Any] = {"action_id": action_id, "block_id": "signoff_actions"}
    if menu:
        action |= {"type": "static_select", "selected_option": {"value": value}}
    else:
        action |= {"type": "button", "value": value}
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower()},
        "trigger_id": f"trigger-{time.monotonic_ns()}",
        "channel": {"id": CHANNEL},
        "container": {"type": "message", "channel_id": CHANNEL, "message_ts": MESSAGE_TS},
        "actions": [action],
    }


def submit_view(user: str, view: dict[str, Any], reason: str) -> dict[str, Any]:
    """A ``view_submission`` payload: ``user`` submitted ``view`` (as opened) with ``reason``."""
    return {
        "type": "view_submission",
        "user": {"id": user},
        "view": {
            "callback_id": view["callback_id"],
            "private_metadata": view["private_metadata"],
            "state": {
                "values": {
                    "reason": {"reason_input": {"type": "plain_text_input", "value": reason}}
                }
            },
        },
    }


def post_interaction(
    server: Server,
    payload: dict[str, Any],
    *,
    timestamp: int | None = None,
    secret: str = SIGNING_SECRET,
) -> httpx.Response:
    """POST ``payload`` to the server's interactions URL, signed."""
    body = form(payload)
    return httpx.post(
        f"{server.base}/integrations/slack/interactions",
        content=body,
        headers=sign(body, timestamp, secret),
        timeout=30,
    )


def link(server: Server, slack_id: str, name: str) -> None:
    """Link a Slack user id to the signoff person ``name``: ``signoff people link``."""
    linked = server.cli("people", "link", slack_id, name)
    assert linked.returncode == 0, linked.stderr


def slack_options(stand_in: SlackStandIn) -> tuple[str, ...]:
    """The ``signoff serve`` options that turn Slack on against ``stand_in``."""
    return (
        "--slack-bot-token",
        BOT_TOKEN,
        "--slack-signing-secret",
        SIGNING_SECRET,
        "--slack-api-url",
        stand_in.base_url,
    )
