"""Diff previews of file-writing calls, from real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from signoff.domain.previews import (
    FilePreview,
    FileReader,
    Unreadable,
    file_edit_preview,
    origin_label,
)
from signoff.service import read_text_file


def test_whole_content_write_of_an_existing_file(tmp_path: Path) -> None:
    """path + content gives old, new and a unified diff with the changed line."""
    target = tmp_path / "app.py"
    target.write_text("a = 1\nb = 2\n")
    preview = file_edit_preview({"path": str(target), "content": "a = 1\nb = 3\n"}, read_text_file)
    assert preview is not None and preview.exists
    assert preview.old == "a = 1\nb = 2\n" and preview.new == "a = 1\nb = 3\n"
    assert "-b = 2" in preview.diff and "+b = 3" in preview.diff


def test_new_file(tmp_path: Path) -> None:
    """A file that does not exist yet diffs from empty."""
    preview = file_edit_preview(
        {"file_path": str(tmp_path / "new.txt"), "content": "hello\n"}, read_text_file
    )
    assert preview is not None and not preview.exists
    assert preview.old == "" and "+hello" in preview.diff


def test_replace_edit(tmp_path: Path) -> None:
    """path + old_string + new_string previews the replacement."""
    target = tmp_path / "conf.ini"
    target.write_text("debug = false\nport = 80\n")
    preview = file_edit_preview(
        {"path": str(target), "old_string": "port = 80", "new_string": "port = 8080"},
        read_text_file,
    )
    assert preview is not None
    assert preview.new == "debug = false\nport = 8080\n"
    assert "-port = 80" in preview.diff and "+port = 8080" in preview.diff
    assert preview.note is None


def test_replace_edit_with_missing_old_string_says_so(tmp_path: Path) -> None:
    """An old string not in the file is flagged: the edit would change nothing."""
    target = tmp_path / "x.txt"
    target.write_text("abc\n")
    preview = file_edit_preview(
        {"path": str(target), "old_str": "zzz", "new_str": "y"}, read_text_file
    )
    assert preview is not None and preview.note is not None and preview.diff == ""


def test_other_calls_get_no_preview() -> None:
    """Args that do not write a file get no preview."""
    assert file_edit_preview({"command": "ls"}, read_text_file) is None
    assert file_edit_preview({"path": "x"}, read_text_file) is None


async def test_submit_stores_the_preview(tmp_path: Path) -> None:
    """The service reads the file at submit and keeps old, new and diff on the request."""
    from signoff.domain.requests import ApprovalRequest
    from signoff.service import Service
    from signoff.store.memory import MemoryStore
    from signoff.testing import AGENT

    target = tmp_path / "README"
    target.write_text("one\n")
    service = Service(MemoryStore())
    submitted = await service.submit(
        {
            "session_id": "s",
            "tool_name": "write_file",
            "tool_args": {"path": str(target), "content": "two\n"},
        },
        AGENT,
    )
    request = submitted.request
    assert isinstance(request, ApprovalRequest) and request.preview is not None
    assert request.preview.old == "one\n" and "+two" in request.preview.diff


def test_without_a_reader_a_whole_write_says_the_old_content_is_unknown() -> None:
    """No reader: old is unknown (not claimed empty or new), only the new content is shown."""
    preview = file_edit_preview({"path": "/etc/passwd", "content": "x\n"}, None)
    assert preview is not None and preview.old_source == "none" and preview.exists is None
    assert preview.old == "" and "+x" in preview.diff
    assert preview.note is not None and "current content is unknown" in preview.note
    assert origin_label(preview) == "current content not read"


def test_without_a_reader_a_replace_edit_shows_the_agents_strings() -> None:
    """No reader: a replace edit diffs the agent's old string to its new one, marked so."""
    preview = file_edit_preview(
        {"path": "a.txt", "old_string": "port = 80", "new_string": "port = 8080"}, None
    )
    assert preview is not None and preview.old_source == "agent" and preview.exists is None
    assert preview.old == "port = 80" and preview.new == "port = 8080"
    assert "-port = 80" in preview.diff and "+port = 8080" in preview.diff
    assert preview.note is not None and "what the agent sent" in preview.note
    assert origin_label(preview).startswith("old text supplied by the agent")


def test_a_refusing_reader_gives_its_reason_and_no_content() -> None:
    """A reader's Unreadable is named in the note; the preview holds only the call's text."""
    preview = file_edit_preview(
        {"path": "x", "content": "new\n"}, lambda _: Unreadable("outside the preview root")
    )
    assert preview is not None and preview.old_source == "none"
    assert preview.note is not None and "outside the preview root" in preview.note


def test_a_file_read_is_marked_as_read() -> None:
    """A reader's text is the old side, marked "file"; a missing file is a new file."""
    read = file_edit_preview({"path": "x", "content": "b\n"}, lambda _: "a\n")
    assert read is not None and read.old_source == "file" and read.exists is True
    assert origin_label(read) == ""
    new = file_edit_preview({"path": "x", "content": "b\n"}, lambda _: None)
    assert new is not None and new.exists is False and origin_label(new) == "new file"


def test_a_preview_stored_before_old_source_reads_as_read_from_the_file() -> None:
    """Requests stored before the field existed load with old_source "file"."""
    stored = {"path": "x", "old": "a", "new": "b", "diff": "", "exists": True, "note": None}
    assert FilePreview.model_validate(stored).old_source == "file"


