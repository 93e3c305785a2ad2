"""``--tau2-output-dir /some/folder`` (a space, as people type it) must not cost the user's config.

pytest picks its configuration file before plugins load, taking an existing folder among the
arguments for a test path; the plugin then stops with the fix instead of running without the
user's ``tau2_*`` settings.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tau2_retail.plugins.rootdir import config_file_for
from tests.plugins.conftest import Bench


def test_config_file_for_finds_pytest_sections_only(tmp_path: Path) -> None:
    inner = tmp_path / "repo" / "pkg"
    inner.mkdir(parents=True)
    (tmp_path / "repo" / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert config_file_for(inner) is None
    (tmp_path / "tox.ini").write_text("[pytest]\naddopts = -q\n")
    assert config_file_for(inner) == tmp_path / "tox.ini"
    (tmp_path / "repo" / "pyproject.toml").write_text("[tool.pytest.ini_options]\nx = 1\n")
    assert config_file_for(inner) == tmp_path / "repo" / "pyproject.toml"


@pytest.fixture
def outside(bench: Bench) -> Path:
    folder = bench.path.parent / f"{bench.path.name}-runs"
    folder.mkdir()
    return folder


def test_a_spaced_output_folder_that_hides_the_config_file_is_refused_with_the_fix(
    bench: Bench, outside: Path
) -> None:
    result = bench.run_inprocess("--co", "-q", "--tau2-output-dir", str(outside), output_dir=False)

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*--tau2-output-dir {outside}: pytest took*Write --tau2-output-dir={outside} (with '=')*"]
    )


def test_the_same_folder_written_with_equals_keeps_the_config(bench: Bench, outside: Path) -> None:
    bench.add_ini(tau2_tasks="0,5")
    result = bench.run_inprocess("--co", "-q", f"--tau2-output-dir={outside}", output_dir=False)

    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["2 tests collected*"])


def test_a_spaced_folder_inside_the_project_changes_nothing(bench: Bench) -> None:
    inside = bench.path / "runs"
    inside.mkdir()
    bench.add_ini(tau2_tasks="0,5")
    result = bench.run_inprocess("--co", "-q", "--tau2-output-dir", str(inside), output_dir=False)

    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["2 tests collected*"])
