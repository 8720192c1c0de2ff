"""Attack: an agent names a file in a file-edit call to have the server read it back.

A diff preview is built when a request is submitted and kept on the request (and so in
events and webhooks). Over HTTP the server must read nothing for it unless its operator set
``--preview-root``, and then only plain text files inside that directory; otherwise the
preview shows only what the agent sent, marked as such.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.domain.previews import MAX_PREVIEW_BYTES
from signoff.server.app import API
from tests.serving import Server, agent_token, bearer, free_port, start_server

CANARY = "canary-7f3a9c1e"
"""Written into every file an agent must not see, and into the server's environment."""
PASSWD = "root:x:0:0"


@dataclass
class Setup:
    """A running server, an agent token for it, and the files around it."""

    server: Server
    token: str
    home: Path
    outside: Path
    root: Path | None


def _start(base: Path, *, with_root: bool) -> Iterator[Setup]:
    home, outside, root = base / "home", base / "outside", base / "root"
    for folder in (home, outside, root):
        folder.mkdir()
    (home / "notes.txt").write_text(f"home {CANARY}\n")
    (outside / "secret.txt").write_text(f"outside {CANARY}\n")
    (root / "notes.md").write_text("hello preview\n")
    (root / "escape").symlink_to(outside / "secret.txt")
    (root / "out").symlink_to(outside)
    (root / "passwd").symlink_to("/etc/passwd")
    (root / "blob.bin").write_bytes(b"\x7fELF\x00\x01" + CANARY.encode())
    (root / "latin1.txt").write_bytes(f"caf\xe9 {CANARY}\n".encode("latin-1"))
    (root / "big.txt").write_text(CANARY + "\n" + "x" * MAX_PREVIEW_BYTES)
    os.mkfifo(root / "pipe")
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "SIGNOFF_LEAK_CANARY": CANARY,
        "COLUMNS": "200",
    }
    env.pop("SIGNOFF_SECRET", None)
    # with a root the database lives inside it, the worst place an operator could put it
    db = f"sqlite:///{root / 'serve.db'}" if with_root else f"sqlite:///{base / 'serve.db'}"
    extra = ("--preview-root", str(root)) if with_root else ()
    server = start_server(db, free_port(), env, *extra, cwd=str(root))
    try:
        yield Setup(server, agent_token(server), home, outside, root if with_root else None)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """A server started without --preview-root (the default), cwd holding readable files."""
    yield from _start(tmp_path_factory.mktemp("bare"), with_root=False)


@pytest.fixture(scope="module")
def rooted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """A server with --preview-root DIR, its own database inside DIR."""
    yield from _start(tmp_path_factory.mktemp("rooted"), with_root=True)


