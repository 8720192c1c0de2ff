"""CredentialWatch: one re-check per credential per interval, and streams told when it fails."""

from __future__ import annotations

import asyncio
import contextlib

from signoff.domain.principals import Principal
from signoff.errors import SignoffError, StoreUnavailable, Unauthenticated
from signoff.server.credentials import Credential, CredentialWatch

BOT = Principal(name="bot", role="agent")


async def test_many_streams_on_one_credential_share_one_check() -> None:
    """A hundred streams on one token cost one check per interval; a revoke ends all of them."""
    calls: list[int] = []
    revoked = False

    async def recheck() -> Principal | None:
        calls.append(1)
        if revoked:
            raise Unauthenticated("unknown or revoked token")
        return BOT

    watch = CredentialWatch(0.05)
    credential = Credential(key="bearer:x", principal=BOT, recheck=recheck)
    with contextlib.ExitStack() as stack:
        ended = [stack.enter_context(watch.guard(credential)) for _ in range(100)]
        await asyncio.sleep(0.32)
        assert 3 <= len(calls) <= 7
        assert not any(f.done() for f in ended)
        revoked = True
        await asyncio.wait(ended, timeout=1)
        assert all(isinstance(f.result(), Unauthenticated) for f in ended)
    await asyncio.sleep(0.12)
    assert watch.checks == len(calls)  # no streams: no more checks


async def test_a_check_that_cannot_be_made_ends_the_stream() -> None:
    """A check that errors, answers None or names someone else fails closed."""
    outcomes: list[object] = [
        RuntimeError("driver bug"),
        StoreUnavailable("down"),
        None,
        Principal(name="eve", role="admin"),
    ]
    watch = CredentialWatch(0.02)
    for n, outcome in enumerate(outcomes):

        async def recheck(outcome: object = outcome) -> Principal | None:
            if isinstance(outcome, Exception):
                raise outcome
            assert outcome is None or isinstance(outcome, Principal)
            return outcome

        with watch.guard(Credential(key=f"k{n}", principal=BOT, recheck=recheck)) as ended:
            failure: SignoffError = await asyncio.wait_for(ended, 1)
        assert isinstance(failure, SignoffError), outcome
