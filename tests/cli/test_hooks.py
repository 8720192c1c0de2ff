"""``signoff hook`` files file edits and patches with the inbox's diff preview (issue 17).

Real processes: the hook as the agent runs it (JSON on stdin, a local SQLite database, a
one-second wait that ends in a denial), then ``signoff pending --status canceled`` and
``signoff show ID --json`` as a person would read the request it left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

CODEX_PATCH = (
    "*** Begin Patch\n"
    "*** Update File: src/app.py\n"
    "@@ def run():\n"
    "-    return 1\n"
    "+    return 2\n"
    "*** Add File: NOTES.md\n"
    "+remember the milk\n"
    "*** End Patch\n"
)


def _signoff(
    args: list[str], env: dict[str, str], stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "signoff", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")  # no saved hook settings
    return env


def _previews_after_hooks(
    tmp_path: Path, runs: list[tuple[str, dict[str, Any]]]
) -> dict[str, dict[str, Any]]:
    """Run each (agent, stdin) hook to its denial; each filed request's preview by tool."""
    db = f"sqlite:///{tmp_path / 'signoff.db'}"
    env = _env(tmp_path)
    for agent, stdin in runs:
        ran = _signoff(["hook", agent, "--db", db, "--timeout", "1"], env, json.dumps(stdin))
        assert ran.returncode == 2, ran.stderr  # nobody decided within the second
        assert "Traceback" not in ran.stderr
    listed = _signoff(["pending", "--status", "canceled", "--json", "--db", db], env)
    assert listed.returncode == 0, listed.stderr
    previews: dict[str, dict[str, Any]] = {}
    for request in json.loads(listed.stdout):
        shown = _signoff(["show", request["id"], "--json", "--db", db], env)
        assert shown.returncode == 0, shown.stderr
        record = json.loads(shown.stdout)
        previews[record["tool_name"]] = record["preview"]
    return previews


def test_multiedit_and_apply_patch_hooks_file_requests_with_their_diffs(tmp_path: Path) -> None:
    """Claude Code MultiEdit (file read) and Codex apply_patch (the patch) show the change."""
    target = tmp_path / "settings.py"
    target.write_text("DEBUG = True\nPORT = 80\nHOST = 'a'\n")
    multiedit = {
        "session_id": "cc-session",
        "transcript_path": str(tmp_path / "cc.jsonl"),
        "cwd": str(tmp_path),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "MultiEdit",
        "tool_input": {
            "file_path": str(target),
            "edits": [
                {"old_string": "DEBUG = True", "new_string": "DEBUG = False"},
                {"old_string": "PORT = 80", "new_string": "PORT = 8080"},
            ],
        },
        "tool_use_id": "toolu_01MULTI",
    }
    apply_patch = {
        "session_id": "0199a5b2-6c1e-7d30-9f3a-2b8c4d5e6f70",
        "turn_id": "turn-1",
        "transcript_path": str(tmp_path / "rollout.jsonl"),
        "cwd": str(tmp_path),
        "hook_event_name": "PreToolUse",
        "model": "gpt-5.5-codex",
        "permission_mode": "default",
        "tool_name": "apply_patch",
        "tool_input": {"command": CODEX_PATCH},
        "tool_use_id": "call_patch1",
    }
    previews = _previews_after_hooks(tmp_path, [("claude-code", multiedit), ("codex", apply_patch)])

    edit = previews["MultiEdit"]
    assert edit["path"] == str(target) and edit["old_source"] == "file"
    assert edit["new"] == "DEBUG = False\nPORT = 8080\nHOST = 'a'\n"
    for line in ("-DEBUG = True", "+DEBUG = False", "-PORT = 80", "+PORT = 8080", " HOST = 'a'"):
        assert line in edit["diff"].splitlines()

    patch = previews["apply_patch"]
    assert patch["path"] == "src/app.py" and patch["old_source"] == "agent"
    assert patch["diff"].splitlines() == [
        "--- a/src/app.py",
        "+++ b/src/app.py",
        "@@ -1,1 +1,1 @@ def run():",
        "-    return 1",
        "+    return 2",
        "--- /dev/null",
        "+++ b/NOTES.md",
        "@@ -0,0 +1,1 @@",
        "+remember the milk",
    ]
    assert "creates NOTES.md" in patch["note"]
