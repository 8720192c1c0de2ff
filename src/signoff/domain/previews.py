"""Diff previews: what a file-writing tool call would change, shown before it runs."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from signoff.domain.patches import (
    ENVELOPE_START,
    FilePatch,
    new_side,
    old_side,
    parse_envelope,
    parse_unified,
    unified_diff,
)

__all__ = [
    "MAX_PREVIEW_BYTES",
    "FilePreview",
    "FileReader",
    "OldSource",
    "Unreadable",
    "file_edit_preview",
    "origin_label",
]

MAX_PREVIEW_BYTES = 1_000_000
"""Files and patches larger than this are not previewed (the request still goes through)."""

_PATH_KEYS = ("path", "file_path", "filename", "file")
_CONTENT_KEYS = ("content", "new_content", "contents", "text")
_OLD_KEYS = ("old_string", "old_str", "old_text", "search")
_NEW_KEYS = ("new_string", "new_str", "new_text", "replace")
_EVERY_KEYS = ("replace_all", "allow_multiple")
_EXPECTED_KEY = "expected_replacements"
_EDITS_KEY = "edits"
_ENVELOPE_KEYS = ("command", "input", "patch")
_DIFF_KEYS = ("patch", "diff")
_MAX_LISTED = 10

OldSource = Literal["file", "agent", "none"]
"""Where a preview's old text came from: the file itself, the agent's own words, or nowhere."""


@dataclass(frozen=True)
class Unreadable:
    """A file that was not read for a preview, and why (never anything of its content)."""

    reason: str
    """One line, e.g. "outside the preview root"."""


FileReader = Callable[[str], str | Unreadable | None]
"""Reads a path for a preview: its text, None if it does not exist, or why it was not read."""


class FilePreview(BaseModel):
    """Old content, new content and a unified diff of one file edit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    """The file the call writes."""
    old: str
    """Its content now (empty when it does not exist yet or was not read; see ``old_source``)."""
    new: str
    """Its content after the call."""
    diff: str
    """Unified diff from ``old`` to ``new``."""
    exists: bool | None
    """Whether the file exists now; None when nobody looked (``old_source`` is not "file")."""
    note: str | None = None
    """Why the preview may not show what will happen (e.g. old string not found)."""
    old_source: OldSource = "file"
    """Where ``old`` came from: "file" read from disk; "agent": the old string the agent sent,
    which may not be what the file holds; "none": the current content is unknown."""


def origin_label(preview: FilePreview) -> str:
    """What to say beside a preview's path about its old side (empty for a file read as is)."""
    if preview.old_source == "agent":
        return "old text supplied by the agent, not read from the file"
    if preview.old_source == "none":
        return "current content not read"
    return "" if preview.exists else "new file"


def _first_str(args: Mapping[str, object], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str):
            return value
    return None


def file_edit_preview(
    args: Mapping[str, object], read_file: FileReader | None
) -> FilePreview | None:
    """Build a preview for args that write a file, or None when they do not look like it.

    Recognised shapes: a path with whole new content (Write, write_file); a path with an old
    and a new string (Edit, replace; ``replace_all`` / ``allow_multiple`` /
    ``expected_replacements`` > 1 replace every occurrence); a path with ``edits``, a list
    of old/new strings applied in order (MultiEdit); and a patch (Codex's ``*** Begin
    Patch`` envelope in ``command``/``input``/``patch``, or a unified diff in
    ``patch``/``diff``). ``read_file`` gives the current text, None if absent, or
    :class:`Unreadable`; without a reader (or when it refuses) nothing is read and the
    preview is built only from what the call itself says, marked as such. A patch is
    never read against the files it names: its preview is the patch itself.
    """
    path = _first_str(args, _PATH_KEYS)
    if path is not None:
        content = _first_str(args, _CONTENT_KEYS)
        edits = _edits(args) if content is None else None
        if content is not None or edits is not None:
            return _file_preview(path, content, edits or [], read_file)
    return _patch_preview(args)


@dataclass(frozen=True)
class _Edit:
    """One old/new string replacement the agent asks for."""

    old: str
    new: str
    every: bool
    """Replace every occurrence, not only the first (which must then be the only one)."""


def _edits(args: Mapping[str, object]) -> list[_Edit] | None:
    """The call's replacements: MultiEdit's ``edits`` list, or one old/new pair; else None."""
    listed = args.get(_EDITS_KEY)
    if isinstance(listed, list):
        edits = [_edit(item) for item in listed if isinstance(item, Mapping)]
        valid = [edit for edit in edits if edit is not None]
        return valid if valid and len(valid) == len(listed) else None
    single = _edit(args)
    return [single] if single is not None else None


def _edit(args: Mapping[str, object]) -> _Edit | None:
    old_s = _first_str(args, _OLD_KEYS)
    new_s = _first_str(args, _NEW_KEYS)
    if old_s is None or new_s is None:
        return None
    expected = args.get(_EXPECTED_KEY)
    every = any(args.get(key) is True for key in _EVERY_KEYS) or (
        isinstance(expected, int) and not isinstance(expected, bool) and expected > 1
    )
    return _Edit(old_s, new_s, every)


