"""The distribution: what ``pip install`` puts into site-packages, and that it runs anywhere.

A user installs this project into the environment of *their* repository, which often has its
own ``tools`` or ``plugins`` package: only ``tau2_retail`` and ``tests_tau2_retail`` may land,
the plugin must be registered by its ``pytest11`` entry point (so its options exist whatever the
rootdir), and the benchmark must run from a folder that knows nothing of this checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
import zipfile
from collections.abc import Mapping
from pathlib import Path

from tau2_retail.testing.timeouts import scaled_timeout
from tau2_retail.testing.upstream_checkout import RETAIL_FOLDER, make_upstream_checkout
from tests.package_tree import ROOT, SETUPTOOLS, mapped_folders


def _packages_on_disk() -> set[str]:
    found = {"tests_tau2_retail"}
    for package, folder in mapped_folders().items():
        for path in [folder, *folder.rglob("*")]:
            if path.is_dir() and ((path / "__init__.py").is_file() or path.name == "assets"):
                found.add(".".join([package, *path.relative_to(folder).parts]))
    return found


def test_the_package_list_is_every_package_folder() -> None:
    assert set(SETUPTOOLS["packages"]) == _packages_on_disk()


def test_each_module_has_one_real_folder() -> None:
    """Issue 27, item 6: ``src/tau2_retail`` and the top-level ``tools/``, ``plugins/`` and
    ``fixtures/`` are real folders, none inside another, and no link leads into the package."""
    folders = mapped_folders()
    assert set(folders) == {
        "tau2_retail", "tau2_retail.tools", "tau2_retail.plugins", "tau2_retail.fixtures",
    }  # fmt: skip
    for package, folder in folders.items():
        assert folder.is_dir(), package
        assert not folder.is_symlink(), package
        assert not [path for path in folder.rglob("*") if path.is_symlink()], package
        others = [other for other in folders.values() if other != folder]
        assert not [other for other in others if folder.is_relative_to(other)], package
    # the engine's folder holds none of the mapped subpackages: an import finds each in one place
    engine = folders["tau2_retail"]
    assert not [name for name in ("tools", "plugins", "fixtures") if (engine / name).exists()]


def test_a_command_run_from_the_checkout_root_imports_the_installed_package(
    installed: Path,
) -> None:
    """README command 1 runs ``python -m tau2_retail`` in the checkout after ``pip install .``:
    the checkout's root (first on ``sys.path``) holds no ``tau2_retail`` to shadow the installed
    one (a partial package there would miss the mapped tools, plugins and fixtures)."""
    names = [
        "tau2_retail",
        *(f"tau2_retail.{name}" for name in ("tools.dispatch", "plugins", "fixtures")),
    ]
    probe = f"import importlib\nfor name in {names}: print(importlib.import_module(name).__file__)"
    result = _run_elsewhere(installed, ROOT, "-c", probe)
    assert result.returncode == 0, result.stderr
    files = result.stdout.split()
    assert len(files) == 4
    assert all(Path(file).is_relative_to(installed) for file in files), files
    assert _run_elsewhere(installed, ROOT, "-m", "tau2_retail", "--help").returncode == 0


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_wheel_installs_only_names_unique_to_this_project(wheel: Path) -> None:
    tops = {name.split("/")[0] for name in _names(wheel) if ".dist-info/" not in name}
    assert tops == {"tau2_retail", "tests_tau2_retail"}


def test_the_wheel_ships_the_data_the_runtime_reads(wheel: Path) -> None:
    names = set(_names(wheel))
    assert {
        "tau2_retail/fixtures/manifest.json",
        "tau2_retail/data/gold_digests.json",
        "tau2_retail/report/assets/report.html",
        "tau2_retail/tools/dispatch.py",
        "tau2_retail/plugins/tau2_plugin.py",
        "tests_tau2_retail/test_scenarios.py",
        "tau2_retail/py.typed",
    } <= names
    assert not [name for name in names if "/cache/" in name or "__snapshots__" in name]


def test_the_source_distribution_builds_the_same_wheel(wheel: Path, tmp_path: Path) -> None:
    """The mapped folders reach an sdist too (``pip install`` of a release's tarball): built
    from a copy of the checkout's files (those git does not ignore), its wheel holds the same
    files."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True, timeout=60,
    ).stdout.decode()  # fmt: skip
    copy = tmp_path / "checkout"
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    build = "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))"
    built = subprocess.run(
        [sys.executable, "-c", build, str(tmp_path / "dist")],
        cwd=copy, capture_output=True, text=True, check=True, timeout=scaled_timeout(300),
    )  # fmt: skip
    sdist = tmp_path / "dist" / built.stdout.split()[-1]
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path / "wheel"), str(sdist)],
        capture_output=True, check=True, timeout=scaled_timeout(300),
    )  # fmt: skip
    (rebuilt,) = (tmp_path / "wheel").glob("*.whl")

    def files(archive: Path) -> set[str]:
        return {name for name in _names(archive) if ".dist-info/" not in name}

    assert files(rebuilt) == files(wheel)


