"""The record codec's rules: strict JSON, errors naming the file and the field, optional keys
written only when set, derived keys recomputed on reading."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import pytest

from tau2_retail import codec
from tau2_retail.codec import Omitted
from tau2_retail.errors import ArtifactError
from tau2_retail.models.messages import Message, RequestStats, Role, Usage

OLD_METRICS = Path(__file__).parent / "results/data/stored_run/tau2_retail__1/trial-1/metrics.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    count: int
    share: float
    label: str
    flag: bool
    note: Annotated[str | None, Omitted] = None
    extra: Annotated[int, Omitted] = 0
    names: Annotated[tuple[str, ...], Omitted] = ()
    ratio: Annotated[float | None, Omitted] = None
    twice: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "twice", 2 * self.count)


GOOD = {"count": 1, "share": 0.5, "label": "x", "flag": True}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"count": "1"}, "'count' must be an integer, got '1'"),
        ({"count": True}, "'count' must be an integer, got True"),
        ({"count": 1.5}, "'count' must be an integer, got 1.5"),
        ({"flag": 1}, "'flag' must be true or false, got 1"),
        ({"share": "0.5"}, "'share' must be a number, got '0.5'"),
        ({"label": None}, "'label' must be a string, got None"),
        ({"names": "ab"}, "'names' must be a list, got 'ab'"),
    ],
)
def test_a_wrong_value_names_the_file_and_the_field(change: dict[str, object], message: str):
    with pytest.raises(ArtifactError) as caught:
        codec.decode(Sample, json.dumps(GOOD | change), "run/x.json")
    assert str(caught.value).startswith(f"run/x.json: {message} ")


def test_non_finite_numbers_are_not_json():
    for token in ("NaN", "Infinity", "-Infinity"):
        text = json.dumps(GOOD).replace("0.5", token)
        with pytest.raises(ArtifactError, match="'share' must be a finite number"):
            codec.decode(Sample, text, "x.json")
    with pytest.raises(ArtifactError, match="not a JSON value"):
        codec.decode_value(Sample, GOOD | {"share": float("nan")}, "x.json")


def test_a_missing_key_a_truncated_file_and_a_foreign_one():
    with pytest.raises(ArtifactError, match=r"^x\.json: 'label' is missing"):
        codec.decode(Sample, json.dumps({k: v for k, v in GOOD.items() if k != "label"}), "x.json")
    with pytest.raises(ArtifactError, match=r"^x\.json: not valid JSON"):
        codec.decode(Sample, json.dumps(GOOD)[:-5], "x.json")
    with pytest.raises(ArtifactError, match=r"^x\.json: expected a JSON object, got list"):
        codec.decode(Sample, "[]", "x.json")


def test_a_wrong_value_wins_over_the_missing_keys_after_it():
    with pytest.raises(ArtifactError, match="'count' must be an integer"):
        codec.decode(Sample, '{"count": "two"}', "x.json")


def test_optional_keys_are_written_only_when_set():
    plain = Sample(count=1, share=0.0, label="", flag=False)
    assert codec.encode(plain) == {"count": 1, "share": 0.0, "label": "", "flag": False, "twice": 2}
    full = Sample(count=0, share=1.0, label="y", flag=True, note="", extra=3, names=("a",))
    assert codec.encode(full) == {
        "count": 0,
        "share": 1.0,
        "label": "y",
        "flag": True,
        "note": "",  # a string is left out only when None
        "extra": 3,
        "names": ["a"],
        "twice": 0,
    }
    assert codec.encode(Sample(count=1, share=1, label="", flag=True, ratio=0.0))["ratio"] == 0.0


def test_derived_keys_are_recomputed_and_unknown_keys_ignored():
    record = codec.decode(Sample, json.dumps(GOOD | {"twice": 99, "later": [1]}), "x.json")
    assert record == Sample(count=1, share=0.5, label="x", flag=True)
    assert record.twice == 2
    stats = codec.decode(
        RequestStats,
        '{"requests": 2, "attempts": 5, "retries": 0, "failed": 1, "wait_seconds": 1.0}',
        "x",
    )
    assert stats.retries == 3
    assert codec.encode(RequestStats(requests=1, attempts=1, wait_seconds=0.12345)) == {
        "requests": 1,
        "attempts": 1,
        "retries": 0,
        "failed": 0,
        "wait_seconds": 0.123,
    }


def test_messages_and_usage_keep_their_shapes():
    tool = Message(role=Role.TOOL, content="ok", tool_call_id="", name="find")
    assert codec.encode(tool) == {
        "role": "tool",
        "content": "ok",
        "tool_call_id": "",
        "name": "find",
    }
    assert codec.decode_value(Message, codec.encode(tool)) == tool
    assert codec.encode(Usage(n_calls=1)) == {"n_calls": 1, "prompt": 0, "completion": 0}
    with pytest.raises(ArtifactError, match="'role' must be one of the known values"):
        codec.decode_value(Message, {"role": "robot", "content": None}, "t.json")


def test_read_names_the_file(tmp_path: Path):
    from tau2_retail.engine.metrics import ScenarioMetrics

    with pytest.raises(ArtifactError, match=r"cannot read .*absent\.json"):
        codec.read(ScenarioMetrics, tmp_path / "absent.json")
    broken = tmp_path / "metrics.json"
    raw = json.loads(OLD_METRICS.read_text(encoding="utf-8"))
    raw["token_usage"]["agent"]["prompt"] = -0.5
    broken.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(ArtifactError, match=rf"^{broken}: 'token_usage\.agent\.prompt' must be"):
        codec.read(ScenarioMetrics, broken)
