"""Where a person's browser reaches the web inbox, for the links commands print or send."""

from __future__ import annotations

from urllib.parse import quote

from signoff.cli import settings

__all__ = ["page_base", "request_page"]


def page_base(public_url: str | None, server: str | None) -> str | None:
    """The web inbox's address: ``public_url``, else ``server``'s URL; None with neither.

    A ``public_url`` that is not an http(s) address without credentials, query or fragment
    is one error line (the rule ``signoff serve`` applies to its own).
    """
    if public_url is None:
        return server.rstrip("/") if server else None
    return settings.checked_public_url(public_url, "--public-url")


def request_page(base: str, request_id: str) -> str:
    """The request's own page in the web inbox."""
    return f"{base}/requests/{quote(request_id, safe='')}"
