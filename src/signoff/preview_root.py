"""The one directory a server may read for diff previews, and the reader that stays in it.

A request that reaches a server over HTTP comes from an agent, and the agent is the
adversary: a file-edit call naming ``/etc/passwd`` must not get that file shown back in
``preview.old``. So a server reads nothing for previews unless its operator names a
preview root (``signoff serve --preview-root DIR``), and then only regular UTF-8 text
files under it, up to :data:`~signoff.domain.previews.MAX_PREVIEW_BYTES`:

- the path is resolved against the root (``~`` is never expanded) and, after resolving
  every symlink, must still lie inside it; ``/proc``, ``/sys`` and ``/dev`` never do;
- the file is then opened one component at a time from the root with ``O_NOFOLLOW``, so
  a directory swapped for a symlink between the check and the open is refused, not followed;
- it must be a regular file (no device, FIFO or socket), small enough, with no NUL byte
  and valid UTF-8;
- the server's own files (its database and what sits beside it) are refused even inside.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from signoff.domain.previews import MAX_PREVIEW_BYTES, Unreadable

__all__ = ["PreviewRoot"]

_SYSTEM_TREES = ("/proc", "/sys", "/dev")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def _within(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip(os.sep) + os.sep)


class PreviewRoot:
    """Reads text files for previews from inside ``root`` only (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str], *, private: Iterable[Path] = ()) -> None:
        """``root`` must be an existing directory; ``private`` are the server's own files.

        A private file's name is refused with any suffix or leading dots (``signoff.db-wal``,
        ``.signoff.db.secret.tmp``), and so is everything in its directory when that
        directory is inside the root but not the root itself.
        """
        real = os.path.realpath(root)
        if not os.path.isdir(real):
            raise ValueError(f"the preview root {os.fspath(root)!r} is not a directory")
        if any(_within(real, tree) for tree in _SYSTEM_TREES):
            raise ValueError(f"the preview root {os.fspath(root)!r} is a system directory")
        self.root = real
        self._private_dirs: list[str] = []
        self._private_names: list[tuple[str, str]] = []
        for path in private:
            full = os.path.realpath(path)
            folder, name = os.path.split(full)
            self._private_names.append((folder, name))
            if folder != real and _within(folder, real):
                self._private_dirs.append(folder)

    def __repr__(self) -> str:
        return f"PreviewRoot({self.root!r})"

    def read(self, path: str) -> str | Unreadable | None:
        """The text at ``path`` (relative to the root, or absolute inside it); None if absent."""
        where = self._resolve(path)
        if isinstance(where, Unreadable):
            return where
        return self._read_inside(where)

    __call__ = read

    def _resolve(self, path: str) -> list[str] | Unreadable:
        """The components of ``path`` below the root, once it is known to be allowed."""
        if not path or "\x00" in path:
            return Unreadable("not a file path")
        if path.startswith("~"):
            return Unreadable("~ paths are not expanded")
        real = os.path.realpath(os.path.join(self.root, path))
        if not _within(real, self.root):
            return Unreadable("outside the preview root")
        if any(_within(real, tree) for tree in _SYSTEM_TREES):
            return Unreadable("a system file")
        folder, name = os.path.split(real)
        if any(_within(real, d) for d in self._private_dirs) or any(
            folder == f and name.lstrip(".").startswith(n) for f, n in self._private_names
        ):
            return Unreadable("one of the server's own files")
        if real == self.root:
            return Unreadable("not a regular file")
        return os.path.relpath(real, self.root).split(os.sep)

    def _read_inside(self, parts: list[str]) -> str | Unreadable | None:
        try:
            folder = os.open(self.root, _DIR_FLAGS)
        except OSError:
            return Unreadable("the preview root cannot be opened")
        try:
            for part in parts[:-1]:
                inner = os.open(part, _DIR_FLAGS, dir_fd=folder)
                os.close(folder)
                folder = inner
            seen = os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
            if not stat.S_ISREG(seen.st_mode):
                return Unreadable("not a regular file")
            fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=folder)
        except FileNotFoundError:
            return None
        except OSError:
            # a component that became a symlink (ELOOP / ENOTDIR), or no permission
            return Unreadable("cannot be read")
        finally:
            os.close(folder)
        try:
            return _text(fd, seen)
        finally:
            os.close(fd)


def _text(fd: int, seen: os.stat_result) -> str | Unreadable:
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (seen.st_dev, seen.st_ino):
        return Unreadable("changed while it was being read")
    if not stat.S_ISREG(opened.st_mode):
        return Unreadable("not a regular file")
    if opened.st_size > MAX_PREVIEW_BYTES:
        return Unreadable(f"larger than {MAX_PREVIEW_BYTES} bytes")
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_PREVIEW_BYTES:
        chunk = os.read(fd, MAX_PREVIEW_BYTES + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    data = b"".join(chunks)
    if len(data) > MAX_PREVIEW_BYTES:
        return Unreadable(f"larger than {MAX_PREVIEW_BYTES} bytes")
    if b"\x00" in data:
        return Unreadable("a binary file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return Unreadable("not UTF-8 text")
