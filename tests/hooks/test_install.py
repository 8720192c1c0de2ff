"""``signoff hook install``: signoff's hook merged into each agent's own settings file.

The merge is tested as a pure function on parsed settings; the file handling and the
command line through ``.venv/bin/signoff`` as a real process, with ``HOME`` and
``XDG_CONFIG_HOME`` pointed at temporary directories.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from signoff.errors import AgentSettingsError
from signoff.integrations.hooks.contracts import AGENTS, AgentName
from signoff.integrations.hooks.install import (
    BACKUP_SUFFIX,
    HookSpec,
    holds_hook,
    hook_command,
    hook_spec,
    install,
    merge,
    settings_file,
    snippet,
    warnings_for,
)

SIGNOFF = str(Path(sys.executable).parent / "signoff")
"""The console script of this checkout's virtualenv, run as a person would run it."""

FILES: dict[AgentName, str] = {
    "claude-code": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
    "cursor": ".cursor/hooks.json",
}

EVENTS: dict[AgentName, tuple[str, ...]] = {
    "claude-code": ("PreToolUse",),
    "codex": ("PreToolUse",),
    "gemini": ("BeforeTool",),
    "cursor": ("beforeShellExecution", "beforeMCPExecution", "preToolUse"),
}


def spec_for(agent: AgentName, executable: str = "/opt/signoff/bin/signoff") -> HookSpec:
    """The hook as install would write it for ``agent``, with a made-up executable."""
    return hook_spec(agent, executable=executable)


def alone(agent: AgentName) -> Any:
    """signoff's hook alone, as install writes it for ``agent`` (read like any JSON)."""
    return snippet(spec_for(agent))


def others_settings(agent: AgentName) -> dict[str, Any]:
    """A settings file someone already uses: another hook on our event, other keys."""
    if agent == "cursor":
        return {
            "version": 1,
            "hooks": {
                "beforeShellExecution": [{"command": "./audit.sh"}],
                "afterFileEdit": [{"command": "./format.sh"}],
            },
        }
    event = EVENTS[agent][0]
    theirs = {"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint.sh"}]}
    return {
        "model": "their-model",
        "permissions": {"allow": ["Bash(ls)"]},
        "hooks": {event: [theirs], "Stop": [{"hooks": [{"type": "command", "command": "x"}]}]},
    }


