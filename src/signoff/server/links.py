"""OpenAPI links: from an answer carrying a request to the calls that take its id.

They let a client generator, or a stateful fuzzer such as schemathesis, follow a request
through its life (submit, read, decide, wait, claim, report, cancel, audit) without guessing
ids. They describe the schema only; no route behaves differently because of them.
"""

from __future__ import annotations

from typing import Any

from signoff.server.deps import API

__all__ = ["REQUEST_LINKS", "links_from"]

_ID = "$response.body#/id"
"""Where an answer that is one request holds its id."""

_BY_ID: dict[str, tuple[str, str]] = {
    "GetRequest": ("get", "/requests/{request_id}"),
    "DecideRequest": ("post", "/requests/{request_id}/decision"),
    "WaitForRequest": ("get", "/requests/{request_id}/wait"),
    "ClaimRequest": ("post", "/requests/{request_id}/claim"),
    "RenewLease": ("post", "/requests/{request_id}/lease"),
    "ReportResult": ("post", "/requests/{request_id}/result"),
    "CancelRequest": ("post", "/requests/{request_id}/cancel"),
    "ResumeTask": ("post", "/resume/{request_id}"),
}


def _operation_ref(method: str, path: str) -> str:
    # a JSON pointer into the schema's paths: "/" is written "~1" ("~" would be "~0")
    pointer = f"{API}{path}".replace("~", "~0").replace("/", "~1")
    return f"#/paths/{pointer}/{method}"


def _links() -> dict[str, dict[str, Any]]:
    links: dict[str, dict[str, Any]] = {
        name: {
            "operationRef": _operation_ref(method, path),
            "parameters": {"path.request_id": _ID},
        }
        for name, (method, path) in _BY_ID.items()
    }
    links["AuditOfRequest"] = {
        "operationRef": _operation_ref("get", "/audit"),
        "parameters": {"query.request_id": _ID},
    }
    links["DecideInBatch"] = {
        "operationRef": _operation_ref("post", "/decisions"),
        "requestBody": {"ids": [_ID]},
    }
    return links


REQUEST_LINKS = _links()
"""Every call that takes a request's id, fed from an answer that is one request."""


def links_from(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """FastAPI ``responses=`` for a route answering one request with each of ``statuses``."""
    return {status: {"description": "The request.", "links": REQUEST_LINKS} for status in statuses}
