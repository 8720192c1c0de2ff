"""Where a webhook may POST: public addresses only, unless the operator allows private ones.

Otherwise an admin's webhook (or a stolen admin token's) could make the server POST to its
own loopback services, the cloud metadata endpoint or the internal network. The service
checks a URL when a webhook is added, and the dispatcher again before every send, since
what a name resolves to can change; the send goes to the address that was checked.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from signoff.domain.webhooks import address_refusal
from signoff.errors import InvalidRequest

__all__ = ["check_target"]


async def check_target(url: str, *, allow_private: bool) -> str | None:
    """The checked address to send ``url``'s POSTs to; None when private targets are allowed.

    InvalidRequest when the URL is not http(s), its host does not resolve, or it is (or
    resolves to, on any of its addresses) a non-public address.
    """
    parts = urlsplit(url)
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if parts.scheme not in ("http", "https") or not host:
        raise InvalidRequest("a webhook URL must be http:// or https:// with a host")
    if allow_private:
        return None
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            found = await asyncio.get_running_loop().getaddrinfo(
                host, port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM
            )
        except (OSError, UnicodeError) as exc:
            raise InvalidRequest(f"webhook host {host!r} does not resolve ({exc})") from None
        addresses = [str(info[4][0]) for info in found]
    if not addresses:
        raise InvalidRequest(f"webhook host {host!r} does not resolve")
    for address in addresses:
        refusal = address_refusal(address)
        if refusal is not None:
            where = host if host == address else f"{host} ({address})"
            raise InvalidRequest(
                f"webhook target {where} is a {refusal} address; only public addresses are "
                "allowed unless the server runs with --allow-private-webhooks"
            )
    return addresses[0]