def ours(agent: AgentName, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Every handler in ``settings`` that runs ``signoff hook AGENT``."""
    found = []
    for event in EVENTS[agent]:
        for entry in settings["hooks"].get(event, []):
            handlers = [entry] if agent == "cursor" else entry["hooks"]
            found += [h for h in handlers if " hook " + agent in h["command"]]
    return found


def run_cli(
    *args: str, cwd: Path, home: Path, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``signoff ARGS`` in ``cwd`` with its own HOME and XDG_CONFIG_HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIGNOFF_", "CODEX_"))}
    env |= {"HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"), **(extra_env or {})}
    return subprocess.run(
        [SIGNOFF, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def place(tmp_path: Path) -> tuple[Path, Path]:
    """A project directory and a home directory, both empty."""
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    return project, home


# --- the merge, pure -----------------------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS)
def test_merge_keeps_others_hooks_and_keys(agent: AgentName) -> None:
    """Others' hooks on the same event, other events and every other key stay as they were."""
    before = others_settings(agent)
    merged: Any = merge(spec_for(agent), json.loads(json.dumps(before)))
    for key, value in before.items():
        if key != "hooks":
            assert merged[key] == value
    for event, entries in before["hooks"].items():
        assert merged["hooks"][event][: len(entries)] == entries
    assert ours(agent, merged)


@pytest.mark.parametrize("agent", AGENTS)
def test_merge_twice_is_merge_once(agent: AgentName) -> None:
    """A second merge replaces signoff's entry instead of adding another."""
    once = merge(spec_for(agent), others_settings(agent))
    assert merge(spec_for(agent), once) == once


@pytest.mark.parametrize("agent", AGENTS)
def test_an_older_signoff_entry_is_replaced(agent: AgentName) -> None:
    """An entry from another signoff install (other path, other timeout) is recognised."""
    old = merge(hook_spec(agent, executable="/old/venv/bin/signoff", timeout=120), {})
    new = merge(spec_for(agent), old)
    assert new == snippet(spec_for(agent))
    assert "/old/venv" not in json.dumps(new)


@pytest.mark.parametrize("agent", AGENTS)
def test_holds_hook_finds_signoffs_entry_only(agent: AgentName) -> None:
    """Settings running ``signoff hook AGENT`` are told apart from others' and broken ones."""
    assert holds_hook(agent, merge(spec_for(agent), others_settings(agent)))
    assert not holds_hook(agent, others_settings(agent))
    other = next(a for a in AGENTS if a != agent)
    assert not holds_hook(agent, merge(spec_for(other), {}))
    assert not holds_hook(agent, {"hooks": {EVENTS[agent][0]: "broken"}})


def test_only_signoffs_handler_leaves_a_shared_group() -> None:
    """A group holding signoff's handler and someone else's keeps theirs alone."""
    spec = spec_for("claude-code")
    group = {
        "matcher": "Bash",
        "hooks": [
            {"type": "command", "command": spec.command, "timeout": 30},
            {"type": "command", "command": "echo signoff hook claude-code"},
        ],
    }
    merged: Any = merge(spec, {"hooks": {"PreToolUse": [group]}})
    first, second = merged["hooks"]["PreToolUse"]
    assert first == {"matcher": "Bash", "hooks": [group["hooks"][1]]}
    assert second == alone("claude-code")["hooks"]["PreToolUse"][0]


@pytest.mark.parametrize(
    ("agent", "settings", "says"),
    [
        ("claude-code", [], "a list, not a JSON object"),
        ("claude-code", {"hooks": []}, '"hooks" in the settings is a list'),
        ("claude-code", {"hooks": {"PreToolUse": {}}}, '"hooks.PreToolUse" in the settings'),
        ("codex", {"hooks": {"PreToolUse": ["x"]}}, "[0] is a string, not an object"),
        ("codex", {"hooks": {"PreToolUse": [{"matcher": "Bash"}]}}, 'has no "hooks" list'),
        ("gemini", {"hooks": {"BeforeTool": [{"hooks": [1]}]}}, ".hooks[0] is a number"),
        ("cursor", {"version": 2, "hooks": {}}, '"version": 2; signoff knows version 1'),
        ("cursor", {"hooks": {"preToolUse": [None]}}, "[0] is null, not an object"),
    ],
)
def test_merge_refuses_a_shape_it_does_not_know(
    agent: AgentName, settings: object, says: str
) -> None:
    """Settings that are not the agent's documented shape are refused, saying where."""
    with pytest.raises(AgentSettingsError) as raised:
        merge(spec_for(agent), settings)
    assert says in raised.value.message


def test_each_agent_gets_its_own_matcher_timeout_and_fail_closed_switch() -> None:
    """The written hook gates writes, shell and MCP (not reads) and blocks on a failure."""
    claude = alone("claude-code")["hooks"]["PreToolUse"][0]
    assert claude["matcher"] == "^(Bash|Write|Edit|MultiEdit|NotebookEdit|mcp__.*)$"
    assert claude["hooks"][0]["timeout"] == 600
    assert claude["hooks"][0]["onFailure"] == "block"
    codex = alone("codex")["hooks"]["PreToolUse"][0]
    assert codex["matcher"] == "^(Bash|apply_patch|Edit|Write|mcp__.*)$"
    gemini = alone("gemini")["hooks"]["BeforeTool"][0]
    assert gemini["matcher"] == "^(write_file|replace|run_shell_command|mcp_.*)$"
    assert gemini["hooks"][0]["timeout"] == 600_000  # milliseconds
    cursor = alone("cursor")["hooks"]
    assert [h["matcher"] for h in cursor["preToolUse"]] == ["Write", "Edit", "StrReplace", "Delete"]
    handlers = [h for event in EVENTS["cursor"] for h in cursor[event]]
    assert all(h["failClosed"] is True and h["timeout"] == 600 for h in handlers)
    for agent in AGENTS:
        assert "--timeout 570 " in spec_for(agent).command  # signoff gives up first


@pytest.mark.parametrize(
    ("agent", "settings", "says"),
    [
        ("claude-code", {"disableAllHooks": True}, '"disableAllHooks": true'),
        ("gemini", {"hooksConfig": {"enabled": False}}, '"hooksConfig": {"enabled": false}'),
        ("gemini", {"hooksConfig": {"disabled": ["signoff"]}}, "hooksConfig.disabled"),
    ],
)
def test_settings_that_switch_hooks_off_are_warned_about(
    agent: AgentName, settings: dict[str, Any], says: str, tmp_path: Path
) -> None:
    """A setting that would keep the agent from running the hook is named."""
    (warning,) = warnings_for(agent, settings, tmp_path / "settings.json")
    assert says in warning
    assert warnings_for(agent, {}, tmp_path / "settings.json") == []


def test_codex_hooks_switched_off_in_config_toml_is_warned_about(tmp_path: Path) -> None:
    """``[features] hooks = false`` beside Codex's hooks.json is named; the file is not edited."""
    config = tmp_path / "config.toml"
    config.write_text("# mine\n[features]\nhooks = false\n")
    (warning,) = warnings_for("codex", {}, tmp_path / "hooks.json")
    assert "[features] hooks = false" in warning
    assert config.read_text() == "# mine\n[features]\nhooks = false\n"


def test_settings_file_for_each_scope(tmp_path: Path) -> None:
    """Project files under the directory, user files under the home (Codex: CODEX_HOME)."""
    cwd, home = tmp_path / "p", tmp_path / "h"
    for agent, name in FILES.items():
        assert settings_file(agent, "project", cwd=cwd, home=home) == cwd / name
        assert settings_file(agent, "user", cwd=cwd, home=home) == home / name
    codex_home = tmp_path / "codex-home"
    found = settings_file("codex", "user", cwd=cwd, home=home, codex_home=codex_home)
    assert found == codex_home / "hooks.json"


# --- the command line the agent runs ----------------------------------------------------------


def test_the_installed_command_runs_signoff_and_a_missing_one_blocks(tmp_path: Path) -> None:
    """The command line runs (path with a space, quoted) and a missing signoff exits 2."""
    spaced = tmp_path / "with space"
    spaced.mkdir()
    (spaced / "signoff").symlink_to(SIGNOFF)
    command = hook_command("claude-code", executable=str(spaced / "signoff"), wait=5)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    env |= {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    ran = subprocess.run(
        ["/bin/sh", "-c", command],
        input="not json",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert ran.returncode == 2  # signoff's own deny on bad input: blocked
    assert json.loads(ran.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    missing = hook_command("claude-code", executable=str(tmp_path / "gone" / "signoff"), wait=5)
    ran = subprocess.run(
        ["/bin/sh", "-c", missing], input="{}", capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 2
    assert ran.stderr  # "not found": the reason the agent shows


# --- file handling ---------------------------------------------------------------------------


def test_install_keeps_a_backup_and_the_mode(tmp_path: Path) -> None:
    """The previous file is kept byte for byte beside the new one; its mode is kept."""
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    before = '{"model": "x",\n "hooks": {}}'
    path.write_text(before)
    path.chmod(0o640)  # not what a new temporary file gets
    done = install(spec_for("claude-code"), path)
    assert done.changed
    assert done.backup == path.with_name("settings.json" + BACKUP_SUFFIX)
    assert done.backup.read_text() == before
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert json.loads(path.read_text())["model"] == "x"
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_install_writes_through_a_symlinked_settings_file(tmp_path: Path) -> None:
    """A settings file that is a link (a dotfiles checkout) stays a link to the merged file."""
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text("{}")
    link = tmp_path / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(real)
    install(spec_for("claude-code"), link)
    assert link.is_symlink()
    assert ours("claude-code", json.loads(real.read_text()))


@pytest.mark.parametrize("content", ["{not json", "[]", '{"hooks": "none"}', "\xff\xfe"])
def test_install_leaves_a_file_it_cannot_merge_as_it_is(tmp_path: Path, content: str) -> None:
    """Not JSON, not an object, hooks of another shape, not UTF-8: refused, nothing written."""
    path = tmp_path / "hooks.json"
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(AgentSettingsError):
        install(spec_for("codex"), path)
    assert path.read_bytes() == content.encode("latin-1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hooks.json"]


# --- the command, as a real process ------------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS)
def test_install_merges_into_the_project_file_and_twice_is_the_same_bytes(
    agent: AgentName, place: tuple[Path, Path]
) -> None:
    """Into an existing project file: others' hooks kept, a backup, and a rerun changes nothing."""
    project, home = place
    path = project / FILES[agent]
    path.parent.mkdir()
    path.write_text(json.dumps(others_settings(agent)))
    first = run_cli("hook", "install", agent, cwd=project, home=home)
    assert first.returncode == 0, first.stderr
    written = path.read_bytes()
    settings = json.loads(written)
    assert settings == merge(spec_for(agent, SIGNOFF), others_settings(agent))
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    assert json.loads(backup.read_text()) == others_settings(agent)
    second = run_cli("hook", "install", agent, "--project", cwd=project, home=home)
    assert second.returncode == 0, second.stderr
    assert path.read_bytes() == written
    assert json.loads(backup.read_text()) == others_settings(agent)  # not overwritten
    assert "already in" in second.stdout
    assert not (home / "config" / "signoff").exists()  # no server given: nothing saved


def test_user_install_honours_home_and_codex_home(place: tuple[Path, Path]) -> None:
    """--user writes under $HOME (Codex: $CODEX_HOME) and leaves the project alone."""
    project, home = place
    done = run_cli("hook", "install", "gemini", "--user", cwd=project, home=home)
    assert done.returncode == 0, done.stderr
    assert ours("gemini", json.loads((home / ".gemini" / "settings.json").read_text()))
    codex_home = home / "elsewhere"
    done = run_cli(
        "hook",
        "install",
        "codex",
        "--user",
        cwd=project,
        home=home,
        extra_env={"CODEX_HOME": str(codex_home)},
    )
    assert done.returncode == 0, done.stderr
    assert ours("codex", json.loads((codex_home / "hooks.json").read_text()))
    assert "/hooks" in done.stderr  # the trust step Codex needs
    assert list(project.iterdir()) == []
    done = run_cli("hook", "install", "gemini", cwd=project, home=home)
    assert done.returncode == 0, done.stderr
    assert f"also in {home / '.gemini' / 'settings.json'}" in done.stderr  # asked twice


def test_codex_project_install_warns_when_the_users_config_turns_hooks_off(
    place: tuple[Path, Path],
) -> None:
    """The user's ``[features] codex_hooks = false`` switches project hooks off too: said."""
    project, home = place
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text("[features]\ncodex_hooks = false\n")
    done = run_cli("hook", "install", "codex", cwd=project, home=home)
    assert done.returncode == 0, done.stderr
    assert f"warning: {config} has [features] codex_hooks = false" in done.stderr
    assert config.read_text() == "[features]\ncodex_hooks = false\n"


def test_print_shows_the_snippet_and_writes_nothing(place: tuple[Path, Path]) -> None:
    """--print: the JSON to add on stdout, the file on stderr; no file, no credentials."""
    project, home = place
    done = run_cli(
        "hook",
        "install",
        "cursor",
        "--print",
        "--server",
        "http://127.0.0.1:9",
        "--token",
        "agent-secret",
        cwd=project,
        home=home,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == snippet(spec_for("cursor", SIGNOFF))
    assert str(project / ".cursor" / "hooks.json") in done.stderr
    assert list(project.iterdir()) == []
    assert list(home.iterdir()) == []


def test_server_and_token_go_to_a_private_file_not_the_project(place: tuple[Path, Path]) -> None:
    """--server/--token: saved 0600 in signoff's config dir; the project file holds neither."""
    project, home = place
    done = run_cli(
        "hook",
        "install",
        "claude-code",
        "--server",
        "http://127.0.0.1:9/",
        "--token",
        "agent-secret",
        cwd=project,
        home=home,
    )
    assert done.returncode == 0, done.stderr
    saved = home / "config" / "signoff" / "hook.json"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert json.loads(saved.read_text()) == {
        "server": "http://127.0.0.1:9",
        "token": "agent-secret",
    }
    written = (project / FILES["claude-code"]).read_text()
    assert "agent-secret" not in written
    assert "127.0.0.1" not in written
    (handler,) = ours("claude-code", json.loads(written))
    assert shlex.split(handler["command"])[:3] == [SIGNOFF, "hook", "claude-code"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["hook", "install", "aider"], "unknown agent 'aider'"),
        (["hook", "install", "gemini", "--server", "http://x"], "--server and --token go"),
        (["hook", "install", "gemini", "--server", "ftp://x", "--token", "t"], "http://"),
        (["hook", "install", "gemini", "--timeout", "5"], "--timeout must be"),
        (
            ["hook", "install", "gemini", "--server", "http://127.0.0.1:9", "--token", "t"],
            "is not valid JSON",
        ),
    ],
)
def test_bad_input_is_one_error_line_exit_3_and_nothing_written(
    args: list[str], says: str, place: tuple[Path, Path]
) -> None:
    """A wrong agent, option or settings file: one ``error:`` line, exit 3, nothing changed."""
    project, home = place
    broken = project / FILES["gemini"]
    broken.parent.mkdir()
    broken.write_text('{"hooks": {"BeforeTool": [}')
    done = run_cli(*args, cwd=project, home=home)
    assert done.returncode == 3, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: ")
    assert says in line
    assert "Traceback" not in done.stderr
    assert broken.read_text() == '{"hooks": {"BeforeTool": [}'
    assert sorted(p.name for p in broken.parent.iterdir()) == ["settings.json"]
    assert list(home.iterdir()) == []  # no credentials saved either
