"""Patches an agent sends: Codex's ``apply_patch`` envelope and plain unified diffs, parsed.

Pure text handling: nothing here reads a file. A patch is parsed into one
:class:`FilePatch` per file it names, which :func:`unified_diff` writes back out in
unified-diff form so every inbox colours it the same way.

Codex's envelope (its ``apply_patch`` tool; the hook gets it as ``tool_input.command``)::

    *** Begin Patch
    *** Update File: src/app.py
    *** Move to: src/main.py          (optional)
    @@ def run():                     (optional context line)
     context
    -removed
    +added
    *** Add File: notes.txt
    +every line added
    *** Delete File: old.txt
    *** End Patch

Its hunks carry no line numbers, so the unified form numbers each hunk from 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ENVELOPE_START",
    "FilePatch",
    "Hunk",
    "PatchKind",
    "new_side",
    "old_side",
    "parse_envelope",
    "parse_unified",
    "unified_diff",
]

PatchKind = Literal["add", "delete", "update"]
"""What a patch does to one file."""

ENVELOPE_START = "*** Begin Patch"
"""The first line of a Codex patch envelope."""
_END = "*** End Patch"
_ADD = "*** Add File: "
_DELETE = "*** Delete File: "
_UPDATE = "*** Update File: "
_MOVE = "*** Move to: "
_END_OF_FILE = "*** End of File"
_HUNK_NUMBERS = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_DEV_NULL = "/dev/null"


@dataclass(frozen=True)
class Hunk:
    """One hunk: its ``@@`` header line and its lines, each starting with " ", "-" or "+"."""

    header: str
    """The whole ``@@ ... @@`` line, as a unified diff writes it."""
    lines: tuple[str, ...]
    """Context (" "), removed ("-") and added ("+") lines, without line ends."""


@dataclass(frozen=True)
class FilePatch:
    """What a patch does to one file."""

    kind: PatchKind
    """"add" creates the file, "delete" removes it, "update" changes (and maybe moves) it."""
    path: str
    """The file, as the patch names it (no a/ or b/ prefix)."""
    moved_to: str | None
    """Where an update moves the file, if it does."""
    hunks: tuple[Hunk, ...]
    """The changes, in order (none for a delete)."""


def _lines(text: str) -> list[str]:
    # only "\n" ends a line (as Rust's str::lines, one "\r" before it is dropped): any other
    # control character, in a path or a line, stays data
    return [line.removesuffix("\r") for line in text.split("\n")]


def parse_envelope(text: str) -> list[FilePatch] | None:
    """The files of a Codex ``*** Begin Patch`` envelope, or None when ``text`` is not one."""
    lines = _lines(text.strip())
    if len(lines) < 2 or lines[0].strip() != ENVELOPE_START or lines[-1].strip() != _END:
        return None
    files: list[FilePatch] = []
    i = 1
    while i < len(lines) - 1:
        line = lines[i]
        if line.startswith(_ADD):
            added, i = _take(lines, i + 1, ("+",))
            body = tuple(added)
            files.append(FilePatch("add", line[len(_ADD) :], None, (_numbered("", body),)))
        elif line.startswith(_DELETE):
            files.append(FilePatch("delete", line[len(_DELETE) :], None, ()))
            i += 1
        elif line.startswith(_UPDATE):
            path = line[len(_UPDATE) :]
            i += 1
            moved_to = None
            if i < len(lines) and lines[i].startswith(_MOVE):
                moved_to = lines[i][len(_MOVE) :]
                i += 1
            hunks, i = _envelope_hunks(lines, i)
            files.append(FilePatch("update", path, moved_to, tuple(hunks)))
        elif not line.strip():
            i += 1
        else:
            return None
    return files or None


def _take(lines: list[str], i: int, prefixes: tuple[str, ...]) -> tuple[list[str], int]:
    """The lines from ``i`` that start with one of ``prefixes``, and the index after them."""
    taken: list[str] = []
    while i < len(lines) - 1 and lines[i].startswith(prefixes):
        taken.append(lines[i])
        i += 1
    return taken, i


def _envelope_hunks(lines: list[str], i: int) -> tuple[list[Hunk], int]:
    """An Update File's hunks: ``@@`` lines (optional before the first) and their lines."""
    hunks: list[Hunk] = []
    context = ""
    body: list[str] = []
    started = False
    while i < len(lines) - 1:
        line = lines[i]
        if line.startswith("*** ") and line != _END_OF_FILE:
            break  # the next file's header
        i += 1
        if line == _END_OF_FILE:
            continue
        if line.startswith("@@"):
            if started and body:
                hunks.append(_numbered(context, tuple(body)))
            context, body, started = line[2:].strip(), [], True
        else:
            started = True
            body.append(line if line[:1] in (" ", "-", "+") else " " + line)
    if body:
        hunks.append(_numbered(context, tuple(body)))
    return hunks, i