def _file_preview(
    path: str, content: str | None, edits: list[_Edit], read_file: FileReader | None
) -> FilePreview:
    current = read_file(path) if read_file is not None else Unreadable("no file is read")
    if isinstance(current, Unreadable):
        if content is not None:
            return _unread_write(path, content, current.reason)
        return _unread_edits(path, edits, current.reason)
    old = current or ""
    if content is not None:
        new, note = content, None
    else:
        new, note = _apply(current, edits)
    return FilePreview(
        path=path,
        old=old,
        new=new,
        diff=_diff(path, old, new),
        exists=current is not None,
        note=note,
        old_source="file",
    )


def _apply(current: str | None, edits: list[_Edit]) -> tuple[str, str | None]:
    """The file's text after the edits, in order, and a note when it may not go so.

    Like Claude Code's MultiEdit, one edit whose old string is missing stops them all.
    """
    text = current or ""
    notes: list[str] = []
    for number, edit in enumerate(edits, 1):
        which = "the old string" if len(edits) == 1 else f"edit {number}'s old string"
        if not edit.old and current is None and number == 1:
            text = edit.new  # an empty old string on a missing file creates it
            continue
        found = text.count(edit.old) if edit.old else 0
        if not found:
            after = "" if number == 1 else " (after the edits before it)"
            return current or "", (
                f"{which} was not found in the file{after}; the edit would change nothing "
                "(unless the tool matches loosely: Gemini CLI's replace ignores indentation)"
            )
        if edit.every:
            text = text.replace(edit.old, edit.new)
            continue
        text = text.replace(edit.old, edit.new, 1)
        if found > 1:
            notes.append(
                f"{which} occurs {found} times in the file: this shows the first one "
                "replaced, and Claude Code and Gemini CLI refuse an edit whose old string "
                "is not unique unless it asks to replace every occurrence"
            )
    return text, "; ".join(notes) or None


def _unread_write(path: str, content: str, reason: str) -> FilePreview:
    """A whole-content write's preview when the file was not read: only the new content."""
    return FilePreview(
        path=path,
        old="",
        new=content,
        diff=_diff(path, "", content),
        exists=None,
        note=f"the file was not read ({reason}): its current content is unknown, "
        "so this shows only the new content",
        old_source="none",
    )


def _unread_edits(path: str, edits: list[_Edit], reason: str) -> FilePreview:
    """Replace edits' preview when the file was not read: the agent's old and new strings."""
    note = (
        f"the file was not read ({reason}): the old text is what the agent sent, "
        "not necessarily what the file holds"
    )
    if len(edits) > 1:
        note += f"; {len(edits)} edits, each hunk numbered from the start of its old text"
    every = [str(number) for number, edit in enumerate(edits, 1) if edit.every]
    if every and len(edits) == 1:
        note += "; every occurrence is to be replaced"
    elif every:
        note += f"; edits {', '.join(every)} replace every occurrence"
    hunks = [_hunks(edit.old, edit.new) for edit in edits]
    diff = "\n".join(_file_header(path) + [line for hunk in hunks for line in hunk])
    return FilePreview(
        path=path,
        old="\n".join(edit.old for edit in edits),
        new="\n".join(edit.new for edit in edits),
        diff=diff if any(hunks) else "",
        exists=None,
        note=note,
        old_source="agent",
    )


def _patch_preview(args: Mapping[str, object]) -> FilePreview | None:
    """A patch's preview: the patch itself, in unified form, marked as the agent's words."""
    text, files, numbered_here = _patch_files(args)
    if text is None or files is None or len(text) > MAX_PREVIEW_BYTES:
        return None
    note = "the patch as the agent sent it (no file was read): " + _what_patch_does(files)
    if numbered_here:
        note += "; its hunks carry no line numbers, so each is numbered from 1"
    return FilePreview(
        path=files[0].path,
        old=old_side(files),
        new=new_side(files),
        diff=unified_diff(files),
        exists=None,
        note=note,
        old_source="agent",
    )


def _patch_files(
    args: Mapping[str, object],
) -> tuple[str | None, list[FilePatch] | None, bool]:
    """The patch text, its files, and whether its hunk numbers are ours (Codex's envelope)."""
    for key in _ENVELOPE_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.lstrip().startswith(ENVELOPE_START):
            return value, parse_envelope(value), True
    diff = _first_str(args, _DIFF_KEYS)
    if diff is None:
        return None, None, False
    return diff, parse_unified(diff), False


def _what_patch_does(files: list[FilePatch]) -> str:
    """One clause per file ("changes a", "creates b", ...), the first _MAX_LISTED of them."""
    clauses = [_what_file_does(file) for file in files[:_MAX_LISTED]]
    if len(files) > _MAX_LISTED:
        clauses.append(f"and {len(files) - _MAX_LISTED} more files")
    return ", ".join(clauses)


def _what_file_does(file: FilePatch) -> str:
    if file.kind == "add":
        return f"creates {file.path}"
    if file.kind == "delete":
        return f"deletes {file.path}"
    if file.moved_to is not None:
        return f"changes {file.path} and moves it to {file.moved_to}"
    return f"changes {file.path}"


def _file_header(path: str) -> list[str]:
    return [f"--- a/{path.lstrip('/')}", f"+++ b/{path.lstrip('/')}"]


def _hunks(old: str, new: str) -> list[str]:
    """The hunks of a diff from ``old`` to ``new``, without the file header."""
    return list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm=""))[2:]


def _diff(path: str, old: str, new: str) -> str:
    return "\n".join(
        difflib.unified_diff(
            old.splitlines(),
            new.splitlines(),
            fromfile=f"a/{path.lstrip('/')}",
            tofile=f"b/{path.lstrip('/')}",
            lineterm="",
        )
    )
