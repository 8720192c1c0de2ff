"""signoff.terminal.render: one rendering of a request for ``signoff show`` and the inbox."""

from __future__ import annotations

import io

from rich.console import Console, RenderableType

from signoff.backends import LocalBackend
from signoff.domain.requests import Request
from signoff.service import Service
from signoff.store.memory import MemoryStore
from signoff.terminal.render import PANEL_ARG_LINES, diff_text, request_details, request_panel
from signoff.testing import AGENT


def plain(renderable: RenderableType) -> str:
    """What a 200-column terminal shows."""
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


async def long_call() -> Request:
    """An approval request whose arguments take more lines than the panel shows."""
    agent = LocalBackend(Service(MemoryStore()), AGENT)
    args = {f"key{n:03}": n for n in range(PANEL_ARG_LINES + 10)}
    body = {"session_id": "s1", "kind": "approval", "tool_name": "shell", "tool_args": args}
    return (await agent.submit(body)).request


async def test_details_show_every_argument_and_the_panel_cuts_them() -> None:
    """The inbox's details show all arguments; ``show``'s panel cuts them, naming --json."""
    request = await long_call()
    details = plain(request_details(request))
    assert '"key049": 49' in details and "use --json" not in details
    panel = plain(request_panel(request))
    assert '"key049": 49' not in panel
    assert "12 more lines (use --json)" in panel
    assert f"id            {request.id}" in details and request.id in panel


def test_diff_text_colours_removed_and_added_lines() -> None:
    """Removed lines are red, added green, hunk headers cyan, and markup stays literal."""
    text = diff_text("--- a\n+++ b\n@@ -1 +1 @@\n-old\n+[bold]new[/bold]")
    styles = {text.plain[s.start : s.end]: str(s.style) for s in text.spans}
    assert styles["-old\n"] == "red"
    assert styles["+[bold]new[/bold]"] == "green"
    assert styles["@@ -1 +1 @@\n"] == "cyan"
    assert text.plain.endswith("+[bold]new[/bold]")
