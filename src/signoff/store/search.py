"""Listing requests by filter and text: what a request's searchable text is, what a search's
words are, and how each store matches them.

A search (``RequestQuery.text``) is up to :data:`MAX_TEXT` characters of words separated by
white space; a request matches when each word occurs in its searchable text (the tool's
name, its arguments' names and values, the prompt and the questions), ignoring case. Every character
of a word is literal: ``%``, ``_``, ``*``, quotes or ``NEAR(`` mean only themselves, in every
store. SQLite finds words of :data:`TRIGRAM` or more characters through an FTS5 trigram
index, PostgreSQL through a pg_trgm index, the memory store by reading every request.
"""

from __future__ import annotations

import json

from pydantic import JsonValue

from signoff.domain.requests import ApprovalRequest, ChoiceRequest, Request
from signoff.errors import InvalidRequest

__all__ = [
    "ENDED",
    "MAX_FILTER",
    "MAX_TEXT",
    "TRIGRAM",
    "check_filter",
    "fts_match",
    "like_pattern",
    "matches",
    "search_text",
    "words",
]

MAX_TEXT = 200
"""The longest search text."""
MAX_FILTER = 200
"""The longest value of an exact filter (agent, person, tool, session)."""
TRIGRAM = 3
"""Words at least this long are found through the stores' trigram indexes."""
ENDED = "ended"
"""The status filter that means any status but pending."""


def search_text(request: Request) -> str:
    """What a search looks in: the tool's name and each argument's name and value (a
    string as itself, anything else as JSON), or the prompt and options or questions.
    (The SQL stores keep it lower-cased beside the request.) A NUL in it is a space: no
    search holds one, and PostgreSQL's text cannot."""
    return _text(request).replace("\x00", " ")


def _text(request: Request) -> str:
    if isinstance(request, ApprovalRequest):
        args = (f" {key} {_plain(value)}" for key, value in request.tool_args.items())
        return request.tool_name + "".join(args)
    if isinstance(request, ChoiceRequest):
        return " ".join((request.prompt, *request.options))
    return " ".join((request.prompt or "", *(q.text for q in request.questions)))


def _plain(value: JsonValue) -> str:
    """An argument as a person would search it: a string as itself, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _storable(value: str, what: str, longest: int) -> None:
    if not value or len(value) > longest:
        raise InvalidRequest(f"{what} must be 1 to {longest} characters")
    if "\x00" in value:
        raise InvalidRequest(f"{what} must not contain NUL")
    try:
        value.encode()
    except UnicodeEncodeError:
        raise InvalidRequest(f"{what} is not valid text") from None


def check_filter(value: str | None, what: str) -> None:
    """InvalidRequest unless an exact filter's value is text a store can compare."""
    if value is not None:
        _storable(value, what, MAX_FILTER)


def words(text: str) -> list[str]:
    """A search's distinct words, lower-cased, in order; InvalidRequest for a search that is
    empty, too long or not text."""
    _storable(text, "the search text", MAX_TEXT)
    found = list(dict.fromkeys(w.lower() for w in text.split()))
    if not found:
        raise InvalidRequest("the search text has no words")
    return found


def matches(request: Request, wanted: list[str]) -> bool:
    """Whether every word (lower-cased, as :func:`words` gives them) occurs in the
    request's searchable text, ignoring case."""
    text = search_text(request).lower()
    return all(w in text for w in wanted)


def fts_match(wanted: list[str]) -> str | None:
    """The FTS5 MATCH expression for the words the trigram index can find: each a quoted
    string (quotes doubled), so nothing in it is query syntax; None when there are none."""
    long = [w for w in wanted if len(w) >= TRIGRAM]
    return " AND ".join('"' + w.replace('"', '""') + '"' for w in long) or None


def like_pattern(word: str) -> str:
    """A LIKE pattern (escape character ``\\``) for text that contains ``word``."""
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
