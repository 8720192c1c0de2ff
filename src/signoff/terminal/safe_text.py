"""Agent-supplied text made safe to show in a terminal: controls and bidi marks made visible.

An agent chooses its tool name, arguments, prompt, options and reasons. Printed raw, an ESC
sequence can erase the line and print another tool name over it, set the terminal's title,
or a right-to-left override can reverse what follows. :func:`visible` turns every such
character into a visible escape (``\\x1b``, ``\\u202e``) before rich or Textual sees the
text; :func:`visible_json` does the same to JSON text with JSON's own escapes, so what is
shown stays valid JSON that parses back to exactly the value the agent sent.
"""

from __future__ import annotations

import json
import re

__all__ = ["HIDDEN_RANGES", "dumps_visible", "visible", "visible_json"]

# Controls and characters with no glyph of their own, as code point ranges: the Unicode
# categories Cc (C0, DEL, C1), Cf (bidi embeddings, overrides, isolates and marks, zero-width
# (non-)joiners and spaces, word joiner, BOM, soft hyphen, tags...), Cs (lone surrogates), Zl
# and Zp (line and paragraph separators), plus the invisible fillers of other categories
# (combining grapheme joiner, Hangul and Khmer fillers). Written out rather than computed
# from unicodedata at import (half a second per command); tests/terminal/test_safe_text.py
# checks it covers every Cc, Cf, Cs, Zl and Zp character this Python knows.
HIDDEN_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x001F),
    (0x007F, 0x009F),
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xD800, 0xDFFF),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE007F),
)
"""Every code point shown as an escape (inclusive ranges)."""

_HIDDEN = re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in HIDDEN_RANGES) + "]")
_KEEP_LINES = frozenset("\n\t")


def _escape(char: str) -> str:
    """The visible escape of one character: ``\\x1b``, ``\\u202e`` or ``\\U000e0001``."""
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible(text: str, *, multiline: bool = True) -> str:
    """``text`` with every control, bidi and invisible format character shown as an escape.

    Newlines and tabs stay when ``multiline`` (prompts, reasons, diffs); in single-line
    fields (a tool name, an option) they are escaped too, so nothing can start a new line.
    """

    def sub(match: re.Match[str]) -> str:
        char = match.group()
        return char if multiline and char in _KEEP_LINES else _escape(char)

    return _HIDDEN.sub(sub, text)


def _json_escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _KEEP_LINES:
        return char
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def visible_json(text: str) -> str:
    """JSON text (as any serializer writes it) with hidden characters as JSON ``\\u`` escapes.

    A serializer escapes C0 controls inside strings already but leaves DEL, C1, bidi and
    format characters raw; outside strings it writes only spaces, tabs and newlines, which
    stay. The result parses to the same value.
    """
    return _HIDDEN.sub(_json_escape, text)


def dumps_visible(value: object, *, indent: int | None = None, sort_keys: bool = False) -> str:
    """``value`` as JSON text safe to print: :func:`json.dumps` then :func:`visible_json`."""
    return visible_json(json.dumps(value, indent=indent, ensure_ascii=False, sort_keys=sort_keys))
