"""Hostile rewrites of schemathesis cases: the input an agent sends to hurt the server.

schemathesis never generates a lone surrogate (it cannot be UTF-8), never NaN (not JSON),
and rarely a number past 64 bits or a body that is not JSON at all. An agent can send all of
them: ``"\\ud800"`` is a valid JSON escape, Python's JSON reader takes ``NaN`` and ``1e999``,
and nothing stops a client writing invalid UTF-8. :func:`hostile` takes a generated case and
draws one rewrite of it: a string leaf of its body made hostile, a hostile key, a huge
number, a hostile query or path parameter, or a raw body that is broken JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from schemathesis import Case
from schemathesis.core import NotSet

from signoff.server.deps import API

__all__ = ["HOSTILE_TEXT", "HUGE_NUMBERS", "VALID_BODIES", "AnyCase", "hostile"]

HOSTILE_TEXT = (
    "\ud800",  # a lone surrogate: valid in JSON ("\ud800"), not UTF-8, so no store keeps it
    "tail\udfff",
    "\x00",  # NUL: PostgreSQL refuses it in a TEXT column
    "\x1b[2K\rread_file",  # erase the terminal line, then pretend to be a harmless tool
    "\u202ecod.exe",  # right-to-left override
    "\x1b]0;signoff\x07",  # OSC: set the terminal's title
    "\u2028\ufeff\u200b",  # line separator, BOM, zero-width space
)
"""Strings an agent chooses to break storage, terminals or pages."""


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


URL_TEXT = tuple(t for t in HOSTILE_TEXT if _utf8(t))
"""The hostile strings a URL can carry (a lone surrogate cannot be percent-encoded)."""

HUGE_NUMBERS = (2**70, -(2**70), 2**63, -(2**63) - 1, 2**64, 10**400)
"""Integers past what a 64-bit column, a float or a JavaScript number holds."""

RAW_NUMBERS = (b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e999")
"""Numbers Python's JSON reader accepts that are not JSON and no JSON writer can emit."""

_MARK = "\x01signoff-hostile\x01"

_ARGS = {"path": "/etc/x", "n": 1}
VALID_BODIES: dict[str, tuple[Any, ...]] = {
    f"POST {API}/requests": (
        {"session_id": "s", "tool_name": "write_file", "tool_args": _ARGS, "context": {"a": 1}},
        {"session_id": "s", "kind": "choice", "prompt": "which?", "options": ["a", "b"]},
        {"session_id": "s", "kind": "questions", "questions": ["why?"], "context": ["c"]},
    ),
    f"POST {API}/requests/{{request_id}}/decision": (
        {"type": "approve", "args": _ARGS},
        {"type": "approve", "scope": "session"},
        {"type": "reject", "reason": "no"},
        {"type": "respond", "feedback": "try ls"},
        {"type": "answer", "feedback": "f", "answers": {"q1": "yes"}},
    ),
    f"POST {API}/requests/{{request_id}}/claim": ({"args": _ARGS},),
    f"POST {API}/requests/{{request_id}}/result": (
        {"ok": True, "result": {"out": "done", "n": 1}},
        {"ok": False, "error": "boom"},
    ),
    f"POST {API}/requests/{{request_id}}/cancel": ({"reason": "changed my mind"},),
    f"POST {API}/decisions": ({"ids": ["req_x"], "type": "approve"},),
    f"POST {API}/resume/{{request_id}}": (
        {"action": "approve"},
        {"action": "reject", "reason": "no"},
    ),
}
"""Bodies each operation accepts (the schema alone cannot say that an approval needs a tool
name): a hostile leaf in one of these reaches the store instead of stopping at validation."""

Path = tuple[str | int, ...]
AnyCase = Case[Any]


def _leaves(value: Any, path: Path = ()) -> list[Path]:
    """Paths to every scalar in a JSON value (the value itself when it is one)."""
    if isinstance(value, dict):
        found = [p for key, item in value.items() for p in _leaves(item, (*path, key))]
        return found or [path]
    if isinstance(value, list):
        found = [p for n, item in enumerate(value) for p in _leaves(item, (*path, n))]
        return found or [path]
    return [path]


def _containers(value: Any, path: Path = ()) -> list[Path]:
    """Paths to every object in a JSON value."""
    found: list[Path] = [path] if isinstance(value, dict) else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _containers(item, (*path, key))
    elif isinstance(value, list):
        for n, item in enumerate(value):
            found += _containers(item, (*path, n))
    return found


def _get(value: Any, path: Path) -> Any:
    for step in path:
        value = value[step]
    return value


def _replace(value: Any, path: Path, change: Callable[[Any], Any]) -> Any:
    """A copy of ``value`` with the item at ``path`` replaced by ``change(item)``."""
    if not path:
        return change(value)
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, change)}
    assert isinstance(value, list) and isinstance(head, int)
    return [_replace(item, rest, change) if n == head else item for n, item in enumerate(value)]


KEYS = ("n", *HOSTILE_TEXT)
"""Keys a rewrite adds to an object: a plain one (where only the value is hostile) or not."""


