"""``submit --wait``: say where the request is, wait for its decision, and leave no orphan.

At once, one line on stderr names the request and its page in the web inbox. While it waits,
a spinner with the elapsed seconds runs on stderr when stderr is a terminal (nothing is
drawn otherwise, so piped output holds no control codes). A wait that times out, or that
Ctrl+C (SIGINT) or SIGTERM ends, cancels the request (unless ``--keep``) and says so: an
approval nobody would act on must not stay in the inbox.

Exit codes: 0 approved, 1 rejected or canceled, 2 expired or timed out, 130 interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

from signoff.backends import Backend
from signoff.cli.links import request_page
from signoff.domain.requests import Request
from signoff.errors import InvalidTransition
from signoff.terminal.outcome_lines import call_label, decision_line
from signoff.terminal.safe_text import visible

__all__ = [
    "EXIT_EXPIRED",
    "EXIT_INTERRUPTED",
    "EXIT_REJECTED",
    "OUTCOME_CODES",
    "Waiting",
    "wait_for_decision",
]

EXIT_REJECTED = 1
EXIT_EXPIRED = 2
EXIT_INTERRUPTED = 130
"""A wait ended by Ctrl+C or SIGTERM (128 + SIGINT, as shells report it)."""

OUTCOME_CODES: dict[str, int] = {
    "approved": 0,
    "executing": 0,
    "completed": 0,
    "failed": 0,
    "rejected": EXIT_REJECTED,
    "canceled": EXIT_REJECTED,
    "expired": EXIT_EXPIRED,
    "pending": EXIT_EXPIRED,
}
"""The exit code of ``submit --wait`` for the status the request ended in."""

SPIN_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SPIN_SECONDS = 0.1


@dataclass(frozen=True, kw_only=True)
class Waiting:
    """How ``submit --wait`` waits."""

    timeout: float
    """Seconds to wait before giving up."""
    keep: bool
    """Leave the request pending when the wait ends undecided, instead of canceling it."""
    page_base: str | None
    """The web inbox's address, for the request's link; None when there is none."""


def _say(text: str, stream: TextIO) -> None:
    stream.write(visible(text, multiline=False) + "\n")
    stream.flush()


def _seconds(value: float) -> str:
    return f"{value:g} s"


class _Spinner:
    """A one-line spinner with the elapsed seconds, redrawn in place on a terminal."""

    def __init__(self, stream: TextIO, text: str) -> None:
        self.stream = stream
        self.text = text
        self.started = time.monotonic()
        self.drawn = False

    async def run(self) -> None:
        """Redraw until canceled."""
        for n in range(sys.maxsize):
            elapsed = int(time.monotonic() - self.started)
            frame = SPIN_FRAMES[n % len(SPIN_FRAMES)]
            self.stream.write(f"\r\x1b[2K{frame} {self.text} {elapsed} s")
            self.stream.flush()
            self.drawn = True
            await asyncio.sleep(SPIN_SECONDS)

    def clear(self) -> None:
        """Erase the spinner's line, if drawn."""
        if self.drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


@contextlib.contextmanager
def _stop_signals(stop: asyncio.Event) -> Iterator[None]:
    """Ctrl+C and SIGTERM set ``stop`` instead of killing the wait mid-way."""
    loop = asyncio.get_running_loop()
    caught = (signal.SIGINT, signal.SIGTERM)
    for signum in caught:
        loop.add_signal_handler(signum, stop.set)
    try:
        yield
    finally:
        for signum in caught:
            loop.remove_signal_handler(signum)


def _verdict(request: Request) -> str:
    """What ended the wait: "approved by alice", "rejected by bob (no)", "expired"."""
    if request.status in ("expired", "canceled"):
        return f"request {request.id} {request.status}"
    return decision_line(request) or request.status


def _announce(request: Request, waiting: Waiting, stream: TextIO) -> None:
    what = call_label(request)
    if waiting.page_base is not None:
        where = request_page(waiting.page_base, request.id)
        _say(f"request {request.id} ({what}) waits for a decision: {where}", stream)
    else:
        _say(
            f"request {request.id} ({what}) waits for a decision: signoff inbox, or "
            f"signoff answer {request.id}",
            stream,
        )


async def _wait(
    backend: Backend, request: Request, waiting: Waiting, stream: TextIO
) -> Request | None:
    """The request once decided or timed out; None when a signal ended the wait."""
    stop = asyncio.Event()
    spinner: asyncio.Task[None] | None = None
    drawing: _Spinner | None = None
    if stream.isatty():
        then = "leaves it pending" if waiting.keep else "cancels it"
        drawing = _Spinner(stream, f"waiting for a decision on {request.id} (Ctrl+C {then})")
        spinner = asyncio.create_task(drawing.run())
    decided = asyncio.create_task(backend.wait(request.id, waiting.timeout))
    stopped = asyncio.create_task(stop.wait())
    try:
        with _stop_signals(stop):
            await asyncio.wait({decided, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (spinner, stopped) + (() if decided.done() else (decided,)):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if drawing is not None:
            drawing.clear()
    return decided.result() if decided.done() and not decided.cancelled() else None


async def _give_up(backend: Backend, request_id: str, why: str) -> Request:
    """Cancel the request; as it is now when a decision came first."""
    try:
        return await backend.cancel(request_id, f"{why}, waiting in signoff submit --wait")
    except InvalidTransition:
        return await backend.get(request_id)


async def wait_for_decision(
    backend: Backend, request: Request, waiting: Waiting, stream: TextIO | None = None
) -> tuple[Request, int]:
    """Wait for ``request``'s decision as :mod:`this module <signoff.cli.waiting>` says;
    the request as it ended and the exit code. Messages go to ``stream`` (stderr)."""
    out = stream or sys.stderr
    _announce(request, waiting, out)
    got = await _wait(backend, request, waiting, out)
    if got is not None and got.status != "pending":
        _say(_verdict(got), out)
        return got, OUTCOME_CODES[got.status]
    why = "interrupted" if got is None else f"timed out after {_seconds(waiting.timeout)}"
    code = EXIT_INTERRUPTED if got is None else EXIT_EXPIRED
    if waiting.keep:
        _say(f"{why}; request {request.id} is left pending (--keep)", out)
        return got or await backend.get(request.id), code
    ended = await _give_up(backend, request.id, why)
    if ended.status != "canceled":  # decided just before the cancel
        _say(_verdict(ended), out)
        return ended, OUTCOME_CODES[ended.status]
    _say(f"{why}; request {request.id} canceled", out)
    return ended, code
