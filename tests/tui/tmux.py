"""Driving a real terminal program under tmux: type into it and read its screen."""

from __future__ import annotations

import re
import subprocess
import time


class Tmux:
    """One tmux server on its own socket, running one window."""

    def __init__(self, socket: str, session: str) -> None:
        self.socket = socket
        self.session = session

    def tmux(self, *args: str) -> str:
        """Run a tmux command on this server; its output."""
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True
        )
        return done.stdout

    def screen(self) -> str:
        """The visible screen, whitespace squeezed so wrapped lines read as one."""
        return re.sub(r"\s+", " ", self.tmux("capture-pane", "-p", "-t", self.session))

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        """The screen once it shows ``text``."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never appeared; the screen:\n{screen}")
            time.sleep(0.2)

    def type(self, text: str) -> None:
        """Type ``text`` literally, then Enter."""
        self.tmux("send-keys", "-t", self.session, "-l", text)
        self.tmux("send-keys", "-t", self.session, "Enter")
