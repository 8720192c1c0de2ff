"""Bad input against a real server, on SQLite and PostgreSQL: a 4xx in the one error shape.

On SQLite twice: with the store's writer a thread, and a process of its own
(``--sqlite-writer process``), which is handed every write the agent's input makes.

Every input here once gave a 500, a 503 (reported as a store outage) or a body in another
shape. Each test also checks that the server is healthy afterwards: /healthz answers and
a normal submit works.
"""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from signoff.server.app import API
from tests.conftest import PG_DSN, new_schema, pg_execute, postgres_dsn
from tests.serving import Server, agent_token, bearer, free_port, start_server


@pytest.fixture(scope="module", params=["sqlite", "sqlite-process", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, str]]:
    """A real server on each store, shared by this module's tests (each checks it stays well).

    PostgreSQL gets a database of its own, skipped when absent (failed when CI=true).
    Yields the server and an agent token: the agent is the one sending bad input.
    """
    tmp = tmp_path_factory.mktemp(request.param)
    database: str | None = None
    if request.param == "postgres":
        dsn, database = asyncio.run(postgres_dsn()), new_schema()
        asyncio.run(pg_execute(f"CREATE DATABASE {database}", dsn))
        db = dsn.rsplit("/", 1)[0] + f"/{database}"
    else:
        db = f"sqlite:///{tmp / 'serve.db'}"
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp), "COLUMNS": "200"}
    writer = ("--sqlite-writer", "process") if request.param == "sqlite-process" else ()
    server = start_server(db, free_port(), env, *writer)
    try:
        yield server, agent_token(server)
    finally:
        if server.process.poll() is None:
            server.stop()
        if database is not None:
            asyncio.run(pg_execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)", PG_DSN))


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The error body, checked to be exactly ``{error, detail}`` with one-line strings."""
    body = response.json()
    assert isinstance(body, dict) and set(body) == {"error", "detail"}, response.text
    assert isinstance(body["error"], str) and isinstance(body["detail"], str)
    assert "\n" not in body["detail"]
    return body


def assert_healthy(server: Server, token: str) -> None:
    """/healthz answers and a normal request can still be submitted and read back."""
    assert httpx.get(f"{server.base}/healthz", timeout=10).status_code == 200
    created = httpx.post(
        f"{server.base}{API}/requests",
        json={"session_id": "after", "tool_name": "ok", "tool_args": {"n": 1}},
        headers=bearer(token),
        timeout=10,
    )
    assert created.status_code == 201, created.text
    got = httpx.get(
        f"{server.base}{API}/requests/{created.json()['id']}", headers=bearer(token), timeout=10
    )
    assert got.status_code == 200 and got.json()["tool_args"] == {"n": 1}


def post_raw(server: Server, token: str, path: str, body: bytes) -> httpx.Response:
    """POST ``body`` as it is (it need not be valid JSON or UTF-8)."""
    return httpx.post(
        f"{server.base}{API}{path}",
        content=body,
        headers={**bearer(token), "Content-Type": "application/json"},
        timeout=10,
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"session_id": "s", "tool_name": "t", "tool_args": {"a": "\\ud800"}}', "tool_args.a"),
        (b'{"session_id": "s", "tool_name": "t", "tool_args": {"\\udc00": 1}}', "tool_args"),
        (b'{"session_id": "s", "tool_name": "t", "context": ["x\\udfff"]}', "context.0"),
        (b'{"session_id": "s\\ud800", "tool_name": "t"}', "session_id"),
        (b'{"session_id": "s", "tool_name": "t\\ud800"}', "tool_name"),
    ],
)
def test_a_lone_surrogate_in_a_submit_is_422_naming_the_field(
    served: tuple[Server, str], body: bytes, field: str
) -> None:
    """A lone surrogate (JSON \\ud800) anywhere in a submit is 422 naming the field, not a 500."""
    server, token = served
    response = post_raw(server, token, "/requests", body)
    assert response.status_code == 422, response.text
    assert field in error_of(response)["detail"]
    assert_healthy(server, token)


@pytest.mark.parametrize("value", [b"NaN", b'"\\ud800"'], ids=["not-finite", "lone-surrogate"])
def test_a_detail_naming_a_hostile_key_is_one_visible_line(
    served: tuple[Server, str], value: bytes
) -> None:
    """A 422 that names where a bad value sits shows the keys' newline, CR, ESC and bidi
    override as escapes: the detail is one line of visible text whatever the keys hold."""
    server, token = served
    key = b"a\\n\\r\\u001b[2K\\u202eb"
    body = b'{"session_id": "s", "tool_name": "t", "tool_args": {"x": {"' + key + b'": '
    response = post_raw(server, token, "/requests", body + value + b"}}}")
    assert response.status_code == 422, response.text
    detail = error_of(response)["detail"]
    assert "tool_args" in detail and detail.isprintable(), detail
    if value == b"NaN":  # this message names the key itself
        assert "x.a\\n\\r\\x1b[2K\\u202eb is not a finite number" in detail
    assert_healthy(server, token)


def test_a_lone_surrogate_in_edited_args_is_422(served: tuple[Server, str]) -> None:
    """An approver's edited args with a lone surrogate are 422; the request stays pending."""
    server, token = served
    assert server.admin_token is not None
    created = httpx.post(
        f"{server.base}{API}/requests",
        json={"session_id": "s", "tool_name": "t", "tool_args": {"a": 1}},
        headers=bearer(token),
    )
    request_id = created.json()["id"]
    response = post_raw(
        server,
        server.admin_token,
        f"/requests/{request_id}/decision",
        b'{"type": "approve", "args": {"a": "\\ud800"}}',
    )
    assert response.status_code == 422, response.text
    assert "args.a" in error_of(response)["detail"]
    still = httpx.get(f"{server.base}{API}/requests/{request_id}", headers=bearer(token))
    assert still.json()["status"] == "pending"
    assert_healthy(server, token)


