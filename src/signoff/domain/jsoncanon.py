"""Canonical JSON: one byte string per JSON value, so digests and hashes are stable."""

from __future__ import annotations

import hashlib
import json

__all__ = ["canonical_json", "sha256_hex"]


def canonical_json(value: object) -> str:
    """Serialize ``value`` with sorted keys, no spaces and no NaN: equal values, equal text."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def sha256_hex(text: str) -> str:
    """The hex sha256 of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
