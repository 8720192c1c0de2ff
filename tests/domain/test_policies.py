"""tools.toml policy: precedence, rules, globs, governance, and refusing bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from signoff.domain.policies import Policy, PolicyFile
from signoff.errors import PolicyError

PROJECT = """
[tools]
need_approval = ["shell", "fs.*"]

[governance]
approvers = ["alice"]

[[rules]]
tool = "shell"
args = { command = "rm *" }
action = "deny"
name = "no-rm"

[[rules]]
tool = "shell"
args = { command = "ls*" }
action = "allow"

[[rules]]
tool = "pay"
args = { amount = "1??" }
action = "ask"
quorum = 2
"""

GLOBAL = """
[tools]
need_approval = ["deploy"]
default = "deny"

[governance]
approvers = ["bob"]
allow_self_approval = true

[[rules]]
tool = "shell"
action = "allow"
name = "global-shell"
"""


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A project dir with .signoff/tools.toml and a global tools.toml."""
    project = tmp_path / "project"
    (project / ".signoff").mkdir(parents=True)
    (project / ".signoff" / "tools.toml").write_text(PROJECT)
    glob = tmp_path / "global.toml"
    glob.write_text(GLOBAL)
    return project, glob


def test_first_matching_rule_wins_and_project_comes_first(dirs: tuple[Path, Path]) -> None:
    """Project rules come before global rules; within a file the first match wins."""
    project, glob = dirs
    policy = Policy.load(project, global_path=glob)
    denied = policy.evaluate("shell", {"command": "rm -rf /"})
    assert denied.verdict == "deny" and denied.rule == 'rules[0] "no-rm"'
    assert denied.source.endswith(".signoff/tools.toml")
    assert policy.evaluate("shell", {"command": "ls -la"}).verdict == "allow"
    other = policy.evaluate("shell", {"command": "make"})
    assert other.verdict == "allow" and other.rule == 'rules[0] "global-shell"'
    assert other.source == str(glob)


def test_need_approval_globs_then_default(dirs: tuple[Path, Path]) -> None:
    """need_approval globs ask; tools matched nowhere take the first default."""
    project, glob = dirs
    policy = Policy.load(project, global_path=glob)
    assert policy.evaluate("fs.write", {}).verdict == "ask"
    assert policy.evaluate("deploy", {}).rule == 'need_approval "deploy"'
    unknown = policy.evaluate("mystery", {})
    assert unknown.verdict == "deny" and unknown.rule == "default"


def test_argument_patterns_match_non_strings_and_need_the_key(dirs: tuple[Path, Path]) -> None:
    """Non-string args match by their JSON text; a missing key never matches."""
    project, _ = dirs
    policy = Policy.load(project, global_path=project / "absent.toml")
    assert policy.evaluate("pay", {"amount": 150}).verdict == "ask"
    assert policy.evaluate("pay", {"amount": 150}).governance.quorum == 2
    assert policy.evaluate("pay", {"amount": 1500}).rule == "not in need_approval"
    assert policy.evaluate("shell", {}).rule == 'need_approval "shell"'


def test_governance_overlay(dirs: tuple[Path, Path]) -> None:
    """Rule overrides lie over the first file's [governance], over the built-in defaults."""
    project, glob = dirs
    policy = Policy.load(project, global_path=glob)
    ask = policy.evaluate("pay", {"amount": "100"})
    assert ask.governance.approvers == ("alice",)
    assert ask.governance.quorum == 2
    assert ask.governance.allow_self_approval is False
    only_global = Policy.load(glob.parent / "nowhere", global_path=glob)
    assert only_global.evaluate("deploy", {}).governance.approvers == ("bob",)
    assert only_global.evaluate("deploy", {}).governance.allow_self_approval is True


def test_no_files_fails_closed(tmp_path: Path) -> None:
    """With no tools.toml anywhere every call asks."""
    policy = Policy.load(tmp_path, global_path=tmp_path / "none.toml")
    decision = policy.evaluate("anything", {})
    assert decision.verdict == "ask" and policy.files == ()
    assert "fail closed" in decision.explain()


def test_nearest_parent_is_found(dirs: tuple[Path, Path]) -> None:
    """A subdirectory of the project uses the project's tools.toml."""
    project, glob = dirs
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    assert Policy.load(deep, global_path=glob).evaluate("fs.read", {}).verdict == "ask"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[tools\n", "not valid TOML"),
        ("[tools]\nneed_aproval = []\n", "tools.need_aproval: unknown key"),
        ('[[rules]]\ntool = "x"\naction = "maybe"\n', "rules[0].action: must be one of"),
        ('[[rules]]\naction = "deny"\n', "rules[0].tool"),
        ("[governance]\nquorum = 0\n", "governance.quorum"),
        ('[tools]\nneed_approval = "shell"\n', "tools.need_approval"),
        ('[[rules]]\ntool = "x"\naction = "deny"\nargs = { n = 1 }\n', "rules[0].args.n"),
    ],
)
def test_invalid_files_are_refused_naming_file_and_place(text: str, words: str) -> None:
    """Every malformed tools.toml raises PolicyError naming the source and the problem."""
    with pytest.raises(PolicyError) as caught:
        PolicyFile.parse(text, "/p/.signoff/tools.toml")
    assert caught.value.message.startswith("/p/.signoff/tools.toml: ")
    assert words in caught.value.message