def _text(text: str) -> FileReader:
    """A reader that finds ``text`` at every path."""
    return lambda _: text


def test_claude_code_multiedit_applies_its_edits_in_order_to_the_file() -> None:
    """MultiEdit: each edit applies to the text the edits before it left; replace_all too."""
    args = {
        "file_path": "/w/app.py",
        "edits": [
            {"old_string": "a = 1", "new_string": "a = 2"},
            {"old_string": "a = 2\nb", "new_string": "a = 3\nb"},
            {"old_string": "x", "new_string": "y", "replace_all": True},
        ],
    }
    preview = file_edit_preview(args, _text("a = 1\nb = x + x\n"))
    assert preview is not None and preview.old_source == "file" and preview.note is None
    assert preview.new == "a = 3\nb = y + y\n"
    assert "-a = 1" in preview.diff and "+a = 3" in preview.diff


def test_a_multiedit_whose_later_edit_misses_changes_nothing_and_says_which() -> None:
    """One missing old string stops the whole MultiEdit (Claude Code applies all or none)."""
    args = {
        "file_path": "/w/app.py",
        "edits": [
            {"old_string": "one", "new_string": "ONE"},
            {"old_string": "three", "new_string": "THREE"},
        ],
    }
    preview = file_edit_preview(args, _text("one\ntwo\n"))
    assert preview is not None and preview.new == preview.old == "one\ntwo\n"
    assert preview.diff == ""
    assert preview.note is not None and "edit 2's old string was not found" in preview.note


def test_without_a_reader_a_multiedit_shows_each_edit_as_the_agent_sent_it() -> None:
    """No reader: one hunk per edit, from the agent's old string to its new, marked so."""
    args = {
        "file_path": "/etc/passwd",
        "edits": [
            {"old_string": "root:x", "new_string": "root:y"},
            {"old_string": "daemon", "new_string": "demon", "replace_all": True},
        ],
    }
    preview = file_edit_preview(args, None)
    assert preview is not None and preview.old_source == "agent" and preview.exists is None
    assert preview.diff.splitlines() == [
        "--- a/etc/passwd",
        "+++ b/etc/passwd",
        "@@ -1 +1 @@",
        "-root:x",
        "+root:y",
        "@@ -1 +1 @@",
        "-daemon",
        "+demon",
    ]
    assert preview.note is not None and "what the agent sent" in preview.note
    assert "2 edits" in preview.note and "edits 2 replace every occurrence" in preview.note


@pytest.mark.parametrize(
    "edits",
    [
        [],
        [{"old_string": "a"}],
        [{"old_string": "a", "new_string": "b"}, "not an edit"],
        "not a list",
    ],
)
def test_a_malformed_edits_list_gets_no_preview(edits: object) -> None:
    """An edits list that is empty or holds anything but old/new pairs: no preview."""
    assert file_edit_preview({"file_path": "/w/a", "edits": edits}, _text("a")) is None


def test_claude_code_edit_replace_all_replaces_every_occurrence() -> None:
    """Edit with replace_all: every occurrence changes, not only the first."""
    args = {"file_path": "/w/a", "old_string": "x", "new_string": "y", "replace_all": True}
    preview = file_edit_preview(args, _text("x x\nx\n"))
    assert preview is not None and preview.new == "y y\ny\n" and preview.note is None


def test_an_edit_whose_old_string_is_not_unique_says_the_tool_may_refuse_it() -> None:
    """Without replace_all, a repeated old string: the first is shown replaced, with a note."""
    args = {"file_path": "/w/a", "old_string": "x", "new_string": "y"}
    preview = file_edit_preview(args, _text("x x\n"))
    assert preview is not None and preview.new == "y x\n"
    assert preview.note is not None and "occurs 2 times" in preview.note


def test_gemini_replace_with_allow_multiple_replaces_every_occurrence() -> None:
    """Gemini CLI 0.61 replace (file_path, instruction, old/new, allow_multiple)."""
    args = {
        "file_path": "/w/a",
        "instruction": "rename",
        "old_string": "foo",
        "new_string": "bar",
        "allow_multiple": True,
    }
    preview = file_edit_preview(args, _text("foo(foo)\n"))
    assert preview is not None and preview.new == "bar(bar)\n"


@pytest.mark.parametrize(("expected", "new"), [(2, "b b\n"), (1, "b a\n"), (True, "b a\n")])
def test_gemini_expected_replacements_above_one_replaces_every_occurrence(
    expected: object, new: str
) -> None:
    """Older Gemini CLI replace: expected_replacements > 1 replaces all (a bool is no count)."""
    args = {"file_path": "/w/a", "old_string": "a", "new_string": "b"}
    preview = file_edit_preview({**args, "expected_replacements": expected}, _text("a a\n"))
    assert preview is not None and preview.new == new


def test_an_empty_old_string_on_a_missing_file_creates_it() -> None:
    """Edit / replace with old_string "" on a file that does not exist writes new_string."""
    args = {"file_path": "/w/new.txt", "old_string": "", "new_string": "hello\n"}
    preview = file_edit_preview(args, lambda _: None)
    assert preview is not None and preview.exists is False and preview.new == "hello\n"
    assert "+hello" in preview.diff and preview.note is None
