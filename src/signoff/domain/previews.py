"""Diff previews: what a file-writing tool call would change, shown before it runs."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

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
"""Files larger than this are not previewed (the request still goes through)."""

_PATH_KEYS = ("path", "file_path", "filename", "file")
_CONTENT_KEYS = ("content", "new_content", "contents", "text")
_OLD_KEYS = ("old_string", "old_str", "old_text", "search")
_NEW_KEYS = ("new_string", "new_str", "new_text", "replace")

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

    Two shapes are recognised: a path with whole new content, and a path with an old and a
    new string (a replace edit). ``read_file`` gives the current text, None if absent, or
    :class:`Unreadable`; without a reader (or when it refuses) nothing is read and the
    preview is built only from what the call itself says, marked as such.
    """
    path = _first_str(args, _PATH_KEYS)
    if path is None:
        return None
    content = _first_str(args, _CONTENT_KEYS)
    old_s = _first_str(args, _OLD_KEYS)
    new_s = _first_str(args, _NEW_KEYS)
    if content is None and (old_s is None or new_s is None):
        return None
    current = read_file(path) if read_file is not None else Unreadable("no file is read")
    if isinstance(current, Unreadable):
        return _unread_preview(path, content, old_s, new_s, current.reason)
    old = current or ""
    note = None
    if content is not None:
        new = content
    else:
        assert old_s is not None and new_s is not None
        if old_s and old_s in old:
            new = old.replace(old_s, new_s, 1)
        else:
            new = old
            note = "the old string was not found in the file; the edit would change nothing"
    return FilePreview(
        path=path,
        old=old,
        new=new,
        diff=_diff(path, old, new),
        exists=current is not None,
        note=note,
        old_source="file",
    )


def _unread_preview(
    path: str, content: str | None, old_s: str | None, new_s: str | None, reason: str
) -> FilePreview:
    """A preview from the call's own words only: the file itself was not read."""
    if content is not None:
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
    assert old_s is not None and new_s is not None
    return FilePreview(
        path=path,
        old=old_s,
        new=new_s,
        diff=_diff(path, old_s, new_s),
        exists=None,
        note=f"the file was not read ({reason}): the old text is what the agent sent, "
        "not necessarily what the file holds",
        old_source="agent",
    )


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
