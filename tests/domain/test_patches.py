"""Patch previews: Codex's apply_patch envelope and unified diffs, shown as the agent sent them."""

from __future__ import annotations

import pytest

from signoff.domain.patches import parse_envelope, parse_unified, unified_diff
from signoff.domain.previews import MAX_PREVIEW_BYTES, FilePreview, file_edit_preview

CODEX_PATCH = (
    "*** Begin Patch\n"
    "*** Update File: src/app.py\n"
    "@@ def run():\n"
    "     x = 1\n"
    "-    return x\n"
    "+    return x + 1\n"
    "*** Add File: notes.txt\n"
    "+hello\n"
    "+world\n"
    "*** Delete File: old.txt\n"
    "*** Update File: a.txt\n"
    "*** Move to: b.txt\n"
    "@@\n"
    "-a\n"
    "+b\n"
    "*** End of File\n"
    "*** End Patch\n"
)

UNIFIED = (
    "diff --git a/x.py b/x.py\n"
    "index 83db48f..bf269f4 100644\n"
    "--- a/x.py\n"
    "+++ b/x.py\n"
    "@@ -10,3 +10,3 @@ def f():\n"
    " a\n"
    "--- b\n"
    "+++ c\n"
    " d\n"
    "--- /dev/null\n"
    "+++ b/y.txt\n"
    "@@ -0,0 +1 @@\n"
    "+new\n"
)


def _never_read(path: str) -> str:
    raise AssertionError(f"a patch preview read {path!r}")


def _patch_preview(args: dict[str, object]) -> FilePreview:
    preview = file_edit_preview(args, _never_read)
    assert preview is not None
    return preview


def test_codex_apply_patch_is_previewed_as_a_unified_diff_of_every_file() -> None:
    """Codex's tool_input.command: one unified diff, per-file headers, red and green lines."""
    preview = _patch_preview({"command": CODEX_PATCH})
    assert preview.path == "src/app.py" and preview.old_source == "agent"
    assert preview.exists is None
    assert preview.diff.splitlines() == [
        "--- a/src/app.py",
        "+++ b/src/app.py",
        "@@ -1,2 +1,2 @@ def run():",
        "     x = 1",
        "-    return x",
        "+    return x + 1",
        "--- /dev/null",
        "+++ b/notes.txt",
        "@@ -0,0 +1,2 @@",
        "+hello",
        "+world",
        "--- a/old.txt",
        "+++ /dev/null",
        "--- a/a.txt",
        "+++ b/b.txt",
        "@@ -1,1 +1,1 @@",
        "-a",
        "+b",
    ]
    assert preview.note is not None
    assert (
        "changes src/app.py, creates notes.txt, deletes old.txt, "
        "changes a.txt and moves it to b.txt" in preview.note
    )
    assert "no file was read" in preview.note and "numbered from 1" in preview.note
    assert preview.old == "    x = 1\n    return x\na"
    assert preview.new == "    x = 1\n    return x + 1\nhello\nworld\nb"


def test_the_envelope_under_input_or_patch_is_read_the_same() -> None:
    """The function-call form ({"input": ...}) and a "patch" arg give the same preview."""
    by_command = _patch_preview({"command": CODEX_PATCH})
    assert _patch_preview({"input": CODEX_PATCH}) == by_command
    assert _patch_preview({"patch": CODEX_PATCH}) == by_command


def test_a_unified_diff_keeps_its_line_numbers_and_takes_paths_from_its_headers() -> None:
    """A diff in "patch"/"diff": paths from ---/+++, hunk counts decide where a hunk ends."""
    preview = _patch_preview({"diff": UNIFIED})
    assert preview.path == "x.py" and preview.old_source == "agent"
    assert "@@ -10,3 +10,3 @@ def f():" in preview.diff
    # "--- b" and "+++ c" inside the hunk are a removed and an added line, not a new file
    assert preview.diff.splitlines()[3:7] == [" a", "--- b", "+++ c", " d"]
    assert preview.note is not None and "changes x.py, creates y.txt" in preview.note
    assert "numbered from 1" not in preview.note
    assert _patch_preview({"patch": UNIFIED}) == preview


