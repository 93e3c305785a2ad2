"""``tox`` is the one command: it runs the suite and the offline self-check without leaving a
run directory in the user's ``tau2_runs/``."""

from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tox_ini() -> configparser.ConfigParser:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini", encoding="utf-8")
    return tox


def test_the_self_check_writes_its_runs_into_the_env_temp_folder() -> None:
    tox = _tox_ini()
    commands = tox["testenv"]["commands"]
    assert "tests_tau2_retail" in commands
    assert "--tau2-output-dir {env_tmp_dir}/" in commands


def test_tox_builds_the_documentation_site_in_strict_mode() -> None:
    tox = _tox_ini()
    assert "docs" in [env.strip() for env in tox["tox"]["env_list"].split(",")]
    docs = tox["testenv:docs"]
    assert docs["dependency_groups"].split() == ["docs"]
    assert "mkdocs build --strict" in docs["commands"]
    # the built site goes to tox's temp folder, never into the checkout
    assert "--site-dir {env_tmp_dir}/" in docs["commands"]


def test_the_lowest_declared_runtime_dependencies_are_the_ones_tox_tests() -> None:
    """Each runtime dependency's declared lower bound is the version the ``lowest`` env pins
    (pytest-asyncio declared 1.2, which cannot install beside pytest 9)."""
    import re
    import tomllib

    tox = _tox_ini()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = {}
    for requirement in project["project"]["dependencies"]:
        name, lowest = re.fullmatch(r"([a-z-]+)>=([\d.]+)", requirement).groups()  # type: ignore[union-attr]
        declared[name] = lowest
    assert set(declared) == {"openai", "pydantic", "pytest", "pytest-xdist", "pytest-asyncio"}
    pinned = dict(pin.split("==") for pin in tox["testenv:lowest"]["deps"].split())
    assert set(pinned) == set(declared)
    for name, lowest in declared.items():
        # 9.0 is tested as 9.0.0: the declared bound padded to three parts
        assert pinned[name] == ".".join([*lowest.split("."), "0", "0"][:3]), name
    # the client's two paths (raw bodies; the typed call of an SDK without them) and the
    # secrets' tests run there, not only the self-check
    commands = tox["testenv:lowest"]["commands"]
    assert "tests/tau2_retail/models" in commands
    assert "tests/reliability/test_security.py" in commands
    assert "lowest" in tox["tox"]["env_list"]


def test_the_quick_tier_is_its_own_env_and_not_part_of_the_full_run() -> None:
    """Issue 31, item 2: the README offers ``tox -e fast`` before the full ``tox``."""
    tox = _tox_ini()
    fast = tox["testenv:fast"]["commands"]
    assert 'pytest tests tests_tau2_retail -m "not tau2_subprocess"' in fast
    assert "--tau2-output-dir={env_tmp_dir}/" in fast
    assert "fast" not in [env.strip() for env in tox["tox"]["env_list"].split(",")]
    assert "tox -e fast" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_other_pythons_have_envs_that_neither_tox_nor_ci_starts() -> None:
    """requires-python is >=3.11 and CI runs 3.11: the quick tier under 3.12 and 3.13 is its own
    env (tox's own ``py312``/``py313`` run the whole suite), started only when asked for, so a
    CI machine without those interpreters neither fails nor slows down."""
    tox = _tox_ini()
    assert tox["testenv:py3{12,13}-fast"]["commands"].strip() == "{[testenv:fast]commands}"
    labels = {
        name.strip(): [env.strip() for env in envs.split(",")]
        for name, envs in (line.split("=", 1) for line in tox["tox"]["labels"].split("\n") if line)
    }
    assert labels["pythons"] == ["py312-fast", "py313-fast"]
    env_list = [env.strip() for env in tox["tox"]["env_list"].split(",")]
    assert not [env for env in env_list if env.startswith("py3")]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "py31" not in ci
    assert "pythons" not in ci
    assert "tox -m pythons" in (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
