"""The terminal inbox as a decider: the real ``signoff inbox`` under tmux, held per module."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from typing import Any

from tests.paths.scenarios import OPTIONS, PathsServer
from tests.tui.tmux import Tmux

_DIALOG_MARKS = ("Esc cancels", "Esc goes back", "edit the args of")
"""What only an open dialog shows on the inbox's screen."""


class TerminalInbox:
    """``signoff inbox`` on the server's SQLite file, in a tmux window, as the local admin."""

    def __init__(self, paths: PathsServer) -> None:
        env = {**paths.server.env, "SIGNOFF_USER": "tester", "TERM": "xterm-256color"}
        self.tmux = Tmux(f"signoff-paths-{uuid.uuid4().hex[:8]}", "inbox")
        command = [sys.executable, "-m", "signoff", "inbox", "--db", paths.server.db]
        subprocess.run(
            [
                "tmux",
                "-L",
                self.tmux.socket,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "inbox",
                "-x",
                "160",
                "-y",
                "45",
                *command,
            ],
            check=True,
            env=env,
        )
        self.tmux.wait_for("0 pending")

    def keys(self, *keys: str) -> None:
        """Press tmux key names (``Enter``, ``C-s``, ``F7``) or single characters."""
        self.tmux.tmux("send-keys", "-t", self.tmux.session, *keys)

    async def decide(self, request_id: str, decision: dict[str, Any]) -> None:
        """Make ``decision`` with the inbox's keys; returns once nothing is pending."""
        await asyncio.to_thread(self._decide, request_id, decision)

    def _decide(self, request_id: str, decision: dict[str, Any]) -> None:
        self.tmux.wait_for("1 pending")
        self.tmux.wait_for(f"id {request_id}")  # shown in the detail pane once it is selected
        try:
            self._keys_for(decision)
            self.tmux.wait_for("0 pending")
        finally:
            self._close_dialogs()

    def _close_dialogs(self) -> None:
        """Press Escape until no dialog is open: one left open must not take the next test's
        keys (the raw JSON editor sits on the field editor, so one Escape may not be enough;
        its hint can be below the screen's last line, so its title counts too)."""
        for _ in range(5):
            screen = self.tmux.screen()
            if not any(mark in screen for mark in _DIALOG_MARKS):
                return
            self.keys("Escape")
            time.sleep(0.3)

    def _keys_for(self, decision: dict[str, Any]) -> None:
        kind = decision["type"]
        if kind == "approve" and "args" in decision:
            self.keys("e")  # a field per argument; Ctrl+R: the whole args as JSON
            self.tmux.wait_for("Ctrl+R raw JSON")
            self.keys("C-r")
            self.tmux.wait_for("as JSON")
            self._replace_json(json.dumps(decision["args"]))
            self.keys("Enter")
        elif kind == "approve":
            self.keys("a")
        elif kind == "reject":
            self.keys("r")
            self.tmux.wait_for("Enter rejects")
            self.tmux.type(decision["reason"])
        elif kind == "choose":
            self.keys("c")
            self.tmux.wait_for("Enter chooses")
            self.tmux.type(str(OPTIONS.index(decision["choice"]) + 1))
        elif kind == "answer":
            self.keys("n")
            self.tmux.wait_for("Ctrl+S sends")
            (text,) = decision["answers"].values()
            self.tmux.type(text)
            time.sleep(0.5)  # Enter moves focus to the feedback field after the keys queued
            self.tmux.type(decision["feedback"])
        else:
            raise AssertionError(f"the terminal inbox has no key for {kind}")

    def _replace_json(self, typed: str) -> None:
        """Select all in the raw JSON editor, type ``typed`` over it and ask for the diff.

        The editor takes focus once the dialog has mounted; on a loaded machine the first
        keys can arrive before that, leaving the proposal beside the typed text, which the
        dialog refuses as not valid JSON (its diff never comes). The typed text is then in
        the editor, so it has focus: select all and type again.
        """
        for attempt in range(3):
            self.keys("F7")  # select all: the typed JSON replaces the proposal
            self.tmux.tmux("send-keys", "-t", self.tmux.session, "-l", typed)
            try:
                # typed after the proposal, the line can be wider than the editor, which then
                # shows only its end: not there as typed either
                self.tmux.wait_for(typed, timeout=10.0)
                self.keys("C-s")  # the edit's diff, made again, to confirm
                self.tmux.wait_for("Enter approves the edited call", timeout=15.0)
                return
            except AssertionError:
                if attempt == 2:
                    raise

    def close(self) -> None:
        """Quit the inbox and end the tmux server."""
        subprocess.run(["tmux", "-L", self.tmux.socket, "kill-server"], check=False)
