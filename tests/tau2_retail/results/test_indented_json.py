"""The artifact JSON form's fast path writes exactly what the standard library writes."""

from __future__ import annotations

import enum
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tau2_retail.results.atomic import dumps_json
from tau2_retail.results.indented_json import indented_json


def _stdlib(value: Any) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False)


class Colour(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()  # any code point, control characters, quotes and lone surrogates included
    | st.sampled_from([Colour.RED, Level.HIGH, -0.0, 1e300, 5e-324, 10**40])
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=5).map(tuple)
        | st.dictionaries(st.text() | st.sampled_from([Colour.RED]), inner, max_size=5)
    ),
    max_leaves=40,
)


@given(_values)
def test_plain_values_are_written_as_the_standard_library_writes_them(value: Any) -> None:
    assert indented_json(value) == _stdlib(value)


@pytest.mark.parametrize(
    "value",
    [
        {1: "a number key"},
        {"nested": {None: 1}},
        [math.nan],
        {"x": [1, math.inf]},
        {"a set": {1, 2}},
        object(),
    ],
    ids=["int key", "None key", "nan", "inf", "set", "object"],
)
def test_anything_else_is_left_to_the_standard_library(value: Any) -> None:
    assert indented_json(value) is None


def test_the_artifact_form_keeps_its_rules_for_what_the_fast_path_leaves() -> None:
    # number keys become text keys, a non-finite number becomes null, a foreign type is an error
    assert dumps_json({1: [math.nan, 2.5]}) == '{\n "1": [\n  null,\n  2.5\n ]\n}\n'
    with pytest.raises(TypeError):
        dumps_json({"a set": {1}})
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert indented_json(deep) is None  # too deep for recursion: the library's error, as before
    with pytest.raises(RecursionError):
        dumps_json(deep)
