"""Canonical JSON: one text per value, whatever the order its keys were built in, the same
text ``json.dumps`` gives with the canonical options (digests and audit hashes made
before stay verifiable), and no NaN."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from signoff.domain.jsoncanon import canonical_json

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON)
def test_the_text_is_json_dumps_with_the_canonical_options(value: Any) -> None:
    expected = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    assert canonical_json(value) == expected
    assert json.loads(canonical_json(value)) == value


@given(st.dictionaries(st.text(), st.integers(), min_size=2, max_size=6))
def test_key_order_does_not_change_the_text(value: dict[str, int]) -> None:
    assert canonical_json(dict(reversed(value.items()))) == canonical_json(value)


def test_no_spaces_sorted_keys_and_text_kept_as_it_is() -> None:
    assert canonical_json({"b": [1, 2], "a": "é\u2028"}) == '{"a":"é\u2028","b":[1,2]}'


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_are_refused(number: float) -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        canonical_json({"x": number})