def test_the_plugin_is_registered_by_its_entry_point(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        (entry_points,) = [n for n in archive.namelist() if n.endswith("entry_points.txt")]
        text = archive.read(entry_points).decode()
    assert "[pytest11]\ntau2_retail = tau2_retail.plugins.tau2_plugin" in text


def _run_elsewhere(
    installed: Path, folder: Path, *args: str, environ: Mapping[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TAU2_RUN"))}
    # the unpacked wheel comes first: its modules and its entry point win over this checkout's
    env["PYTHONPATH"] = str(installed)
    for name, value in (environ or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return subprocess.run(
        [sys.executable, *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled_timeout(600),
    )


def test_the_installed_benchmark_runs_from_an_empty_folder(
    installed: Path, tmp_path: Path, data_dir: Path
) -> None:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    runs = tmp_path / "runs"
    result = _run_elsewhere(
        installed,
        folder,
        "-m",
        "pytest",
        "--pyargs",
        "tests_tau2_retail",
        "--tau2-tasks",
        "0,24",
        "--tau2-output-dir",
        str(runs),  # a space, as people type it
        "--tau2-data-dir",
        str(data_dir),
        "--junitxml",
        "j.xml",
        "-p",
        "no:cacheprovider",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    imported_from = [line for line in result.stdout.splitlines() if "rootdir:" in line]
    assert imported_from
    assert str(ROOT) not in imported_from[0]
    cases = list(ElementTree.parse(folder / "j.xml").getroot().iter("testcase"))
    assert sorted(case.get("name", "") for case in cases) == [
        "test_tau2_retail[tau2_retail__0]",
        "test_tau2_retail[tau2_retail__24]",
    ]
    assert {case.get("classname") for case in cases} == {"tests_tau2_retail.test_scenarios"}
    (run_dir,) = runs.iterdir()
    assert (run_dir / "report.html").is_file()


def test_a_users_run_shows_no_warning_from_our_dependencies(
    installed: Path, tmp_path: Path, data_dir: Path
) -> None:
    """Issue 27, item 7: pytest-asyncio (a dependency) warned every project that has not set
    ``asyncio_default_fixture_loop_scope``; under ``filterwarnings = error`` the run crashed."""
    repo = tmp_path / "your-repo"
    repo.mkdir()
    args = (
        "-m",
        "pytest",
        "--pyargs",
        "tests_tau2_retail",
        "--tau2-tasks=0",
        "-p",
        "no:cacheprovider",
    )
    options = (f"--tau2-output-dir={tmp_path / 'runs'}", f"--tau2-data-dir={data_dir}")
    for config in (
        "[tool.pytest.ini_options]\n",
        '[tool.pytest.ini_options]\nfilterwarnings = ["error"]\n',
    ):
        (repo / "pyproject.toml").write_text(config, encoding="utf-8")
        result = _run_elsewhere(installed, repo, *args, *options)
        output = result.stdout + result.stderr
        assert result.returncode == 0, output
        assert "Warning" not in output
        assert "warnings" not in result.stdout.splitlines()[-1]


def test_node_ids_do_not_depend_on_where_the_environment_sits(
    wheel: Path, tmp_path: Path, data_dir: Path
) -> None:
    """Issue 31, item 6: with the virtual environment inside the repository, junit class names
    and failure lines started with ``.venv.lib.python3.11.site-packages.``."""
    repo = tmp_path / "your-repo"
    site = repo / ".venv" / "lib" / "python3.11" / "site-packages"
    (repo / "pyproject.toml").parent.mkdir(parents=True)
    (repo / "pyproject.toml").write_text("[tool.pytest.ini_options]\n", encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), wheel],
        check=True,
        capture_output=True,
        timeout=scaled_timeout(300),
    )
    result = _run_elsewhere(
        site,
        repo,
        "-m",
        "pytest",
        "--pyargs",
        "tests_tau2_retail",
        "--tau2-tasks=0",
        "--tau2-agent-model=builtin:noop",  # a failure, for its failure line
        f"--tau2-output-dir={tmp_path / 'runs'}",
        f"--tau2-data-dir={data_dir}",
        "--junitxml=j.xml",
        "-p",
        "no:cacheprovider",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    failed = "FAILED tests_tau2_retail/test_scenarios.py::test_tau2_retail[tau2_retail__0]"
    # (under CI=true pytest adds the message to the line)
    assert [line for line in result.stdout.splitlines() if line.startswith(failed)]
    assert ".venv" not in result.stdout.replace(str(site), "")
    (case,) = ElementTree.parse(repo / "j.xml").getroot().iter("testcase")
    assert case.get("classname") == "tests_tau2_retail.test_scenarios"


def test_the_installed_command_line_runs_from_the_root_folder(installed: Path) -> None:
    result = _run_elsewhere(installed, Path("/"), "-m", "tau2_retail", "--help")
    assert result.returncode == 0, result.stderr
    assert "data" in result.stdout
    assert "run" in result.stdout


def test_pytest_help_lists_the_options_outside_this_checkout(
    installed: Path, tmp_path: Path
) -> None:
    result = _run_elsewhere(installed, tmp_path, "-m", "pytest", "--help")
    assert result.returncode == 0, result.stderr
    assert "--tau2-output-dir" in result.stdout
    assert "tau2_agent_model" in result.stdout


def _data_files(folder: Path) -> list[Path]:
    """The files under ``folder`` but byte code (the interpreter may cache it there)."""
    return sorted(
        path for path in folder.rglob("*") if path.is_file() and "__pycache__" not in path.parts
    )


def test_the_installed_copy_caches_the_data_in_the_users_cache(
    installed: Path, tmp_path: Path, data_dir: Path
) -> None:
    """An installed copy fills ``$XDG_CACHE_HOME/tau2_retail`` (never site-packages) from a
    tau2-bench checkout's retail folder, and reads it from there with no data option: the
    folder an offline CI caches (docs/data.md)."""
    checkout = make_upstream_checkout(data_dir, tmp_path / "tau2-bench")
    environ = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "TAU2_DATA_DIR": None}
    before = _data_files(installed)
    fetched = _run_elsewhere(
        installed,
        tmp_path,
        "-m",
        "tau2_retail",
        "data",
        "fetch",
        "--from",
        str(checkout / RETAIL_FOLDER),
        environ=environ,
    )
    assert fetched.returncode == 0, fetched.stderr
    cache = tmp_path / "xdg" / "tau2_retail"
    assert fetched.stdout.startswith(
        f"{cache} (the default cache): 14 written, 0 already present, all verified"
    )
    assert _data_files(installed) == before  # nothing written into site-packages
    verified = _run_elsewhere(
        installed, Path("/"), "-m", "tau2_retail", "data", "verify", environ=environ
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.startswith(f"{cache}\n")
    assert "all 14 files match the manifest" in verified.stdout
