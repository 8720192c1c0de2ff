"""The webhook channel: each notice POSTed as JSON to a route's URL.

The URL is checked as webhooks' are (:func:`signoff.webhook_targets.check_target`): public
addresses only unless the server allows private ones, checked again before every send and
sent to the address that was checked, so DNS rebinding changes nothing.
"""

from __future__ import annotations

import json

import httpx
from pydantic import JsonValue

from signoff.domain.notify import Notice, Route, WebhookTarget
from signoff.domain.requests import Request, RequestAdapter
from signoff.errors import InvalidRequest, SendFailed
from signoff.webhook_targets import check_target

__all__ = ["WebhookSender", "notice_body"]

_TIMEOUT = 10.0


def notice_body(
    notice: Notice, request: Request, route: Route, base_url: str | None, *, update: bool
) -> bytes:
    """The JSON a route's webhook receives: what the notice is for, and the request."""
    payload: dict[str, JsonValue] = {
        "type": "update" if update else notice.purpose,
        "notice_id": notice.id,
        "route": route.name,
        "request_ids": list(notice.request_ids or [notice.request_id]),
        "request": RequestAdapter.dump_python(request, mode="json"),
    }
    if base_url:
        payload["url"] = f"{base_url.rstrip('/')}/requests/{request.id}"
    return json.dumps(payload, ensure_ascii=False).encode()


class WebhookSender:
    """Sends notices to ``webhook`` routes, and the request's outcome once it has one."""

    channel = "webhook"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        allow_private: bool = False,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url
        self.allow_private = allow_private
        self._http = http

    async def send(
        self, notice: Notice, request: Request, route: Route
    ) -> dict[str, JsonValue] | None:
        """POST the notice; SendFailed on a refused target, a network error or a non-2xx."""
        await self._post(route, notice_body(notice, request, route, self.base_url, update=False))
        return None

    async def update(self, notice: Notice, request: Request, route: Route) -> None:
        """POST the request as it now is (decided or expired)."""
        await self._post(route, notice_body(notice, request, route, self.base_url, update=True))

    async def _post(self, route: Route, body: bytes) -> None:
        if not isinstance(route.channel, WebhookTarget):
            raise SendFailed(f"route {route.name} is not a webhook route")
        url = route.channel.url
        try:
            address = await check_target(url, allow_private=self.allow_private)
        except InvalidRequest as exc:
            raise SendFailed(f"refused: {exc.message}") from None
        headers = {"Content-Type": "application/json", "User-Agent": "signoff-notify"}
        target = httpx.URL(url)
        extensions = None
        if address is not None:
            # the checked address in the URL, the name in Host and in TLS (SNI, certificate)
            headers["Host"] = target.netloc.decode("ascii")
            if target.scheme == "https":
                extensions = {"sni_hostname": target.host}
            target = target.copy_with(host=address)
        try:
            if self._http is not None:
                response = await self._http.post(
                    target, content=body, headers=headers, extensions=extensions
                )
            else:
                async with httpx.AsyncClient(timeout=_TIMEOUT) as http:
                    response = await http.post(
                        target, content=body, headers=headers, extensions=extensions
                    )
        except httpx.HTTPError as exc:
            raise SendFailed(f"{type(exc).__name__}: {exc}"[:300]) from None
        if not 200 <= response.status_code < 300:
            raise SendFailed(f"HTTP {response.status_code} from {target.host}")
