"""Values that can only be checked against the data or the disk still fail before any scenario
runs, with one clear message: an unknown task id, a missing data folder, an output folder that
is a file."""

from __future__ import annotations

import pytest

from tau2_retail.testing.bench import error_lines

from .conftest import Bench


def test_an_unknown_task_id_is_a_usage_error_at_start_up(bench: Bench) -> None:
    """Validated once, on the controller, before any worker starts or any folder is made."""
    result = bench.run_inprocess("-n", "2", "--tau2-tasks=0,999")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stderr.str() + result.stdout.str()
    message = "--tau2-tasks: unknown task id(s) 999 for --tau2-tasks; valid ids are 0..113"
    assert output.count(message) == 1, output
    assert "ERROR collecting" not in output
    assert not bench.output_dir.exists()


def test_a_missing_data_folder_fails_collection_once_with_the_fix(bench: Bench) -> None:
    missing = bench.path / "no-data"

    result = bench.run_inprocess(f"--tau2-data-dir={missing}")

    assert result.ret == pytest.ExitCode.INTERRUPTED
    output = result.stdout.str()
    # regression: the message was printed twice (the chained DataError repeated it)
    assert output.count(f"data folder {missing} (given by --tau2-data-dir") == 1
    assert "python -m tau2_retail data fetch" in output
    assert "During handling of the above exception" not in output


def test_an_output_dir_that_is_a_file_is_a_usage_error(bench: Bench) -> None:
    # regression: every scenario failed with a traceback, then the run exited INTERNAL_ERROR
    blocker = bench.path / "not-a-folder"
    blocker.write_text("", encoding="utf-8")

    result = bench.pytester.runpytest_inprocess(f"--tau2-output-dir={blocker / 'runs'}")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = error_lines(result.stderr)
    assert errors == [
        f"ERROR: --tau2-output-dir: '{blocker / 'runs'}' is not valid for --tau2-output-dir; "
        f"expected a folder (or a path to create one), but {blocker} is a file"
    ]


def test_a_missing_data_folder_from_the_environment_is_named_as_such(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = bench.path / "no-data-env"
    monkeypatch.setenv("TAU2_DATA_DIR", str(missing))

    result = bench.run_inprocess()

    assert result.ret == pytest.ExitCode.INTERRUPTED
    output = result.stdout.str()
    assert output.count(f"data folder {missing} (from $TAU2_DATA_DIR)") == 1
    assert "given by --tau2-data-dir" not in output
