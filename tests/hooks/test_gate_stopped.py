"""A hook stopped while it files its call leaves nothing approvable behind.

The agent stops its hook (Esc, its own timeout: SIGTERM) at any moment, including between
the server filing the request and the hook reading the answer. The request the hook never
learned the id of is withdrawn all the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from signoff.backends import LocalBackend
from signoff.domain.submission import NewRequest
from signoff.integrations.hooks.contracts import HookCall
from signoff.integrations.hooks.gate import gate
from signoff.service import Service, Submitted
from signoff.store.base import RequestQuery
from signoff.store.memory import MemoryStore
from signoff.testing import ADMIN, AGENT


class LostAnswer(LocalBackend):
    """A backend whose first submit is filed (or, ``reaches=False``, never arrives) and
    whose answer never comes back: the hook is stopped while it waits for it."""

    def __init__(self, service: Service, *, reaches: bool) -> None:
        super().__init__(service, AGENT)
        self.reaches = reaches
        self.submits = 0
        self.waiting = asyncio.Event()

    async def submit(self, new: NewRequest | Mapping[str, Any]) -> Submitted:
        self.submits += 1
        if self.submits > 1:
            return await super().submit(new)
        if self.reaches:
            await super().submit(new)
        self.waiting.set()
        await asyncio.Event().wait()  # the answer is lost on its way
        raise AssertionError("unreachable")


@pytest.mark.parametrize("reaches", [True, False], ids=["filed", "never-arrived"])
@pytest.mark.parametrize("call_id", ["toolu_1", None], ids=["call-id", "no-call-id"])
async def test_a_hook_stopped_while_filing_withdraws_what_it_filed(
    reaches: bool, call_id: str | None
) -> None:
    """Stopped while its submit's answer is on its way, the hook files the same call again
    (its call id, or its own idempotency key, returns the one filed) and withdraws it: one
    request, canceled; or, when the first never arrived, one filed and withdrawn."""
    async with Service(MemoryStore(), read_file=None) as service:
        backend = LostAnswer(service, reaches=reaches)
        call = HookCall(
            agent="claude-code",
            event="PreToolUse",
            tool_name="Bash",
            tool_input={"command": "make release"},
            session_id="sess",
            tool_use_id=call_id,
        )
        gating = asyncio.create_task(gate(backend, call, wait=60))
        await backend.waiting.wait()
        gating.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gating
        page = await service.list_requests(RequestQuery(session_id="sess"), ADMIN)
        assert [r.status for r in page.items] == ["canceled"]
        assert backend.submits == 2
