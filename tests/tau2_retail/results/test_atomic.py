"""Atomic writes: the file appears whole or not at all, and no temporary file is left."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest

from tau2_retail.errors import ArtifactError
from tau2_retail.results import atomic
from tau2_retail.results.atomic import TEMP_PREFIX, dumps_json, write_json_atomic, write_text_atomic


def _temp_files(folder: Path) -> list[Path]:
    return [path for path in folder.iterdir() if path.name.startswith(TEMP_PREFIX)]


def test_write_text_creates_parents_and_writes_utf8(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "note.txt"
    write_text_atomic(target, "héllo\nwörld\n")
    assert target.read_bytes() == "héllo\nwörld\n".encode()
    assert _temp_files(target.parent) == []


def test_written_file_is_readable_by_others(tmp_path: Path) -> None:
    target = tmp_path / "note.txt"
    write_text_atomic(target, "x")
    assert target.stat().st_mode & 0o777 == 0o644


def test_write_json_format(tmp_path: Path) -> None:
    target = tmp_path / "value.json"
    value = {"z": 1, "a": ["é", None, True]}
    write_json_atomic(target, value)
    text = target.read_text(encoding="utf-8")
    assert text == '{\n "z": 1,\n "a": [\n  "é",\n  null,\n  true\n ]\n}\n'
    assert text == dumps_json(value)
    assert json.loads(text) == value


def test_replace_overwrites_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "value.json"
    write_json_atomic(target, {"n": 1})
    write_json_atomic(target, {"n": 2})
    assert json.loads(target.read_text()) == {"n": 2}
    assert _temp_files(tmp_path) == []


def test_failed_replace_leaves_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "value.json"
    write_json_atomic(target, {"old": True})

    def refuse(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(ArtifactError, match=r"value\.json.*No space left on device"):
        write_json_atomic(target, {"new": True})
    assert json.loads(target.read_text()) == {"old": True}
    assert _temp_files(tmp_path) == []


@pytest.mark.parametrize(
    ("raised", "expected", "match"),
    [
        (OSError(5, "Input/output error"), ArtifactError, r"value\.txt.*Input/output error"),
        (KeyboardInterrupt(), KeyboardInterrupt, None),
    ],
    ids=["an-os-error-is-an-artifact-error", "an-interrupt-propagates"],
)
def test_failed_write_midway_leaves_no_file_and_no_temp(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    raised: BaseException,
    expected: type[BaseException],
    match: str | None,
) -> None:
    target = tmp_path / "value.txt"

    def failing_fsync(fd: int) -> None:
        raise raised

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(expected, match=match):
        write_text_atomic(target, "x" * 100_000)
    assert list(tmp_path.iterdir()) == []


def test_parent_that_is_a_file_is_an_artifact_error(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    with pytest.raises(ArtifactError, match="blocker"):
        write_text_atomic(blocker / "inner" / "file.txt", "x")


def test_target_that_is_a_folder_is_an_artifact_error(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    with pytest.raises(ArtifactError, match="taken"):
        write_text_atomic(tmp_path / "taken", "x")
    assert _temp_files(tmp_path) == []


def test_value_that_is_not_json_touches_nothing(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        write_json_atomic(tmp_path / "bad.json", {"x": object()})
    assert list(tmp_path.iterdir()) == []


def test_a_lone_surrogate_that_reaches_a_write_is_replaced_not_fatal(tmp_path: Path) -> None:
    write_json_atomic(tmp_path / "judge_result.json", {"reason": "cut \ud83d"})
    assert json.loads((tmp_path / "judge_result.json").read_text("utf-8")) == {
        "reason": "cut \ufffd"
    }


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_artifacts_are_strict_json_and_a_non_finite_number_is_written_as_null(
    tmp_path: Path, number: float
) -> None:
    """Issue 30, item 6: a number that is not finite never costs the artifact (and with
    metrics.json its scenario): it is written as null, the file stays strict JSON."""
    write_json_atomic(tmp_path / "metrics.json", {"cost": {"agent": number}, "n": [1.5, number]})
    text = (tmp_path / "metrics.json").read_text("utf-8")
    assert json.loads(text) == {"cost": {"agent": None}, "n": [1.5, None]}
    assert "NaN" not in text
    assert "Infinity" not in text


def test_an_interrupt_just_after_the_file_is_made_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C landing right after the temporary file exists (before its maker returns): the
    name was known before, so the file goes (a temporary file named inside its maker could
    not be: a Ctrl-C test of the whole suite left one under load)."""
    made = atomic._open_new

    def made_then_interrupted(name: str) -> int:
        os.close(made(name))
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic, "_open_new", made_then_interrupted)
    target = tmp_path / "run" / "metrics.json"
    with pytest.raises(KeyboardInterrupt):
        write_text_atomic(target, "{}")
    assert _temp_files(target.parent) == []
    assert not target.exists()


def test_a_dead_process_leftover_under_this_id_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A temporary file of an earlier process that had this process id (killed mid-write):
    the write takes the next name and succeeds; the leftover is not this write's to remove."""
    monkeypatch.setattr(atomic, "_SEQUENCE", itertools.count(7))
    leftover = tmp_path / f"{TEMP_PREFIX}note.txt.{os.getpid()}-7"
    leftover.write_text("half")
    write_text_atomic(tmp_path / "note.txt", "whole")
    assert (tmp_path / "note.txt").read_text() == "whole"
    assert _temp_files(tmp_path) == [leftover]