def test_a_patch_naming_etc_passwd_reads_nothing_with_or_without_a_reader() -> None:
    """The patch is the preview: no reader is ever asked for the files it names."""
    patch = "*** Begin Patch\n*** Update File: /etc/passwd\n@@\n-root:x\n+root:y\n*** End Patch"
    with_reader = _patch_preview({"command": patch})
    without = file_edit_preview({"command": patch}, None)
    assert with_reader == without
    assert with_reader.path == "/etc/passwd" and with_reader.old == "root:x"
    assert with_reader.old_source == "agent" and with_reader.exists is None


def test_control_characters_in_a_patched_path_are_data() -> None:
    """Escapes, bells and separators other than a newline stay in the path, unsplit."""
    path = "a\x1b[31mred\x07\x0b\x1c\u2028\rb.txt"
    patch = f"*** Begin Patch\n*** Add File: {path}\n+x\n*** End Patch\n"
    preview = _patch_preview({"command": patch})
    assert preview.path == path
    assert preview.note is not None and f"creates {path}" in preview.note
    unified = f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n"
    assert _patch_preview({"diff": unified}).path == path


def test_a_patch_of_many_files_names_the_first_and_counts_the_rest() -> None:
    """Twelve files: the path is the first, the note lists ten and says how many more."""
    files = "".join(f"*** Add File: f{n}.txt\n+{n}\n" for n in range(12))
    preview = _patch_preview({"command": f"*** Begin Patch\n{files}*** End Patch"})
    assert preview.path == "f0.txt"
    assert preview.note is not None and "creates f9.txt, and 2 more files" in preview.note
    assert "f11.txt" not in preview.note and "+++ b/f11.txt" in preview.diff


@pytest.mark.parametrize(
    "args",
    [
        {"command": "ls -la"},
        {"command": "echo '*** Begin Patch'"},
        {"command": "*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n"},  # no End Patch
        {"command": "*** Begin Patch\n*** Frobnicate File: a\n*** End Patch"},
        {"command": "*** Begin Patch\n*** End Patch"},
        {"diff": "just some words"},
        {"patch": "@@ -1 +1 @@\n-a\n+b\n"},  # hunks without a file header
        {"diff": ["--- a/x", "+++ b/x"]},
    ],
)
def test_what_is_not_a_patch_gets_no_preview(args: dict[str, object]) -> None:
    """Shell commands, broken envelopes and text that is no diff: no preview, no error."""
    assert file_edit_preview(args, _never_read) is None


def test_an_oversized_patch_is_not_previewed() -> None:
    """A patch over MAX_PREVIEW_BYTES gets no preview (the request still goes through)."""
    body = "+x\n" * (MAX_PREVIEW_BYTES // 3 + 1)
    patch = f"*** Begin Patch\n*** Add File: big.txt\n{body}*** End Patch"
    assert file_edit_preview({"command": patch}, _never_read) is None


def test_a_path_with_a_diff_is_a_patch_preview() -> None:
    """A tool taking a path and a diff: no content or old/new strings, so the diff is shown."""
    preview = _patch_preview({"path": "ignored.txt", "diff": UNIFIED})
    assert preview.path == "x.py" and preview.diff.startswith("--- a/x.py")


def test_parsers_round_trip_a_unified_diff_of_their_files() -> None:
    """unified_diff writes parse_unified's files back as the diff's own headers and hunks."""
    files = parse_unified(UNIFIED)
    assert files is not None and [f.kind for f in files] == ["update", "add"]
    assert unified_diff(files) == "\n".join(UNIFIED.splitlines()[2:])
    envelope = parse_envelope(CODEX_PATCH)
    assert envelope is not None
    assert [(f.kind, f.path, f.moved_to) for f in envelope] == [
        ("update", "src/app.py", None),
        ("add", "notes.txt", None),
        ("delete", "old.txt", None),
        ("update", "a.txt", "b.txt"),
    ]


def test_windows_line_ends_in_an_envelope_are_line_ends() -> None:
    """ "\\r\\n" ends a line (as in Codex's own parser): the path holds no "\\r"."""
    patch = "*** Begin Patch\r\n*** Add File: w.txt\r\n+x\r\n*** End Patch\r\n"
    preview = _patch_preview({"command": patch})
    assert preview.path == "w.txt" and preview.new == "x"
