"""Data and disk faults fail once, before any scenario runs, with a message that names what is
wrong and how to fix it, and leave nothing half-done: no run directory, no touched data file.

Each case breaks a private copy of the data folder (or the output folder) and runs the
benchmark in a subprocess.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import stat
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tau2_retail.data import files as datafiles
from tau2_retail.data.tasks import load_tasks
from tau2_retail.errors import DataError
from tau2_retail.testing.bench import Bench, error_lines, read_only
from tau2_retail.testing.run_files import file_digests

FETCH = "python -m tau2_retail data fetch"


def _copy_data(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    for path in (target, *target.rglob("*")):
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return target


def _missing(data: Path) -> str:
    (data / "policy.md").unlink()
    return f"lacks policy.md; run `{FETCH}`"


def _digest(name: str, change: Callable[[bytes], bytes]) -> Callable[[Path], str]:
    def apply(data: Path) -> str:
        path = data / name
        path.write_bytes(change(path.read_bytes()))
        pinned = datafiles.load_manifest().file(name).sha256
        return f"{path}: sha256 mismatch (expected {pinned}, got "

    return apply


def _unknown_tool(raw: bytes) -> bytes:
    tasks = json.loads(raw)
    tasks[3]["evaluation_criteria"]["actions"][0]["name"] = "drop_all_tables"
    return json.dumps(tasks).encode()


CASES = {
    "missing file": _missing,
    "wrong digest": _digest("db.json", lambda raw: raw.replace(b"Yusuf", b"Yosef", 1)),
    "truncated JSON": _digest("tasks.json", lambda raw: raw[: len(raw) // 2]),
    "unknown tool in a gold action": _digest("tasks.json", _unknown_tool),
}


@pytest.mark.parametrize(
    ("case", "workers"),
    [*((case, "0") for case in CASES), ("wrong digest", "2")],
    ids=[*(f"{case}-n0" for case in CASES), "wrong digest-n2"],
)
def test_broken_data_fails_once_at_collection_with_the_fix(
    bench: Bench, data_dir: Path, tmp_path: Path, case: str, workers: str
) -> None:
    data = _copy_data(data_dir, tmp_path / "data")
    message = CASES[case](data)
    before = file_digests(data)
    bench.env["TAU2_DATA_DIR"] = str(data)

    run = bench.run("-n", workers, "--tau2-tasks=0,1,2")

    assert run.returncode in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.TESTS_FAILED)
    collectors = 1 if workers == "0" else int(workers)  # one error per collecting process
    assert run.stdout.count("ERROR collecting test_scenarios.py") == collectors
    assert run.stdout.count(message) == collectors, run.stdout
    if "sha256" in message:
        assert "re-fetch it with `python -m tau2_retail data fetch`" in run.stdout
    assert "Traceback" not in run.output
    assert "During handling" not in run.output
    assert run.outcomes() == {}  # no scenario ran
    assert not bench.output_dir.exists()
    assert file_digests(data) == before


def test_unpinned_task_file_with_an_unknown_tool_names_task_and_tool(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Behind the digest check: a tasks.json pinned by a (hypothetical) updated manifest whose
    gold action names a tool this suite does not have."""
    data = _copy_data(data_dir, tmp_path / "data")
    path = data / "tasks.json"
    path.write_bytes(_unknown_tool(path.read_bytes()))
    manifest = datafiles.load_manifest()
    entry = manifest.file("tasks.json")
    pinned = replace(
        manifest,
        files=tuple(
            replace(f, sha256=hashlib.sha256(path.read_bytes()).hexdigest()) if f is entry else f
            for f in manifest.files
        ),
    )
    monkeypatch.setattr(datafiles, "load_manifest", lambda: pinned)
    with pytest.raises(DataError) as raised:
        load_tasks(data)
    assert str(raised.value) == (
        f"{path}: task '3': evaluation_criteria.actions[0].name 'drop_all_tables' "
        "is not a known retail tool"
    )


# -- the output folder --------------------------------------------------------------------


@pytest.mark.parametrize("where", ["under a regular file", "read-only folder", "read-only parent"])
def test_an_output_dir_that_cannot_be_written_is_a_usage_error(
    bench: Bench, tmp_path: Path, where: str
) -> None:
    blocker = tmp_path / "blocker"
    with contextlib.ExitStack() as stack:
        if where == "under a regular file":
            blocker.write_text("not a folder\n")
            output = blocker / "runs"
            expected = f"but {blocker} is a file"
        else:
            blocker.mkdir()
            stack.enter_context(read_only(blocker, bench))
            output = blocker if where == "read-only folder" else blocker / "runs" / "deeper"
            expected = f"but {blocker} is not writable"
        run = bench.run("-n", "2", "--tau2-tasks=0,1", f"--tau2-output-dir={output}")
        assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.output
        errors = error_lines(run.stderr)
        assert len(errors) == 1, run.stderr
        assert errors[0].startswith(
            f"ERROR: --tau2-output-dir: '{output}' is not valid for --tau2-output-dir; "
        )
        assert expected in errors[0]
        assert "workers" not in run.stdout  # failed before xdist started any worker
        leftovers = [p for p in tmp_path.rglob("*") if p != blocker and blocker in p.parents]
        assert leftovers == []
