"""PreviewRoot: the only files a server reads for previews are text files inside its root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from signoff.domain.previews import MAX_PREVIEW_BYTES, Unreadable
from signoff.preview_root import PreviewRoot


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root with a text file, a subfolder, and a secret file beside it."""
    inside = tmp_path / "root"
    (inside / "sub").mkdir(parents=True)
    (inside / "a.txt").write_text("alpha\n")
    (inside / "sub" / "b.txt").write_text("beta\n")
    (tmp_path / "secret.txt").write_text("secret\n")
    return inside


def _reason(found: str | Unreadable | None) -> str:
    assert isinstance(found, Unreadable), found
    return found.reason


def test_reads_text_inside_by_relative_and_absolute_path(root: Path) -> None:
    """A text file inside is read whichever way it is named; a missing one is None."""
    reader = PreviewRoot(root)
    assert reader.read("a.txt") == "alpha\n"
    assert reader.read(str(root / "sub" / "b.txt")) == "beta\n"
    assert reader.read("sub/../a.txt") == "alpha\n"
    assert reader.read("missing.txt") is None
    assert reader.read("nope/missing.txt") is None


def test_symlinks_inside_are_followed_but_never_out(root: Path, tmp_path: Path) -> None:
    """A symlink to a file inside reads it; one that leaves the root is refused."""
    (root / "to_a").symlink_to(root / "a.txt")
    (root / "to_secret").symlink_to(tmp_path / "secret.txt")
    (root / "up").symlink_to(tmp_path)
    (root / "dangling").symlink_to(tmp_path / "nothing-here")
    reader = PreviewRoot(root)
    assert reader.read("to_a") == "alpha\n"
    assert _reason(reader.read("to_secret")) == "outside the preview root"
    assert _reason(reader.read("up/secret.txt")) == "outside the preview root"
    assert _reason(reader.read("dangling")) == "outside the preview root"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../secret.txt", "outside the preview root"),
        ("/etc/passwd", "outside the preview root"),
        ("/proc/self/environ", "outside the preview root"),
        ("~/secret.txt", "~ paths are not expanded"),
        ("~", "~ paths are not expanded"),
        ("", "not a file path"),
        ("a\x00.txt", "not a file path"),
        ("sub", "not a regular file"),
        (".", "not a regular file"),
    ],
)
def test_refuses_paths_that_leave_or_are_not_files(root: Path, path: str, reason: str) -> None:
    """Escapes, ~, NUL and directories are refused with a reason, never read."""
    assert _reason(PreviewRoot(root).read(path)) == reason


def test_refuses_binary_non_utf8_oversized_and_fifos(root: Path) -> None:
    """Only small UTF-8 text without NUL bytes is read; FIFOs are not opened to block."""
    (root / "nul.bin").write_bytes(b"text\x00more")
    (root / "latin1.txt").write_bytes(b"caf\xe9\n")
    (root / "big.txt").write_bytes(b"x" * (MAX_PREVIEW_BYTES + 1))
    (root / "exact.txt").write_bytes(b"y" * MAX_PREVIEW_BYTES)
    os.mkfifo(root / "pipe")
    reader = PreviewRoot(root)
    assert _reason(reader.read("nul.bin")) == "a binary file"
    assert _reason(reader.read("latin1.txt")) == "not UTF-8 text"
    assert _reason(reader.read("big.txt")) == f"larger than {MAX_PREVIEW_BYTES} bytes"
    assert reader.read("exact.txt") == "y" * MAX_PREVIEW_BYTES
    assert _reason(reader.read("pipe")) == "not a regular file"


def test_a_root_of_slash_still_refuses_system_trees(tmp_path: Path) -> None:
    """Even with / as the root, /proc, /sys and /dev are never read."""
    reader = PreviewRoot("/")
    for path in ("/proc/self/environ", "proc/self/cmdline", "/dev/zero", "/sys/kernel/hostname"):
        assert _reason(reader.read(path)) == "a system file"
    (tmp_path / "ok.txt").write_text("fine\n")
    assert reader.read(str(tmp_path / "ok.txt")) == "fine\n"


def test_the_servers_own_files_are_refused(root: Path) -> None:
    """A private file, its suffixed and dotted siblings, and a private folder inside: refused."""
    (root / "data").mkdir()
    (root / "data" / "notes.txt").write_text("beside the database\n")
    (root / "signoff.db.secret").write_text("s3cret\n")
    (root / "signoff.dbx.txt").write_text("a user file that only looks alike\n")
    reader = PreviewRoot(root, private=[root / "signoff.db", root / "data" / "other.db"])
    for path in ("signoff.db", "signoff.db-wal", "signoff.db.secret", ".signoff.db.secret.1"):
        assert _reason(reader.read(path)) == "one of the server's own files"
    assert _reason(reader.read("data/notes.txt")) == "one of the server's own files"
    assert reader.read("a.txt") == "alpha\n"


def test_a_directory_swapped_for_a_symlink_after_the_check_is_not_followed(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The open walks the checked path with O_NOFOLLOW: a race that plants a symlink fails."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "b.txt").write_text("not for you\n")
    reader = PreviewRoot(root)
    checked = reader._resolve("sub/b.txt")
    assert checked == ["sub", "b.txt"]
    (root / "sub" / "b.txt").unlink()
    (root / "sub").rmdir()
    (root / "sub").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setattr(reader, "_resolve", lambda _: checked)
    assert _reason(reader.read("sub/b.txt")) == "cannot be read"


@pytest.mark.parametrize("bad", ["missing", "a.txt", "/proc", "/dev/shm"])
def test_a_root_must_be_a_directory_outside_system_trees(root: Path, bad: str) -> None:
    """A root that is no directory, or is in /proc, /sys or /dev, is refused at once."""
    path = root / bad if not bad.startswith("/") else Path(bad)
    with pytest.raises(ValueError, match="preview root"):
        PreviewRoot(path)
