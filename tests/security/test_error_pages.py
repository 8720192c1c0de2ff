"""Attacks on the answers to unknown paths and wrong methods, against a real server.

Anyone can make a link to any path on the server; the answer repeats the path so a person
can see what was asked. The HTML page (for browsers) shows it escaped, the JSON (for
everyone else) as a string value, never as markup; a long path is cut, and the page is under
the inbox's strict CSP.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from signoff.server.error_pages import SHOWN
from signoff.web.routes import CSP
from tests.serving import Server, serve_for_module

HTML = {"accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
MARKUP = "/x/\"'><script>alert(document.cookie)</script><img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One ``signoff serve`` for the module."""
    yield from serve_for_module(tmp_path_factory.mktemp("error-pages"))


def test_markup_in_an_unknown_path_is_escaped_on_the_page(server: Server) -> None:
    page = httpx.get(f"{server.base}{quote(MARKUP)}", headers=HTML)
    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CSP
    assert page.headers["vary"] == "Accept"
    for raw in ("<script>", "<img", "\"'>"):
        assert raw not in page.text
    assert "&lt;script&gt;alert(document.cookie)&lt;/script&gt;" in page.text
    assert "&quot;&#x27;&gt;" in page.text


def test_markup_in_an_unknown_path_is_a_json_string_for_other_clients(server: Server) -> None:
    answer = httpx.get(f"{server.base}{quote(MARKUP)}")
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["x-content-type-options"] == "nosniff"
    detail = f"nothing here: no page or API route at {MARKUP}"
    assert answer.json() == {"error": "NotFound", "detail": detail}


def test_a_wrong_method_on_a_page_is_escaped_and_names_no_secret(server: Server) -> None:
    page = httpx.request("DELETE", f"{server.base}/healthz", headers=HTML)
    assert page.status_code == 405
    assert page.headers["allow"] == "GET"
    assert "/healthz does not take DELETE" in page.text
    json_answer = httpx.request("PUT", f"{server.base}/healthz")
    assert json_answer.json() == {
        "error": "MethodNotAllowed",
        "detail": "/healthz does not take PUT",
    }


def test_a_long_path_is_cut_and_api_paths_stay_json(server: Server) -> None:
    long_path = "/" + "a" * 5000
    page = httpx.get(f"{server.base}{long_path}", headers=HTML)
    assert page.status_code == 404
    assert "a" * (SHOWN + 1) not in page.text and "a" * (SHOWN - 1) + "…" in page.text
    api = httpx.get(f"{server.base}/api/v1/<b>nothing</b>", headers=HTML)
    assert api.status_code == 404
    assert api.headers["content-type"] == "application/json"
    assert api.json()["detail"].endswith("/api/v1/<b>nothing</b>")
