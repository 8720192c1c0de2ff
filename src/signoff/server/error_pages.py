"""The framework's own errors (an unknown path, a method a path does not take) as answers.

An API client gets the documented ``{"error", "detail"}`` JSON; a browser (``Accept:
text/html``, outside ``/api/``) gets a small page in the inbox's stylesheet, the sign-in
page's classes, so it fits a phone. Whatever of the request is shown (its path, its method)
is escaped, and at most ``SHOWN`` characters of it.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from http import HTTPStatus

from fastapi import Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from signoff.server.deps import API

__all__ = ["SHOWN", "framework_error", "wants_html"]

_VARY = {"Vary": "Accept"}
SHOWN = 200
"""How much of a path an answer repeats."""

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>{title} · signoff</title>
<link rel="stylesheet" href="/static/inbox.css">
</head>
<body class="login-page error-page">
<main class="login">
  <h1>signoff</h1>
  <p class="message error" id="error-message">{message}</p>
  <p class="hint"><code id="error-path">{path}</code></p>
  <p><a href="/">Go to the inbox</a> · <a href="/docs">API docs</a></p>
</main>
</body>
</html>
"""


def wants_html(request: Request) -> bool:
    """A browser navigating to a page: it asks for HTML, and the path is not the API's."""
    if request.url.path == API or request.url.path.startswith(f"{API}/"):
        return False
    return "text/html" in request.headers.get("accept", "")


def _kind(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.title().replace(" ", "").replace("-", "")
    except ValueError:
        return "HTTPError"


def _shown(text: str) -> str:
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}…"


def _sentence(request: Request, status: int, detail: str) -> str:
    """What went wrong, in words: Starlette's bare phrases made into a sentence."""
    path = _shown(request.url.path)
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    if detail != phrase:
        return detail
    if status == 404:
        return f"nothing here: no page or API route at {path}"
    if status == 405:
        return f"{path} does not take {_shown(request.method)}"
    return detail


def framework_error(
    request: Request, status: int, detail: str, headers: Mapping[str, str] | None
) -> Response:
    """The answer for an HTTP error the framework raised (not one of signoff's own)."""
    sentence = _sentence(request, status, detail)
    if not wants_html(request):
        body = {"error": _kind(status), "detail": sentence}
        return JSONResponse(body, status_code=status, headers={**(headers or {}), **_VARY})
    try:
        title = HTTPStatus(status).phrase
    except ValueError:
        title = "Error"
    page = _PAGE.format(
        title=html.escape(title),
        message=html.escape(sentence[:1].upper() + sentence[1:] + "."),
        path=html.escape(f"{_shown(request.method)} {_shown(request.url.path)}"),
    )
    return HTMLResponse(page, status_code=status, headers={**(headers or {}), **_VARY})
