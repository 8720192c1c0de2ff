"""``GET /metrics`` is for operators: an admin's token or the metrics token, nothing else
(no token, a wrong one, an agent's, an approver's, a person's session cookie), and the
metrics token opens nothing but /metrics."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from signoff.client import API
from tests.serving import (
    Server,
    agent_token,
    bearer,
    free_port,
    new_token,
    session_cookie,
    start_server,
)

METRICS_TOKEN = "scrape-3c1f9a7e5b2d4068"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A real server with a metrics token from the environment."""
    home: Path = tmp_path_factory.mktemp("metrics-auth")
    env = {**os.environ, "XDG_CONFIG_HOME": str(home), "SIGNOFF_METRICS_TOKEN": METRICS_TOKEN}
    running = start_server(f"sqlite:///{home / 'serve.db'}", free_port(), env)
    yield running
    if running.process.poll() is None:
        running.stop()


def refused(answer: httpx.Response, status: int) -> None:
    """``status`` with ``{error, detail}`` and no metric in it."""
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"error", "detail"} and body["detail"]
    assert "signoff_" not in answer.text


def test_only_an_admin_token_or_the_metrics_token_reads_metrics(server: Server) -> None:
    """No token, a wrong scheme or token, an agent's or approver's token, an admin's
    session cookie: refused. An admin's token and the metrics token: the metrics."""
    url = f"{server.base}/metrics"
    approver = new_token(server, "alice", "approver")[0]
    refused(httpx.get(url), 401)
    refused(httpx.get(url, headers={"Authorization": f"Basic {METRICS_TOKEN}"}), 401)
    refused(httpx.get(url, headers=bearer(METRICS_TOKEN + "x")), 401)
    refused(httpx.get(url, headers=bearer(METRICS_TOKEN[:-1])), 401)
    refused(httpx.get(url, headers=bearer(agent_token(server))), 403)
    refused(httpx.get(url, headers=bearer(approver)), 403)
    refused(httpx.get(url, cookies={"signoff_session": session_cookie(server)}), 401)
    for token in (server.admin_token or "", METRICS_TOKEN):
        answer = httpx.get(url, headers=bearer(token))
        assert answer.status_code == 200 and "signoff_requests_pending" in answer.text


def test_the_metrics_token_opens_nothing_else(server: Server) -> None:
    """The metrics token is no API token, and /metrics is not in the API's schema."""
    refused(httpx.get(f"{server.base}{API}/requests", headers=bearer(METRICS_TOKEN)), 401)
    refused(httpx.get(f"{server.base}{API}/tokens", headers=bearer(METRICS_TOKEN)), 401)
    schema = httpx.get(f"{server.base}/openapi.json").json()
    assert "/metrics" not in schema["paths"]
