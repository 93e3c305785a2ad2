"""A setting is one declaration: a model with one more ``setting(...)`` field gets its pytest
option, ini key, environment variable, ``run`` flag, recorded key, place in the worker's plan,
resume comparison and docs row, with no other edit."""

from __future__ import annotations

import argparse
import dataclasses
import textwrap
from collections.abc import Mapping

import pytest

from tau2_retail.cli.run import add_setting_flags, resolve_run_settings
from tau2_retail.errors import ArtifactError, ConfigError
from tau2_retail.plugins.process import RunPlan, run_configuration
from tau2_retail.settings import (
    OPTIONS,
    Identity,
    Inputs,
    RoleSettings,
    Tau2Settings,
    adopt_stored,
    declarations,
    resolve_settings,
    resume_differences,
    setting,
    settings_from_recorded,
)
from tau2_retail.settings.parsers import at_least, text
from tests.test_docs import load_hook

LIMITS = "limits, seed and output"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Variant(Tau2Settings):
    """Today's settings and two more, each one declaration."""

    export_path: str = setting(
        text,
        help="where the export goes",
        env=True,
        empty="",
        run=LIMITS,
        identity=Identity.KEPT,
        path=True,
    )
    warmup: int = setting(
        at_least(0), default="0", help="scenarios run first", identity=Identity.ADOPTED
    )


def resolve(options: Mapping[str, str], *, environ: Mapping[str, str] | None = None) -> Variant:
    settings = resolve_settings(
        Inputs(
            flag=lambda s: s.flag,
            option=lambda s: options.get(s.name),
            environ=environ or {},
            load_agent=lambda spec, source: None,
        ),
        Variant,
    )
    assert isinstance(settings, Variant)
    return settings


def test_the_new_fields_are_settings_with_every_derived_name() -> None:
    added = declarations(Variant)[len(OPTIONS) :]
    assert declarations(Variant)[: len(OPTIONS)] == OPTIONS
    export, warmup = added
    assert (export.flag, export.dest, export.env_var, export.cli_flag) == (
        "--tau2-export-path",
        "tau2_export_path",
        "TAU2_EXPORT_PATH",
        "--export-path",
    )
    assert (warmup.flag, warmup.env_var, warmup.cli, warmup.kind) == (
        "--tau2-warmup",
        None,
        False,
        int,
    )


def test_the_value_resolves_with_the_precedence_and_its_parser() -> None:
    settings = resolve({"export_path": " out/x "}, environ={"TAU2_EXPORT_PATH": "env"})
    assert (settings.export_path, settings.sources["export_path"]) == (
        "out/x",
        "--tau2-export-path",
    )
    from_env = resolve({}, environ={"TAU2_EXPORT_PATH": "env"})
    assert (from_env.export_path, from_env.sources["export_path"]) == ("env", "TAU2_EXPORT_PATH")
    with pytest.raises(ConfigError, match=r"--tau2-warmup: '-1' is not valid for --tau2-warmup"):
        resolve({"warmup": "-1"})


def test_run_takes_a_flag_in_the_declared_group_and_not_the_others() -> None:
    parser = argparse.ArgumentParser()
    groups = add_setting_flags(parser, Variant)
    assert "--export-path" in {a.option_strings[0] for a in groups[LIMITS]._group_actions}
    assert "--warmup" not in parser.format_help()
    settings = resolve_run_settings(parser.parse_args(["--export-path", "there"]), Variant)
    assert isinstance(settings, Variant)
    assert (settings.export_path, settings.sources["export_path"]) == ("there", "--export-path")


def test_run_args_records_it_and_a_worker_rebuilds_it() -> None:
    settings = resolve({"export_path": "out", "warmup": "3"})
    recorded = run_configuration(RunPlan(settings=settings, run_id="r")).settings
    assert (recorded["export_path"], recorded["warmup"]) == ("out", 3)
    assert list(recorded)[-2:] == ["export_path", "warmup"]
    rebuilt = settings_from_recorded(settings.recorded, settings.sources, model=Variant)
    assert rebuilt == settings