def _numbered(context: str, body: tuple[str, ...]) -> Hunk:
    """A hunk whose header counts its lines from 1 (the envelope gives no line numbers)."""
    old = sum(1 for line in body if line[:1] in (" ", "-"))
    new = sum(1 for line in body if line[:1] in (" ", "+"))
    header = f"@@ -{min(old, 1)},{old} +{min(new, 1)},{new} @@"
    return Hunk(f"{header} {context}" if context else header, body)


def parse_unified(text: str) -> list[FilePatch] | None:
    """The files of a unified diff (``---``/``+++`` headers, ``@@`` hunks), or None."""
    lines = _lines(text)
    files: list[FilePatch] = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old_path, new_path = _header_path(lines[i][4:]), _header_path(lines[i + 1][4:])
            hunks, i = _unified_hunks(lines, i + 2)
            files.append(_file_of(old_path, new_path, hunks))
        else:
            i += 1
    return files or None


def _header_path(name: str) -> str:
    """A ``---``/``+++`` name without its timestamp (after a tab) or its a/ or b/ prefix."""
    name = name.split("\t", 1)[0]
    if name == _DEV_NULL:
        return name
    return name[2:] if name.startswith(("a/", "b/")) else name


def _file_of(old_path: str, new_path: str, hunks: list[Hunk]) -> FilePatch:
    if old_path == _DEV_NULL:
        return FilePatch("add", new_path, None, tuple(hunks))
    if new_path == _DEV_NULL:
        return FilePatch("delete", old_path, None, tuple(hunks))
    moved_to = new_path if new_path != old_path else None
    return FilePatch("update", old_path, moved_to, tuple(hunks))


def _unified_hunks(lines: list[str], i: int) -> tuple[list[Hunk], int]:
    """The hunks after a file header; each one's counts say where it ends."""
    hunks: list[Hunk] = []
    while i < len(lines) and lines[i].startswith("@@"):
        header = lines[i]
        numbers = _HUNK_NUMBERS.match(header)
        old_left = int(numbers.group(2) or 1) if numbers else None
        new_left = int(numbers.group(4) or 1) if numbers else None
        body: list[str] = []
        i += 1
        while i < len(lines) and _in_hunk(lines, i, old_left, new_left):
            line = lines[i]
            if old_left is not None and new_left is not None:
                old_left -= line[:1] in (" ", "-")
                new_left -= line[:1] in (" ", "+")
            body.append(line)
            i += 1
        hunks.append(Hunk(header, tuple(body)))
    return hunks, i


def _in_hunk(lines: list[str], i: int, old_left: int | None, new_left: int | None) -> bool:
    line = lines[i]
    if line.startswith("\\"):  # "\ No newline at end of file"
        return True
    if old_left is not None and new_left is not None:
        return (old_left > 0 or new_left > 0) and line[:1] in (" ", "-", "+")
    # a hunk without counts ends at the next header
    next_header = line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")
    return line[:1] in (" ", "-", "+") and not next_header


def unified_diff(files: list[FilePatch]) -> str:
    """The files in unified-diff form: a ``---``/``+++`` header each, then their hunks."""
    out: list[str] = []
    for file in files:
        old = _DEV_NULL if file.kind == "add" else f"a/{file.path.lstrip('/')}"
        new_path = file.moved_to or file.path
        new = _DEV_NULL if file.kind == "delete" else f"b/{new_path.lstrip('/')}"
        out += [f"--- {old}", f"+++ {new}"]
        for hunk in file.hunks:
            out.append(hunk.header)
            out += hunk.lines
    return "\n".join(out)


def old_side(files: list[FilePatch]) -> str:
    """The text the patch expects now: its context and removed lines, file after file."""
    return _side(files, (" ", "-"))


def new_side(files: list[FilePatch]) -> str:
    """The text the patch leaves: its context and added lines, file after file."""
    return _side(files, (" ", "+"))


def _side(files: list[FilePatch], kept: tuple[str, ...]) -> str:
    return "\n".join(
        line[1:] for file in files for hunk in file.hunks for line in hunk.lines if line[:1] in kept
    )
