"""Lookup normalization (retail_domain.md §3): properties over the real ids and random text."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tau2_retail.tools.dispatch import dispatch
from tau2_retail.tools.normalize import normalize_order_id, normalize_user_id, same_text
from tau2_retail.tools.store import Store

WHITE_SPACE = st.text(alphabet=" \t\n\r\x0b\x0c\u00a0\u2003\u3000", max_size=3)


@st.composite
def case_variant(draw: st.DrawFn, text: str) -> str:
    flips = draw(st.integers(min_value=0, max_value=2 ** len(text) - 1))
    return "".join(c.swapcase() if flips >> i & 1 else c for i, c in enumerate(text))


@st.composite
def spoken_order_id(draw: st.DrawFn, order_id: str) -> str:
    """An order id as people type it: any case, with or without '#', white space around."""
    body = order_id if draw(st.booleans()) else order_id.removeprefix("#")
    return draw(WHITE_SPACE) + draw(case_variant(body)) + draw(WHITE_SPACE)


@st.composite
def spoken_user_id(draw: st.DrawFn, user_id: str) -> str:
    return draw(WHITE_SPACE) + draw(case_variant(user_id)) + draw(WHITE_SPACE)


@st.composite
def near_miss(draw: st.DrawFn, text: str) -> str:
    """A real id with one character dropped, replaced or inserted, then re-spelled."""
    position = draw(st.integers(0, len(text)))
    edit = draw(st.sampled_from(["drop", "replace", "insert"]))
    char = draw(st.characters(codec="utf-8"))
    if edit == "drop":
        text = text[:position] + text[position + 1 :]
    elif edit == "replace":
        text = text[:position] + char + text[position + 1 :]
    else:
        text = text[:position] + char + text[position:]
    return draw(WHITE_SPACE) + draw(case_variant(text)) + draw(WHITE_SPACE)


@pytest.fixture(scope="module")
def order_ids(seed) -> list[str]:
    return sorted(seed.tables["orders"])


@pytest.fixture(scope="module")
def user_ids(seed) -> list[str]:
    return sorted(seed.tables["users"])


def test_canonical_ids_map_to_themselves(seed):
    for order_id in seed.tables["orders"]:
        assert normalize_order_id(order_id) == order_id
    for user_id in seed.tables["users"]:
        assert normalize_user_id(user_id) == user_id


@pytest.mark.parametrize(
    ("spelled", "canonical"),
    [
        ("w2378156", "#W2378156"),
        (" #w2378156", "#W2378156"),
        ("#W2378156", "#W2378156"),
        ("\tW2378156 \n", "#W2378156"),
        ("##w1", "##W1"),
        ("", "#"),
    ],
)
def test_order_id_examples(spelled, canonical):
    assert normalize_order_id(spelled) == canonical


@pytest.mark.parametrize(
    ("spelled", "canonical"),
    [(" Noah_Brown_6181 ", "noah_brown_6181"), ("NOAH_BROWN_6181", "noah_brown_6181"), ("", "")],
)
def test_user_id_examples(spelled, canonical):
    assert normalize_user_id(spelled) == canonical


def test_same_text_is_case_insensitive_only():
    assert same_text("Noah", "nOAH")
    assert not same_text("Noah", " Noah")


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_spellings_find_the_same_record(seed, order_ids, user_ids, data):
    order_id = data.draw(st.sampled_from(order_ids))
    user_id = data.draw(st.sampled_from(user_ids))
    order_text = data.draw(spoken_order_id(order_id))
    user_text = data.draw(spoken_user_id(user_id))
    assert (normalize_order_id(order_text), normalize_user_id(user_text)) == (order_id, user_id)
    order = dispatch(Store(seed), "get_order_details", {"order_id": order_text})
    user = dispatch(Store(seed), "get_user_details", {"user_id": user_text})
    assert json.loads(order.content)["order_id"] == order_id
    assert json.loads(user.content)["user_id"] == user_id


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_normalization_is_idempotent(text):
    assert normalize_order_id(normalize_order_id(text)) == normalize_order_id(text)
    assert normalize_user_id(normalize_user_id(text)) == normalize_user_id(text)


def _never_another_record(seed, order_text: str, user_text: str) -> None:
    store = Store(seed)
    order = dispatch(store, "get_order_details", {"order_id": order_text})
    if order.error:
        assert order.content == "Error: Order not found"
    else:
        assert json.loads(order.content)["order_id"] == normalize_order_id(order_text)
    user = dispatch(store, "get_user_details", {"user_id": user_text})
    if user.error:
        assert user.content == "Error: User not found"
    else:
        assert json.loads(user.content)["user_id"] == normalize_user_id(user_text)


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text())
def test_random_text_never_finds_another_record(seed, order_text, user_text):
    _never_another_record(seed, order_text, user_text)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_near_misses_never_find_another_record(seed, order_ids, user_ids, data):
    order_id = data.draw(st.sampled_from(order_ids))
    user_id = data.draw(st.sampled_from(user_ids))
    _never_another_record(seed, data.draw(near_miss(order_id)), data.draw(near_miss(user_id)))


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("get_product_details", {"product_id": " 6938111410"}),
        ("get_item_details", {"item_id": "8349118980\n"}),
        (
            "find_user_id_by_name_zip",
            {"first_name": "Yusuf", "last_name": "Rossi", "zip": " 19122"},
        ),
    ],
)
def test_other_ids_are_exact(store, name, arguments):
    assert dispatch(store, name, arguments).error
