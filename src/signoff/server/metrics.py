"""``GET /metrics``: the server's counters in Prometheus' text format, for operators only.

Each app has its own registry (several apps in one process never share a metric). What
feeds them is server/observe.py; the names are listed in README's "Operating". The
endpoint answers ``Authorization: Bearer`` with an admin token or ``--metrics-token``
only: no cookie, no other role (an agent's token is 403).
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi.responses import Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)

from signoff.errors import Unauthenticated
from signoff.service import Service

__all__ = ["DECISION_BUCKETS", "Metrics", "metrics_router"]

DECISION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600, 86400)
"""Seconds from a request's creation to its decision: people take minutes to hours."""


class Metrics:
    """The metrics one app reports, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=registry)
        self.requests = Counter(
            "signoff_requests",
            "Requests entering each status (a transition counter: submitted requests count "
            "under the status they start in).",
            ("kind", "status"),
            registry=registry,
        )
        self.pending = Gauge(
            "signoff_requests_pending", "Requests waiting for a decision now.", registry=registry
        )
        self.decision_seconds = Histogram(
            "signoff_decision_seconds",
            "Seconds from a request's creation to its decision.",
            ("kind",),
            buckets=DECISION_BUCKETS,
            registry=registry,
        )
        self.http = Counter(
            "signoff_http_requests",
            "HTTP requests answered, by method and status.",
            ("method", "status"),
            registry=registry,
        )
        self.websockets = Gauge(
            "signoff_websocket_clients", "WebSocket clients connected now.", registry=registry
        )
        self.streams = Gauge(
            "signoff_sse_clients",
            "Server-sent event streams (events, AG-UI) open now.",
            registry=registry,
        )
        self.webhooks = Counter(
            "signoff_webhook_deliveries",
            "Webhook delivery attempts by outcome: delivered, retry (failed, will be tried "
            "again) or failed (given up).",
            ("outcome",),
            registry=registry,
        )
        self.notifications = Counter(
            "signoff_notifications",
            "Notification send attempts by outcome: sent, retry or failed (given up).",
            ("outcome",),
            registry=registry,
        )
        self.store_errors = Counter(
            "signoff_store_errors",
            "Store operations that failed (the database out of reach, or an unexpected error).",
            ("operation",),
            registry=registry,
        )

    def render(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)


async def _check(request: Request, authorization: str | None) -> None:
    """Pass the metrics token or an admin's token (the service's check); Unauthenticated or
    NotAllowed otherwise."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthenticated("/metrics needs 'Authorization: Bearer <admin or metrics token>'")
    expected: str | None = getattr(request.app.state, "metrics_token", None)
    if expected and hmac.compare_digest(token.encode(), expected.encode()):
        return
    service: Service = request.app.state.service
    principal = await service.metrics_reader(token)
    request.state.who = principal.name


def metrics_router() -> APIRouter:
    """``GET /metrics``, kept out of the API's schema (it is not the agents' contract)."""
    router = APIRouter(include_in_schema=False)

    @router.get("/metrics")
    async def metrics(
        request: Request, authorization: Annotated[str | None, Header()] = None
    ) -> Response:
        """The app's metrics (Prometheus text format)."""
        await _check(request, authorization)
        found: Metrics = request.app.state.metrics
        return Response(found.render(), media_type=CONTENT_TYPE_LATEST)

    return router