def test_a_resume_compares_and_adopts_it_as_declared() -> None:
    stored = run_configuration(
        RunPlan(settings=resolve({"export_path": "a", "warmup": "2"}), run_id="r")
    )
    now = resolve({"export_path": "b"})
    adopted, values = adopt_stored(now, stored, where="run_args.json")
    assert values == {"warmup": 2}
    assert isinstance(adopted, Variant)
    assert adopted.warmup == 2
    plan = RunPlan(settings=adopted, run_id="r")
    differences = resume_differences(
        stored,
        now=run_configuration(plan),
        model=Variant,
    )
    assert [str(d) for d in differences] == ["export_path: stored 'a', now 'b'"]
    broken = dataclasses.replace(stored, settings={**stored.settings, "warmup": "two"})
    with pytest.raises(ArtifactError, match=r"run_args\.json: 'warmup' must be an integer"):
        adopt_stored(now, broken, where="run_args.json")


def test_the_docs_table_has_its_row() -> None:
    markdown = load_hook().options_markdown(declarations(Variant))
    run_table = markdown.split("### The agent")[0]
    assert (
        "| `--tau2-export-path` | `tau2_export_path` | `TAU2_EXPORT_PATH` | unset "
        "| where the export goes | `--export-path` |"
    ) in run_table
    assert "| `--tau2-warmup` | `tau2_warmup` |  | `0` | scenarios run first |  |" in run_table


def test_a_role_setting_is_declared_once_for_the_three_roles() -> None:
    for field in dataclasses.fields(RoleSettings):
        names = [s.name for s in OPTIONS if s.attr_path[1:] == (field.name,)]
        assert names == [f"{role}_{field.name}" for role in ("agent", "user", "judge")]
    helps = [s.help for s in OPTIONS if s.attr_path[1:] == ("temperature",)]
    assert helps == [
        "sampling temperature of the agent",
        "sampling temperature of the simulated user",
        "sampling temperature of the NL-assertion judge",
    ]


INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
CONFTEST = """
from tau2_retail.plugins.options import add_options, resolve_settings_apart
from tests.tau2_retail.settings.test_declare import Variant


def pytest_addoption(parser):
    add_options(parser, Variant)


def pytest_configure(config):
    config.variant, _ = resolve_settings_apart(config, Variant)


def pytest_report_header(config):
    settings = config.variant
    return [f"export_path={settings.export_path} from {settings.sources['export_path']}"]
"""


@pytest.mark.parametrize(
    ("args", "ini", "environ", "expected"),
    [
        (["--tau2-export-path=opt"], "", {}, "export_path=opt from --tau2-export-path"),
        ([], "", {"TAU2_EXPORT_PATH": "env"}, "export_path=env from TAU2_EXPORT_PATH"),
        ([], "tau2_export_path = ini\n", {}, "export_path=*ini from ini tau2_export_path"),
    ],
)
def test_pytest_takes_its_option_ini_key_and_environment_variable(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    ini: str,
    environ: Mapping[str, str],
    expected: str,
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    pytester.makeconftest(textwrap.dedent(CONFTEST))
    pytester.makeini(INI + ini)
    pytester.makepyfile("def test_nothing():\n    pass\n")

    result = pytester.runpytest_inprocess("-p", "no:tau2_retail", "-p", "no:cacheprovider", *args)

    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    result.stdout.fnmatch_lines([expected])


def test_pytest_help_lists_it(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(textwrap.dedent(CONFTEST))
    pytester.makeini(INI)

    result = pytester.runpytest_inprocess("-p", "no:tau2_retail", "--help")

    shown = " ".join(result.stdout.str().split())
    assert "--tau2-export-path=PATH where the export goes [env TAU2_EXPORT_PATH]" in shown
    assert "tau2_export_path (string): where the export goes" in shown
    assert "--tau2-warmup=WARMUP scenarios run first [ini tau2_warmup]" in shown
    assert "tau2_warmup (string | int): scenarios run first" in shown
