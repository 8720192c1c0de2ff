"""Attack: an agent reaches past its own requests through the list's filters, its text search
or a forged cursor, or breaks the search with SQL, LIKE or FTS5 syntax (a real server)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from signoff.server.app import API
from tests.serving import Server, agent_token, bearer, serve_for_module

HOSTILE = [
    "%",
    "_",
    "%%",
    "\\",
    '"',
    "'",
    "''",
    "*",
    "topsecret*",
    "NEAR(",
    "NEAR(topsecret alpha)",
    "topsecret OR bobs",
    "OR",
    "AND NOT",
    "-",
    "-topsecret",
    "^topsecret",
    "search:topsecret",
    "requested_by:alice",
    '") OR 1=1 --',
    "'; DROP TABLE requests; --",
    "' OR '1'='1",
    "\u202etopsecret",
    "\U0001f600",
    "x" * 200,
]
"""Search texts that are SQL, LIKE or FTS5 syntax somewhere: each means only itself."""

TOO_BAD = ["", " ", "x" * 201, "x" * 10_000, "top\x00secret"]
"""Search texts that are refused (422)."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module."""
    yield from serve_for_module(tmp_path_factory.mktemp("history-attacks"))


@pytest.fixture(scope="module")
def tokens(server: Server) -> dict[str, str]:
    """Alice's requests hold the secret; Bob (the attacker) has one of his own."""
    made = {"alice": agent_token(server, "alice"), "bob": agent_token(server, "bob")}
    with httpx.Client(base_url=server.base, timeout=30) as http:
        for n, (who, text) in enumerate(
            [
                ("alice", 'topsecret alpha %_ NEAR( "q" \''),
                ("alice", "topsecret beta"),
                ("bob", "bobs own build"),
            ]
        ):
            answer = http.post(
                f"{API}/requests",
                json={
                    "session_id": "s",
                    "tool_name": "shell",
                    "tool_args": {"cmd": text},
                    "tool_call_id": f"c{n}",
                },
                headers=bearer(made[who]),
            )
            assert answer.status_code == 201, answer.text
    return made


def listing(http: httpx.Client, token: str, **params: Any) -> httpx.Response:
    """GET /requests as ``token`` with ``params``."""
    return http.get(f"{API}/requests", params=params, headers=bearer(token))


def owners(response: httpx.Response) -> set[str]:
    """Whose requests a 200 answer lists."""
    assert response.status_code == 200, response.text
    return {r["requested_by"] for r in response.json()["items"]}


def test_an_agent_sees_only_its_own_whatever_it_asks(
    server: Server, tokens: dict[str, str]
) -> None:
    """Filters naming another agent, and every hostile search, list only the caller's own."""
    bob = tokens["bob"]
    with httpx.Client(base_url=server.base, timeout=30) as http:
        assert owners(listing(http, bob)) == {"bob"}
        for params in (
            {"requested_by": "alice"},
            {"requested_by": "alice", "q": "topsecret"},
            {"q": "topsecret"},
            {"tool_name": "shell", "status": "pending"},
            {"status": "ended", "decided_by": "alice"},
            {"decided_by": "' OR '1'='1"},
            {"tool_name": "shell' OR 1=1 --"},
        ):
            assert owners(listing(http, bob, **params)) <= {"bob"}, params
        for text in HOSTILE:
            assert owners(listing(http, bob, q=text)) <= {"bob"}, text
            assert listing(http, tokens["alice"], q=text).status_code == 200, text


def test_hostile_searches_are_literal_and_bad_ones_422(
    server: Server, tokens: dict[str, str]
) -> None:
    """Wildcards and syntax find only text that holds them; bad searches are 422, not 500."""
    alice = tokens["alice"]
    with httpx.Client(base_url=server.base, timeout=30) as http:
        found = {
            text: len(listing(http, alice, q=text).json()["items"])
            for text in ("%_", "NEAR(", '"q"', "%%", "*", "-topsecret", "topsecret OR bobs")
        }
        assert found == {
            "%_": 1,
            "NEAR(": 1,
            '"q"': 1,
            "%%": 0,
            "*": 0,
            "-topsecret": 0,
            "topsecret OR bobs": 0,
        }
        for text in TOO_BAD:
            answer = listing(http, alice, q=text)
            assert answer.status_code == 422, (text[:20], answer.text)
            assert set(answer.json()) >= {"error", "detail"}
        # a lone surrogate, percent-encoded: refused or harmless, never a failure
        raw = http.get(f"{API}/requests?q=%ED%A0%80", headers=bearer(alice))
        assert raw.status_code in (200, 422), raw.text
        assert server.admin_token is not None
        everything = listing(http, server.admin_token, limit=500).json()["items"]
        assert len(everything) >= 3  # the table is still there


def forged(created_us: int, request_id: str) -> str:
    """A cursor as the server makes them, for any position."""
    return base64.urlsafe_b64encode(f"{created_us}|{request_id}".encode()).decode().rstrip("=")


def test_forged_cursors_page_only_the_callers_own(server: Server, tokens: dict[str, str]) -> None:
    """A cursor at another agent's request, in the far future or garbage: never their rows."""
    alice, bob = tokens["alice"], tokens["bob"]
    with httpx.Client(base_url=server.base, timeout=30) as http:
        theirs = listing(http, alice).json()["items"][0]["id"]
        for cursor in (forged(2**62, theirs), forged(0, theirs), forged(2**62, "req_x")):
            for params in ({}, {"q": "topsecret"}, {"q": "build"}, {"status": "pending"}):
                assert owners(listing(http, bob, cursor=cursor, **params)) <= {"bob"}
        for cursor in ("%%%", forged(2**64, "r"), forged(1, "r\x00"), "x" * 501):
            answer = listing(http, bob, cursor=cursor, q="topsecret")
            assert answer.status_code == 422, (cursor, answer.text)


def test_the_search_index_keeps_up_with_new_requests(
    server: Server, tokens: dict[str, str]
) -> None:
    """A request filed now is found by its text at once (the index is written with it)."""
    bob = tokens["bob"]
    with httpx.Client(base_url=server.base, timeout=30) as http:
        made = http.post(
            f"{API}/requests",
            json={"session_id": "s", "tool_name": "deploy", "tool_args": {"to": "Zanzibar"}},
            headers=bearer(bob),
        )
        assert made.status_code == 201, made.text
        found = listing(http, bob, q="zanzibar").json()["items"]
        assert [r["id"] for r in found] == [made.json()["id"]]
        assert listing(http, tokens["alice"], q="zanzibar").json()["items"] == []
