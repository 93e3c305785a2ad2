"""Which values are masked as keys, in which spellings, and how a record is masked."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.masking import MASK, Masker, could_be_secret, masked


@pytest.mark.parametrize(
    "value",
    [
        "anything",
        "EMPTY",
        "x",
        "none",
        "not-needed",
        "sk-no-key-required",
        "placeholder",
        "dummy key",
        "changeme",
        "  anything  ",
    ],
)
def test_placeholders_and_words_are_not_keys(value: str) -> None:
    assert not could_be_secret(value)
    assert not Masker([value])
    assert Masker([value]).text(f"Is there {value} specific?") == f"Is there {value} specific?"


@pytest.mark.parametrize(
    "value",
    [
        "sk-proj-0a1b2c3d4e5f6a7b8c9d",
        "token-abc123",
        "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "abcdefghijklmnopqrstuvwxyzABCDEFGH",  # letters only, but as long as a real token
    ],
)
def test_keys_are_masked(value: str) -> None:
    assert could_be_secret(value)
    assert Masker([value]).text(f"key={value}; again {value}") == f"key={MASK}; again {MASK}"


def test_every_spelling_of_a_key_is_masked_and_the_longest_first() -> None:
    key = 'tok"en<1234>&abc'
    masker = Masker([key, 'tok"en<1234'])
    assert masker.text(json.dumps({"reply": key})) == json.dumps({"reply": MASK})
    assert masker.text("<td>tok&quot;en&lt;1234&gt;&amp;abc</td>") == f"<td>{MASK}</td>"
    assert masker.text(f"[{key}]") == f"[{MASK}]"
    assert "1234" not in repr(masker)


def test_the_keys_of_endpoints_come_from_their_variables() -> None:
    environ = {"AGENT_KEY": "sk-agent-0123456789", "USER_KEY": "anything"}
    configs = [
        EndpointConfig(model="a", api_key_env="AGENT_KEY"),
        EndpointConfig(model="u", api_key_env="USER_KEY"),
        EndpointConfig(model="j", api_key_env="none"),
        None,
    ]
    masker = Masker.for_endpoints(configs, environ)
    assert masker.text("sk-agent-0123456789 and anything") == f"{MASK} and anything"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Inner:
    text: str
    count: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class _Outer:
    items: tuple[_Inner, ...]
    table: dict[str, list[str]]
    other: object


def test_a_record_is_masked_everywhere_and_untouched_parts_stay_the_same_objects() -> None:
    other = object()
    kept = _Inner(text="nothing here")
    record = _Outer(
        items=(kept, _Inner(text="sk-live-0123456789 said", count=2)),
        table={"sk-live-0123456789": ["a", "the key sk-live-0123456789"]},
        other=other,
    )
    mask = Masker(["sk-live-0123456789"]).text
    shown = masked(record, mask)
    assert shown == _Outer(
        items=(kept, _Inner(text=f"{MASK} said", count=2)),
        table={MASK: ["a", f"the key {MASK}"]},
        other=other,
    )
    assert shown.items[0] is kept
    assert shown.other is other
    assert masked(kept, mask) is kept
    assert masked(record, Masker(["sk-other-0123456789"]).text) is record