def _submit(setup: Setup, args: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Submit a file-edit call as the agent; the request's preview and every byte sent back."""
    with httpx.Client(base_url=setup.server.base, timeout=30) as http:
        made = http.post(
            f"{API}/requests",
            json={
                "session_id": "s",
                "kind": "approval",
                "tool_name": "write_file",
                "tool_args": args,
            },
            headers=bearer(setup.token),
        )
        assert made.status_code == 201, made.text
        again = http.get(f"{API}/requests/{made.json()['id']}", headers=bearer(setup.token))
        listed = http.get(f"{API}/requests", headers=bearer(setup.token))
    preview: dict[str, Any] = made.json()["preview"]
    return preview, made.text + again.text + listed.text


def _assert_not_read(preview: dict[str, Any], seen: str) -> None:
    for secret in (CANARY, PASSWD, "SQLite format"):
        assert secret not in seen, seen[:2000]
    assert preview["old_source"] in ("agent", "none"), preview
    assert preview["exists"] is None, preview
    assert "not read" in preview["note"], preview


def _attacks(setup: Setup) -> list[str]:
    return [
        "/etc/passwd",
        "/proc/self/environ",
        "/proc/self/cmdline",
        "../../../../../../../../etc/passwd",
        "~/notes.txt",
        str(setup.home / "notes.txt"),
        str(setup.outside / "secret.txt"),
        setup.server.db.removeprefix("sqlite:///"),
        "/dev/zero",
    ]


def test_without_a_preview_root_no_whole_content_write_reads_the_server_disk(bare: Setup) -> None:
    """No --preview-root: a write of any path shows only the new content, the old as unknown."""
    for path in [*_attacks(bare), "notes.md"]:
        preview, seen = _submit(bare, {"path": path, "content": "new\n"})
        _assert_not_read(preview, seen)
        assert preview["old_source"] == "none" and preview["old"] == "", preview
        assert preview["new"] == "new\n" and "+new" in preview["diff"]


def test_without_a_preview_root_a_replace_edit_shows_the_agents_strings_as_its_own(
    bare: Setup,
) -> None:
    """No --preview-root: a replace edit shows old/new as the agent sent them, marked so."""
    for path in _attacks(bare):
        preview, seen = _submit(bare, {"path": path, "old_string": "root", "new_string": "toor"})
        _assert_not_read(preview, seen)
        assert preview["old_source"] == "agent" and preview["old"] == "root", preview
        assert "-root" in preview["diff"] and "+toor" in preview["diff"]
        assert "the old text is what the agent sent" in preview["note"]


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/etc/passwd", "outside the preview root"),
        ("/proc/self/environ", "outside the preview root"),
        ("../outside/secret.txt", "outside the preview root"),
        ("~/notes.txt", "~ paths are not expanded"),
        ("escape", "outside the preview root"),
        ("out/secret.txt", "outside the preview root"),
        ("passwd", "outside the preview root"),
        ("/dev/zero", "outside the preview root"),
        ("serve.db", "one of the server's own files"),
        ("serve.db-wal", "one of the server's own files"),
        ("serve.db.secret", "one of the server's own files"),
        ("blob.bin", "a binary file"),
        ("latin1.txt", "not UTF-8 text"),
        ("big.txt", f"larger than {MAX_PREVIEW_BYTES} bytes"),
        ("pipe", "not a regular file"),
        (".", "not a regular file"),
    ],
)
def test_with_a_preview_root_nothing_outside_it_or_unfit_is_read(
    rooted: Setup, path: str, reason: str
) -> None:
    """--preview-root: escapes, system and device files, server files, binaries: not read."""
    for args in (
        {"path": path, "content": "new\n"},
        {"path": path, "old_string": "root", "new_string": "toor"},
    ):
        preview, seen = _submit(rooted, args)
        _assert_not_read(preview, seen)
        assert reason in preview["note"], preview


def test_with_a_preview_root_a_text_file_inside_it_is_previewed(rooted: Setup) -> None:
    """--preview-root: a text file inside it is read, by relative or absolute path."""
    assert rooted.root is not None
    for path in ("notes.md", str(rooted.root / "notes.md")):
        preview, _ = _submit(rooted, {"path": path, "content": "hello world\n"})
        assert preview["old_source"] == "file" and preview["exists"] is True, preview
        assert preview["old"] == "hello preview\n" and preview["note"] is None
        assert "-hello preview" in preview["diff"] and "+hello world" in preview["diff"]
    edited, _ = _submit(
        rooted, {"path": "notes.md", "old_string": "preview", "new_string": "there"}
    )
    assert edited["old_source"] == "file" and edited["new"] == "hello there\n", edited
    fresh, _ = _submit(rooted, {"path": "docs/new.md", "content": "hi\n"})
    assert fresh["old_source"] == "file" and fresh["exists"] is False, fresh


def test_serve_refuses_a_preview_root_that_is_not_a_directory(tmp_path: Path) -> None:
    """--preview-root naming no directory: one error line, exit 3, no server."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "signoff",
            "serve",
            "--port",
            str(free_port()),
            "--db",
            f"sqlite:///{tmp_path / 'x.db'}",
            "--preview-root",
            str(tmp_path / "missing"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("error: --preview-root:") and "not a directory" in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_signoff_show_says_the_old_text_is_the_agents(bare: Setup) -> None:
    """signoff show labels a preview built from the agent's strings, not the file."""
    with httpx.Client(base_url=bare.server.base, timeout=30) as http:
        made = http.post(
            f"{API}/requests",
            json={
                "session_id": "s",
                "kind": "approval",
                "tool_name": "edit_file",
                "tool_args": {"path": "/etc/passwd", "old_string": "a", "new_string": "b"},
            },
            headers=bearer(bare.token),
        )
    assert made.status_code == 201, made.text
    shown = bare.server.cli("show", made.json()["id"])
    assert shown.returncode == 0, shown.stderr
    assert "old text supplied by the agent" in shown.stdout and PASSWD not in shown.stdout