@st.composite
def _spot(draw: st.DrawFn, body: Any) -> tuple[Any, Callable[[Any], Any]]:
    """Where in ``body`` a hostile value goes: the old value there and how to put a new one.

    A leaf it replaces, or a new key of one of its objects (tool arguments, context and
    edited args take any key, so a value there reaches the store).
    """
    objects = sorted(_containers(body), key=len, reverse=True)  # the deepest first
    if objects and draw(st.integers(0, 2)) == 0:
        where, key = draw(st.sampled_from(objects)), draw(st.sampled_from(KEYS))
        return None, lambda value: _replace(body, where, lambda obj: {**obj, key: value})
    leaf = draw(st.sampled_from(_leaves(body)))
    return _get(body, leaf), lambda value: _replace(body, leaf, lambda _: value)


@st.composite
def _hostile_scalar(draw: st.DrawFn, old: Any) -> Any:
    number = isinstance(old, int | float) and not isinstance(old, bool)
    if (number or old is None) and draw(st.booleans()):
        return draw(st.sampled_from(HUGE_NUMBERS))
    text = draw(st.sampled_from(HOSTILE_TEXT))
    if isinstance(old, str) and old and draw(st.booleans()):
        return old + text  # the real value with something hostile after it
    return text


@st.composite
def _hostile_json(draw: st.DrawFn, body: Any) -> Any:
    """``body`` with one leaf made hostile, or a hostile key or value added."""
    old, put = draw(_spot(body))
    return put(draw(_hostile_scalar(old)))


@st.composite
def _raw_body(draw: st.DrawFn, body: Any) -> bytes:
    """``body`` written as JSON, then broken: a non-JSON number, invalid UTF-8, cut short."""
    how = draw(st.sampled_from(["number", "number", "utf8", "cut", "empty"]))
    if how == "number":
        _, put = draw(_spot(body))
        text = json.dumps(put(_MARK)).encode()
        return text.replace(json.dumps(_MARK).encode(), draw(st.sampled_from(RAW_NUMBERS)), 1)
    text = json.dumps(body).encode()
    if how == "utf8":
        at = draw(st.integers(0, len(text)))
        bad = draw(st.sampled_from([b"\xff", b"\xed\xa0\x80", b"\xc3", b"\x80"]))
        return text[:at] + bad + text[at:]
    if how == "cut" and len(text) > 1:
        return text[: draw(st.integers(1, len(text) - 1))]
    return b""


def _wait_timeout(query: dict[str, Any]) -> dict[str, Any]:
    """A long poll's valid (or default) timeout cut to 0.2 s, so the fuzz does not sit in it."""
    timeout = query.get("timeout", 30)
    if isinstance(timeout, int | float) and not isinstance(timeout, bool) and 0.2 < timeout <= 300:
        return {**query, "timeout": 0.2}
    return query


@st.composite
def _rewrite(draw: st.DrawFn, case: AnyCase, roles: dict[str, str] | None, calm: bool) -> AnyCase:
    body, query, path_parameters = case.body, dict(case.query or {}), dict(case.path_parameters)
    headers = case.headers.copy()
    label = case.operation.label
    query_names = [p.name for p in case.operation.query]
    # hypothesis leans to the first choices, so what reaches deepest comes first
    kinds = ["valid body", "valid raw body"] if label in VALID_BODIES else []
    if query_names:
        kinds += ["query"]
    if case.media_type == "application/json" and not isinstance(body, bytes):
        kinds += ["body", "raw body"]
    if path_parameters:
        kinds += ["path"]
    kinds += ["valid" if label in VALID_BODIES else "as generated"]
    # calm: two calls in three move a request on, so that sequences go deep
    kind = kinds[-1] if calm and draw(st.integers(0, 2)) < 2 else draw(st.sampled_from(kinds))
    if kind.startswith("valid"):
        body = draw(st.sampled_from(VALID_BODIES[label]))
    elif kind.endswith("body") and isinstance(body, NotSet):
        body = {}  # an optional body left out: a hostile one goes in
    if kind.endswith("raw body"):
        body = draw(_raw_body(body))
    elif kind.endswith("body"):
        body = draw(_hostile_json(body))
    elif kind == "query":
        name = draw(st.sampled_from(query_names))
        query[name] = draw(st.one_of(st.sampled_from(URL_TEXT), st.sampled_from(HUGE_NUMBERS)))
    elif kind == "path":
        name = draw(st.sampled_from(sorted(path_parameters)))
        path_parameters[name] = f"{path_parameters[name]}{draw(st.sampled_from(URL_TEXT))}"
    if case.path.endswith("/wait"):
        query = _wait_timeout(query)
    if roles is not None:
        headers["Authorization"] = f"Bearer {roles[draw(st.sampled_from(sorted(roles)))]}"
    # a new case: schemathesis would re-check the old one's metadata against the schema,
    # and its validator cannot take a lone surrogate
    return Case(
        case.operation,
        case.method,
        case.path,
        path_parameters=path_parameters,
        headers=headers,
        cookies=dict(case.cookies),
        query=query,
        body=body,
        media_type=case.media_type,
        multipart_content_types=case.multipart_content_types,
    )


def hostile(
    roles: dict[str, str] | None = None, *, calm: bool = False
) -> Callable[[Any, AnyCase], st.SearchStrategy[AnyCase]]:
    """A schemathesis ``flatmap_case`` hook drawing one hostile rewrite of each case.

    With ``roles`` (name to bearer token), it also draws whose token the case carries.
    ``calm``: two cases in three are sent valid (for a stateful run, whose later steps
    need the earlier ones to have worked).
    """

    def flatmap_case(_context: Any, case: AnyCase) -> st.SearchStrategy[AnyCase]:
        rewritten: st.SearchStrategy[AnyCase] = _rewrite(case, roles, calm)
        return rewritten

    return flatmap_case
