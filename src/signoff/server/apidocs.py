"""The API docs at ``/docs``: Swagger UI from a local copy, under the app's own CSP.

FastAPI's own docs page loads Swagger UI from a CDN and starts it with an inline script,
both of which the CSP (``signoff.web.routes.CSP``) blocks, so it was blank. This page loads
the copy the ``fastapi-offline`` package ships (Swagger UI 5, which reads OpenAPI 3.1) from
``/docs/assets/`` and starts it from ``/static/apidocs.js``: nothing leaves the server.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

__all__ = ["ASSETS", "DOCS", "DOCS_CSP", "mount_api_docs"]

DOCS = "/docs"
ASSETS = f"{DOCS}/assets"

DOCS_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""The inbox's CSP, but for ``data:`` images: Swagger UI's stylesheet draws its icons (the
select arrows, the expand and lock icons) as inline ``data:`` SVG and PNG images. An image
runs no script, and scripts and styles stay ``'self'`` only."""

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>API · signoff</title>
<link rel="icon" href="{assets}/favicon.png">
<link rel="stylesheet" href="{assets}/swagger-ui.css">
<script src="{assets}/swagger-ui-bundle.js" defer></script>
<script type="module" src="/static/apidocs.js"></script>
</head>
<body>
<div id="swagger-ui" data-openapi-url="{openapi}">
<noscript>The API docs need JavaScript; the description itself is at
<a href="{openapi}">{openapi}</a>.</noscript>
</div>
</body>
</html>
"""

_MISSING = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>API · signoff</title>
<link rel="stylesheet" href="/static/inbox.css"></head>
<body class="login-page"><main class="login"><h1>API docs</h1>
<p class="message">Swagger UI is not installed here: <code>pip install 'signoff[server]'</code>.
The API's description is at <a href="{openapi}">{openapi}</a>.</p></main></body>
</html>
"""


def _assets() -> Path | None:
    """Where ``fastapi-offline`` keeps its Swagger UI files; None when it is not installed."""
    spec = find_spec("fastapi_offline")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "static"


def mount_api_docs(app: FastAPI) -> None:
    """Serve ``/docs`` and its assets on ``app`` (created with ``docs_url=None``)."""
    openapi = app.openapi_url or "/openapi.json"
    assets = _assets()
    page = (_PAGE if assets is not None else _MISSING).format(assets=ASSETS, openapi=openapi)
    headers = {"Content-Security-Policy": DOCS_CSP}

    @app.get(DOCS, include_in_schema=False)
    async def api_docs() -> HTMLResponse:
        """The API's operations, from its OpenAPI description."""
        return HTMLResponse(page, headers=headers)

    if assets is not None:
        app.mount(ASSETS, StaticFiles(directory=str(assets)), name="api-docs-assets")