@pytest.mark.parametrize("field", ["session_id", "tool_name", "tool_call_id"])
def test_a_nul_in_a_name_or_id_is_422(served: tuple[Server, str], field: str) -> None:
    """A NUL in session_id, tool_name or tool_call_id is 422 on both stores, not a 503."""
    server, token = served
    body = {"session_id": "s", "tool_name": "t", field: "a\x00b"}
    response = httpx.post(f"{server.base}{API}/requests", json=body, headers=bearer(token))
    assert response.status_code == 422, response.text
    assert field in error_of(response)["detail"]
    assert_healthy(server, token)


def test_a_nul_in_the_idempotency_key_is_422(served: tuple[Server, str]) -> None:
    """A NUL in the body's idempotency_key is 422 on both stores."""
    server, token = served
    body = {"session_id": "s", "tool_name": "t", "idempotency_key": "k\x00"}
    response = httpx.post(f"{server.base}{API}/requests", json=body, headers=bearer(token))
    assert response.status_code == 422, response.text
    assert "idempotency_key" in error_of(response)["detail"]
    assert_healthy(server, token)


@pytest.mark.parametrize(
    "path",
    [
        "/requests?session_id=a%00b",
        "/requests/req_a%00b",
        "/requests/req_a%00b/wait?timeout=0",
        "/audit?request_id=a%00",
        "/events?session_id=%00",
    ],
)
def test_a_nul_in_the_url_is_422(served: tuple[Server, str], path: str) -> None:
    """A NUL in a filter or a path id is 422 on both stores, not a 503 store outage."""
    server, token = served
    response = httpx.get(f"{server.base}{API}{path}", headers=bearer(token), timeout=10)
    assert response.status_code == 422, response.text
    assert "NUL" in error_of(response)["detail"]
    assert_healthy(server, token)


def stored_args(server: Server, token: str, session_id: str, args: dict[str, Any]) -> Any:
    """Submit a call with ``args`` as the agent; the args the server then reads back."""
    created = httpx.post(
        f"{server.base}{API}/requests",
        json={"session_id": session_id, "tool_name": "t", "tool_args": args},
        headers=bearer(token),
    )
    assert created.status_code == 201, created.text
    got = httpx.get(f"{server.base}{API}/requests/{created.json()['id']}", headers=bearer(token))
    return got.json()["tool_args"]


def test_a_nul_inside_tool_args_is_kept_alike_on_both_stores(served: tuple[Server, str]) -> None:
    """A NUL inside an argument's value is data: stored and read back unchanged on both stores."""
    server, token = served
    args = {"text": "before\x00after", "nested": ["\x00"]}
    assert stored_args(server, token, "nul-data", args) == args
    listed = httpx.get(f"{server.base}{API}/requests?session_id=nul-data", headers=bearer(token))
    assert listed.json()["items"][0]["tool_args"] == args
    assert_healthy(server, token)


