"""Diff previews: what a file-writing tool call would change, shown before it runs."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping

from pydantic import BaseModel, ConfigDict

__all__ = ["MAX_PREVIEW_BYTES", "FilePreview", "file_edit_preview"]

MAX_PREVIEW_BYTES = 1_000_000
"""Files larger than this are not previewed (the request still goes through)."""

_PATH_KEYS = ("path", "file_path", "filename", "file")
_CONTENT_KEYS = ("content", "new_content", "contents", "text")
_OLD_KEYS = ("old_string", "old_str", "old_text", "search")
_NEW_KEYS = ("new_string", "new_str", "new_text", "replace")


class FilePreview(BaseModel):
    """Old content, new content and a unified diff of one file edit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    """The file the call writes."""
    old: str
    """Its content now (empty when it does not exist yet)."""
    new: str
    """Its content after the call."""
    diff: str
    """Unified diff from ``old`` to ``new``."""
    exists: bool
    """Whether the file exists now."""
    note: str | None = None
    """Why the preview may not show what will happen (e.g. old string not found)."""


def _first_str(args: Mapping[str, object], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str):
            return value
    return None


def file_edit_preview(
    args: Mapping[str, object], read_file: Callable[[str], str | None]
) -> FilePreview | None:
    """Build a preview for args that write a file, or None when they do not look like it.

    Two shapes are recognised: a path with whole new content, and a path with an old and a
    new string (a replace edit). ``read_file`` returns the current text or None if absent.
    """
    path = _first_str(args, _PATH_KEYS)
    if path is None:
        return None
    content = _first_str(args, _CONTENT_KEYS)
    old_s = _first_str(args, _OLD_KEYS)
    new_s = _first_str(args, _NEW_KEYS)
    if content is None and (old_s is None or new_s is None):
        return None
    current = read_file(path)
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
    diff = "\n".join(
        difflib.unified_diff(
            old.splitlines(),
            new.splitlines(),
            fromfile=f"a/{path.lstrip('/')}",
            tofile=f"b/{path.lstrip('/')}",
            lineterm="",
        )
    )
    return FilePreview(
        path=path, old=old, new=new, diff=diff, exists=current is not None, note=note
    )
