"""What ``signoff demo`` does around its server: a workspace it cleans up, and a line per outcome.

Without ``--workspace`` the demo works in a new temporary directory and removes it when it
stops, by Ctrl+C or SIGTERM too; a directory given with ``--workspace`` is never removed.
While it runs, its terminal says what became of each request once it has an outcome:
"approved by alice: write_file notes.md -> wrote 6 bytes to notes.md", "rejected by alice
(too risky): shell rm -rf build" (agent text with its controls escaped).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

from signoff.backends import Backend
from signoff.terminal.outcome_lines import outcome_line

__all__ = ["DemoWorkspace", "print_outcomes", "sigterm_as_interrupt"]


class DemoWorkspace:
    """The demo's directory, made the working directory: the one given, or a temporary one
    that :meth:`close` removes."""

    def __init__(self, given: Path | None) -> None:
        self.temporary = given is None
        """Whether the demo made it (and so removes it)."""
        made = Path(tempfile.mkdtemp(prefix="signoff-demo-")) if given is None else given
        self.path = made.resolve()
        """Where the demo's files and database are."""
        self.path.mkdir(parents=True, exist_ok=True)
        self._home = Path.cwd()
        os.chdir(self.path)  # the tools resolve relative paths here

    def close(self) -> bool:
        """Leave the directory, and remove it if the demo made it; whether it was removed."""
        with contextlib.suppress(OSError):
            os.chdir(self._home)
        if not self.temporary:
            return False
        shutil.rmtree(self.path, ignore_errors=True)
        return not self.path.exists()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the demo as Ctrl+C does, so its cleanup runs.

    (The web server handles both while it serves, then raises the signal again once it has
    stopped: without this, SIGTERM would end the process there with no cleanup.)
    """
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


async def print_outcomes(backend: Backend, say: Callable[[str], None]) -> None:
    """Say each request's outcome once, as it happens, until canceled.

    ``backend`` should see every request (a person's, not one agent's); a tool call's line
    comes once it ran, with what it returned.
    """
    said: set[str] = set()
    async for event in backend.events():
        request = event.request
        if request.id in said:
            continue
        line = outcome_line(request)
        if line is not None:
            said.add(request.id)
            say(line)
