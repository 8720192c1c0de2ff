"""Argument patterns: how a rule's or a grant's globs match a call's arguments.

Two matchers, because a pattern can widen what runs or narrow it, and each must fail
closed in its own direction:

- **strict** (allow rules and standing grants, which let calls run without a person):
  ``*`` and ``?`` stop at ``/`` (``**`` crosses it, ``**/`` also matches no directory);
  path arguments are normalized first (``/tmp/../root/x`` is ``/root/x``); a shell
  command containing ``;``, ``&``, ``|``, a backtick, ``$(``, ``<``, ``>`` or a line break
  matches only a pattern that contains the same; and the call may have no argument the
  pattern does not name (unless ``extra_args = "ignore"``).
- **permissive** (deny and ask rules, which hold calls back): ``*`` crosses ``/``, extra
  arguments are ignored, a path matches if it does as written or normalized, and a
  compound command matches if it does whole or any of its parts does
  (``ls; rm -rf /`` is caught by ``rm *``).

Which arguments are paths and which are shell commands is decided by the key's name
(:data:`PATH_KEYS`, :data:`COMMAND_KEYS`, and the suffixes beside them), and a pattern
that starts with ``/``, ``./``, ``../`` or ``~/`` is a path pattern whatever its key.
Non-string values are matched by their canonical JSON text.
"""

from __future__ import annotations

import fnmatch
import functools
import posixpath
import re
from collections.abc import Mapping
from typing import Literal, TypeAlias

from signoff.domain.jsoncanon import canonical_json

__all__ = [
    "COMMAND_KEYS",
    "PATH_KEYS",
    "SHELL_METACHARACTERS",
    "ExtraArgs",
    "args_mismatch",
    "command_parts",
    "is_command_key",
    "is_path_key",
    "match_args",
    "normalize_path",
    "strict_glob_match",
]

ExtraArgs: TypeAlias = Literal["forbid", "ignore"]

PATH_KEYS = frozenset(
    {
        "path",
        "file",
        "file_path",
        "filepath",
        "filename",
        "file_name",
        "dir",
        "dirname",
        "directory",
        "folder",
        "cwd",
        "workdir",
        "working_dir",
        "working_directory",
    }
)
"""Argument names whose values are file system paths (also any name ending ``_path``,
``_file``, ``_dir`` or ``_directory``)."""

COMMAND_KEYS = frozenset(
    {"command", "cmd", "script", "shell", "bash", "sh", "command_line", "commandline", "cmdline"}
)
"""Argument names whose values are shell commands (also any name ending ``_command``
or ``_cmd``)."""

SHELL_METACHARACTERS = (";", "&", "|", "`", "$(", "<", ">", "\n", "\r")
"""What chains, pipes, substitutes or redirects in a shell command (``&`` covers ``&&``,
``|`` covers ``||``)."""

_PATH_SUFFIXES = ("_path", "_file", "_dir", "_directory")
_COMMAND_SUFFIXES = ("_command", "_cmd")
_PATH_PREFIXES = ("/", "./", "../", "~/")
_SPLIT = re.compile(r";|&&|\|\||\||&|\n|\r|`|\$\(|[(){}]")


def is_path_key(key: str, glob: str = "") -> bool:
    """Whether the argument ``key`` (matched against ``glob``) holds a path."""
    name = key.lower()
    return name in PATH_KEYS or name.endswith(_PATH_SUFFIXES) or glob.startswith(_PATH_PREFIXES)


def is_command_key(key: str) -> bool:
    """Whether the argument ``key`` holds a shell command."""
    name = key.lower()
    return name in COMMAND_KEYS or name.endswith(_COMMAND_SUFFIXES)


def normalize_path(text: str) -> str:
    """``text`` with ``.``, ``..`` and repeated slashes resolved lexically (never on disk)."""
    if not text:
        return text
    norm = posixpath.normpath(text)
    if norm.startswith("//"):  # POSIX keeps a leading "//"; the kernel treats it as "/"
        norm = "/" + norm.lstrip("/")
    return norm


def command_parts(command: str) -> list[str]:
    """The simple commands a compound shell command is made of, stripped, non-empty."""
    return [p.strip() for p in _SPLIT.split(command) if p.strip()]


@functools.lru_cache(maxsize=1024)
def _strict_regex(glob: str) -> re.Pattern[str]:
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        elif glob[i] == "[":
            end = glob.find("]", i + 2 if glob.startswith("[!", i) else i + 1)
            if end < 0:
                out.append(re.escape("["))
                i += 1
                continue
            body = glob[i + 1 : end]
            if body.startswith("!"):
                out.append("[^/" + re.escape(body[1:]).replace(r"\-", "-") + "]")
            else:
                out.append("[" + re.escape(body).replace(r"\-", "-") + "]")
            i = end + 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def strict_glob_match(text: str, glob: str) -> bool:
    """Whether ``text`` matches ``glob`` with ``*`` and ``?`` stopping at ``/``."""
    return _strict_regex(glob).fullmatch(text) is not None


def _strict_value(key: str, glob: str, value: object) -> str | None:
    if not isinstance(value, str):
        text = canonical_json(value)
        return None if strict_glob_match(text, glob) else f"{key}: {text} does not match {glob!r}"
    text = normalize_path(value) if is_path_key(key, glob) else value
    if is_command_key(key):
        for meta in SHELL_METACHARACTERS:
            if meta in text and meta not in glob:
                return f"{key}: the command contains {meta!r} and the pattern {glob!r} does not"
    if strict_glob_match(text, glob):
        return None
    shown = f"{value!r} (normalized {text!r})" if text != value else repr(value)
    return f"{key}: {shown} does not match {glob!r} (* stops at /, ** crosses it)"


def _permissive_value(key: str, glob: str, value: object) -> str | None:
    if not isinstance(value, str):
        text = canonical_json(value)
        return None if fnmatch.fnmatchcase(text, glob) else f"{key}: {text} does not match {glob!r}"
    candidates = [value]
    if is_path_key(key, glob):
        candidates.append(normalize_path(value))
    if is_command_key(key):
        candidates.extend(command_parts(value))
    if any(fnmatch.fnmatchcase(c, glob) for c in candidates):
        return None
    return f"{key}: {value!r} does not match {glob!r}"


def args_mismatch(
    pattern: Mapping[str, str],
    args: Mapping[str, object],
    *,
    strict: bool,
    extra_args: ExtraArgs = "forbid",
) -> str | None:
    """Why ``args`` do not match ``pattern``, in one line; None when they match.

    ``strict`` for what lets a call run (allow rules, grants), permissive otherwise; see
    the module docstring. ``extra_args`` matters only when strict.
    """
    for key, glob in pattern.items():
        if key not in args:
            return f"{key}: the call has no such argument"
        check = _strict_value if strict else _permissive_value
        reason = check(key, glob, args[key])
        if reason is not None:
            return reason
    if strict and extra_args == "forbid":
        extra = sorted(set(args) - set(pattern))
        if extra:
            return (
                f"{extra[0]}: an argument the pattern does not name "
                '(a rule may say extra_args = "ignore")'
            )
    return None


def match_args(
    pattern: Mapping[str, str],
    args: Mapping[str, object],
    *,
    strict: bool = True,
    extra_args: ExtraArgs = "forbid",
) -> bool:
    """Whether ``args`` match ``pattern`` (strict by default: the fail-closed choice)."""
    return args_mismatch(pattern, args, strict=strict, extra_args=extra_args) is None