def test_agent_text_that_looks_like_code_is_stored_as_sent(served: tuple[Server, str]) -> None:
    """Values shaped like a pickle, SQL or a frame length (what a writer process is handed
    beside them) are data: stored and read back unchanged, and the audit chain verifies."""
    server, token = served
    args = {
        "pickle": "cos\nsystem\n(S'touch /tmp/pwned'\ntR.",
        "sql": "x'); DROP TABLE requests; --",
        "frame": "\x00" * 8 + "\xff" * 8,
        "deep": [[[[[[[[[[{"k": "v"}]]]]]]]]]],
        "numbers": [0, -1, 2**53, 1.5e300, -0.0],
        "text": "\u202etxt.exe \u2028 \x1b[31m",
    }
    assert stored_args(server, token, "code-shaped", args) == args
    admin = httpx.get(
        f"{server.base}{API}/audit/verify", headers=bearer(server.admin_token or ""), timeout=30
    )
    assert admin.json()["ok"] is True, admin.text
    assert_healthy(server, token)


@pytest.mark.parametrize(
    "raw",
    [f"{10**30}|req_x", f"{-(10**30)}|req_x", f"{2**63}|req_x", "1|req_\x00"],
)
def test_a_forged_cursor_is_422(served: tuple[Server, str], raw: str) -> None:
    """A cursor carrying a huge integer (or a NUL) is 422 on both stores, not a 500 or 503."""
    server, token = served
    cursor = base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")
    response = httpx.get(
        f"{server.base}{API}/requests", params={"cursor": cursor}, headers=bearer(token)
    )
    assert response.status_code == 422, response.text
    assert "cursor" in error_of(response)["detail"]
    assert_healthy(server, token)


def test_a_huge_event_seq_is_422(served: tuple[Server, str]) -> None:
    """``since`` past any 64-bit seq is 422 before the stream starts, on both stores."""
    server, token = served
    response = httpx.get(
        f"{server.base}{API}/events", params={"since": str(10**30)}, headers=bearer(token)
    )
    assert response.status_code == 422, response.text
    error_of(response)
    assert_healthy(server, token)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"session_id": ', "not valid JSON"),
        (b'{"session_id": "s", "tool_name": "t",}', "not valid JSON"),
        (b'{"session_id": "\xff\xfe", "tool_name": "t"}', "not valid UTF-8"),
        (b"\xc3(", "not valid UTF-8"),
    ],
)
def test_malformed_json_and_invalid_utf8_are_422_in_the_error_shape(
    served: tuple[Server, str], body: bytes, says: str
) -> None:
    """A body that is not JSON, or not UTF-8, is 422 ``{error, detail}``, not a bare 400."""
    server, token = served
    response = post_raw(server, token, "/requests", body)
    assert response.status_code == 422, response.text
    assert says in error_of(response)["detail"]
    assert_healthy(server, token)


def test_a_chunked_body_over_the_limit_is_413(served: tuple[Server, str]) -> None:
    """A chunked body (no Content-Length) past the size limit is 413 ``PayloadTooLarge``."""
    server, token = served

    def chunks() -> Iterator[bytes]:
        yield b'{"session_id": "s", "tool_name": "t", "tool_args": {"a": "'
        for _ in range(40):
            yield b"x" * 65_536
        yield b'"}}'

    response = httpx.post(
        f"{server.base}{API}/requests",
        content=chunks(),
        headers={**bearer(token), "Content-Type": "application/json"},
        timeout=30,
    )
    assert "content-length" not in response.request.headers
    assert response.status_code == 413, response.text
    assert error_of(response)["error"] == "PayloadTooLarge"
    assert_healthy(server, token)


def test_unknown_routes_and_methods_answer_in_the_error_shape(served: tuple[Server, str]) -> None:
    """404 for an unknown path and 405 for a wrong method come as ``{error, detail}`` too."""
    server, token = served
    missing = httpx.get(f"{server.base}{API}/no-such-thing", headers=bearer(token))
    assert missing.status_code == 404 and error_of(missing)["error"] == "NotFound"
    wrong = httpx.delete(f"{server.base}{API}/requests", headers=bearer(token))
    assert wrong.status_code == 405 and error_of(wrong)["error"] == "MethodNotAllowed"
    assert_healthy(server, token)
