"""signoff.terminal.safe_text: agent text with its controls and bidi marks made visible."""

from __future__ import annotations

import itertools
import json
import sys
import unicodedata

import pytest

from signoff.terminal.safe_text import HIDDEN_RANGES, dumps_visible, visible, visible_json

NASTY = "delete_prod_database\x1b[2K\rread_file\x1b]0;pwned\x07\u202eevil\x9b31m\x7f\u200b\ufeff"


def hidden(char: str) -> bool:
    """Whether the module's ranges hold ``char``."""
    return any(a <= ord(char) <= b for a, b in HIDDEN_RANGES)


def test_every_control_bidi_and_format_character_is_covered() -> None:
    """Every Cc, Cf, Cs, Zl and Zp character this Python knows is in HIDDEN_RANGES."""
    missing = [
        f"U+{code:04X}"
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in {"Cc", "Cf", "Cs", "Zl", "Zp"}
        and not hidden(chr(code))
    ]
    assert missing == []


def test_ranges_are_sorted_and_disjoint() -> None:
    """The ranges are in order and do not overlap (a typo would show as one that does)."""
    for (_, end), (start, _) in itertools.pairwise(HIDDEN_RANGES):
        assert end < start


def test_visible_escapes_controls_and_bidi_and_keeps_the_rest() -> None:
    """ESC, CR, BEL, C1, DEL, RLO, ZWSP and BOM become escapes; letters and emoji stay."""
    shown = visible(NASTY)
    assert shown == (
        "delete_prod_database\\x1b[2K\\x0dread_file\\x1b]0;pwned\\x07\\u202eevil\\x9b31m"
        "\\x7f\\u200b\\ufeff"
    )
    assert not any(hidden(c) for c in shown)
    assert visible("café ❤ 中文 [bold]x[/bold]") == "café ❤ 中文 [bold]x[/bold]"
    assert visible("tag\U000e0041") == "tag\\U000e0041"


@pytest.mark.parametrize(
    ("multiline", "expected"), [(True, "a\nb\tc\\x0d"), (False, "a\\x0ab\\x09c\\x0d")]
)
def test_newlines_stay_only_in_multiline_text(multiline: bool, expected: str) -> None:
    """A prompt keeps its lines and tabs; a tool name cannot start a new line."""
    assert visible("a\nb\tc\r", multiline=multiline) == expected


def test_visible_json_is_json_that_parses_to_the_same_value() -> None:
    """JSON text keeps its value: hidden characters become JSON \\u escapes, even astral."""
    value = {"s": NASTY, "k\u202e": ["\U000e0041", "\u2028"], "n": 9007199254740993}
    for indent in (None, 2):
        text = dumps_visible(value, indent=indent)
        assert json.loads(text) == value
        assert not any(hidden(c) for c in text if c not in "\n")
        assert "9007199254740993" in text
    assert visible_json('"\u202e"') == '"\\u202e"'
    assert visible_json('"\U000e0041"') == '"\\udb40\\udc41"'
