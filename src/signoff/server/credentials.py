"""Live streams end when the credential that opened them stops working.

A WebSocket or SSE stream is authenticated once, when it opens. A token revoked, or an
inbox session signed out or expired, afterwards must not keep it receiving events. Each
stream registers how to authenticate again; one ticker per app re-checks every distinct
credential once per interval, however many streams share it, and ends the streams of the
ones that fail. The check reads the store, so a revoke committed on any server of a
PostgreSQL deployment ends the streams on every server within one interval, with no event
on the bus.

A check that cannot be made (the store is out of reach) ends the stream too: it fails
closed, and the client's reconnect authenticates afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

from starlette.requests import HTTPConnection

from signoff.domain.principals import Principal
from signoff.errors import SignoffError, StoreUnavailable, Unauthenticated
from signoff.service import Service

__all__ = ["REVALIDATE", "Credential", "CredentialWatch", "credential_of"]

REVALIDATE = 0.5
"""Seconds between re-checks of a live stream's credential."""

_CONCURRENCY = 32
_RECHECK_HEADERS = frozenset((b"cookie", b"origin", b"host", b"sec-fetch-site"))
"""The headers an inbox session's cookie is checked again with (server/auth.py)."""

logger = logging.getLogger("signoff.server.credentials")


@dataclass(frozen=True)
class Credential:
    """How a stream authenticated, and how to authenticate it again."""

    key: str
    """The same for every stream opened with this credential (never the secret itself)."""
    principal: Principal
    """Who it authenticated when the stream opened."""
    recheck: Callable[[], Awaitable[Principal | None]]
    """Authenticates again: the principal, None, or a SignoffError when it no longer works."""


class CredentialWatch:
    """Re-checks the credentials of live streams and tells a stream when its own fails."""

    def __init__(self, interval: float = REVALIDATE) -> None:
        self.interval = interval
        self._streams: dict[str, tuple[Credential, set[asyncio.Future[SignoffError]]]] = {}
        self._ticker: asyncio.Task[None] | None = None
        self.checks = 0
        """Checks made so far (for tests and metrics: one per credential per interval)."""

    @contextlib.contextmanager
    def guard(self, credential: Credential) -> Iterator[asyncio.Future[SignoffError]]:
        """A future that gets the error once ``credential`` stops authenticating its principal."""
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[SignoffError] = loop.create_future()
        entry = self._streams.setdefault(credential.key, (credential, set()))
        entry[1].add(ended)
        ticker = self._ticker
        if ticker is None or ticker.done() or ticker.get_loop() is not loop:
            self._ticker = asyncio.create_task(self._run(), name="signoff-credential-watch")
        try:
            yield ended
        finally:
            entry[1].discard(ended)
            if not entry[1] and self._streams.get(credential.key) is entry:
                del self._streams[credential.key]

    async def _run(self) -> None:
        try:
            while self._streams:
                await asyncio.sleep(self.interval)
                await self.check_now()
        finally:
            if self._ticker is asyncio.current_task():
                self._ticker = None

    async def check_now(self) -> None:
        """Check every watched credential once, and end the streams of those that fail."""
        limit = asyncio.Semaphore(_CONCURRENCY)

        async def one(key: str, credential: Credential) -> None:
            async with limit:
                failure = await self._check(credential)
            if failure is None:
                return
            entry = self._streams.pop(key, None)
            for ended in entry[1] if entry is not None else ():
                if not ended.done():
                    ended.set_result(failure)

        await asyncio.gather(*(one(key, c) for key, (c, _) in list(self._streams.items())))

    async def _check(self, credential: Credential) -> SignoffError | None:
        self.checks += 1
        try:
            principal = await credential.recheck()
        except SignoffError as exc:
            return exc
        except Exception as exc:  # never let a failed check leave a stream open
            logger.warning("cannot re-check a stream's credential: %r", exc)
            return StoreUnavailable("cannot re-check the credential; reconnect")
        if principal is None:
            return Unauthenticated("the session has ended; sign in again")
        if principal != credential.principal:
            return Unauthenticated("the credential now stands for someone else")
        return None


def credential_of(conn: HTTPConnection, principal: Principal) -> Credential:
    """How ``conn`` authenticated ``principal`` (bearer token or inbox cookie), to check again."""
    service: Service = conn.app.state.service
    scheme, _, token = conn.headers.get("authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() == "bearer" and token:

        async def bearer() -> Principal | None:
            return await service.authenticate(token)

        return Credential(key="bearer:" + _digest(token), principal=principal, recheck=bearer)
    resolve = getattr(conn.app.state, "cookie_principal", None)
    # only what checking the cookie reads: not the rest of the handshake, held as long as
    # the stream (a WebSocket kept by the hub outlives its handler and its scope)
    again = HTTPConnection(
        {
            "type": conn.scope["type"],
            "method": conn.scope.get("method", "GET"),
            "app": conn.app,
            "headers": [(k, v) for k, v in conn.scope["headers"] if k in _RECHECK_HEADERS],
        }
    )

    async def cookie() -> Principal | None:
        found: Principal | None = await resolve(again) if resolve is not None else None
        return found

    return Credential(
        key="cookie:" + _digest(conn.headers.get("cookie", "")), principal=principal, recheck=cookie
    )


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()
