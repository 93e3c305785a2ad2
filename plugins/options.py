"""The ``tau2`` pytest options: the settings as ``--tau2-*`` options and ``tau2_*`` ini keys.

The settings are declared once, as the fields of :class:`~tau2_retail.settings.Tau2Settings`
(shared with ``python -m tau2_retail run``). This module only declares them to pytest, walking
the declarations, and reads their raw values: the option wins, then the ``TAU2_*`` environment
variable, then the ini file, then the default. A value that cannot work raises
``pytest.UsageError`` naming the option, the value and what is accepted (the ``ConfigError``
of the settings, converted here).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import typing
import warnings
from collections.abc import Sequence
from typing import Any

import pytest

from tau2_retail.errors import ConfigError
from tau2_retail.plugins.agents import load_agent_source
from tau2_retail.settings import (
    OPTIONS,
    AgentSource,
    Inputs,
    Setting,
    Tau2Settings,
    declarations,
)
from tau2_retail.settings import resolve_settings_apart as resolve_apart

__all__ = [
    "Tau2Settings",
    "add_options",
    "check_option_names",
    "options_given",
    "resolve_settings_apart",
]

# the lowest pytest is 9.0 (its built-in subtests); 9.2 took type expressions for ini values
# (9.1 asserts a type tag: a union there fails every session at start-up)
_PYTEST_VERSION = tuple(map(int, re.findall(r"\d+", pytest.__version__)[:2]))
_INI_UNIONS_SINCE = (9, 2)


def _ini_type(setting: Setting, pytest_version: tuple[int, ...] = _PYTEST_VERSION) -> Any:
    """A string, or for a numeric or on/off setting also the TOML number or boolean.

    ``tau2_trials = 2`` in ``[tool.pytest]`` is a TOML integer; the parser then checks it like
    the text ``"2"``. pytest 9.0 and 9.1 know no such union type: there every value is a
    string (``tau2_trials = "2"`` in ``[tool.pytest]``; any form in
    ``[tool.pytest.ini_options]``).
    """
    if pytest_version < _INI_UNIONS_SINCE or setting.kind is str:
        return "string"
    return str | setting.kind


def _ini_text(value: object, setting: Setting) -> str:
    """An ini value as the text an option would give (TOML ``true`` is ``on``, a TOML table
    is its JSON, a TOML array of task ids is the ids separated by commas)."""
    if isinstance(value, list):
        if typing.get_origin(setting.annotation) is tuple:
            return ",".join(map(str, value))
        raise ConfigError(
            f"ini {setting.dest}: the TOML array {value!r} is not valid for {setting.flag}; "
            "write one value, as a string"
        )
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def add_options(parser: pytest.Parser, model: type[Tau2Settings] = Tau2Settings) -> None:
    """Every setting of ``model`` as an option of the ``tau2`` group and an ini key."""
    group = parser.getgroup("tau2", "tau2 retail benchmark")
    for setting in declarations(model):
        env_note = f" [env {setting.env_var}]" if setting.env_var else ""
        default_note = f" ({setting.default_note()})" if setting.default_note else ""
        group.addoption(
            setting.flag,
            dest=setting.dest,
            default=None,
            metavar=setting.metavar,
            help=f"{setting.help}{default_note}{env_note} [ini {setting.dest}]",
        )
        parser.addini(setting.dest, help=setting.help, type=_ini_type(setting), default=None)


def _inputs(config: pytest.Config, deferred: list[ConfigError] | None = None) -> Inputs:
    def option(setting: Setting) -> str | None:
        value = config.getoption(setting.dest)
        return None if value is None else str(value)

    def ini(setting: Setting) -> str | None:
        with warnings.catch_warnings():
            # pytest 9.1+ warns of a TOML array under a string key (pytest 10 will refuse it):
            # the task ids' array is read; any other is refused by the setting's own message
            warnings.simplefilter("ignore", pytest.PytestRemovedIn10Warning)
            value = config.getini(setting.dest)
        if value is None:
            return None
        text = _ini_text(value, setting)
        if setting.path and text.strip() and config.inipath is not None:
            # as pytest reads its own paths: relative to the configuration file's folder
            text = os.path.join(config.inipath.parent, os.path.expanduser(text.strip()))
        return text

    def default(setting: Setting) -> str:
        if setting.path and setting.default:
            # a folder of the project, wherever pytest was started (as pytest's .pytest_cache)
            return os.path.join(config.rootpath, setting.default)
        return setting.default

    return Inputs(
        flag=lambda setting: setting.flag,
        option=option,
        ini=ini,
        default=default,
        environ=os.environ,
        load_agent=lambda spec, source: _agent_source(config, spec, source, deferred),
    )


def _agent_source(
    config: pytest.Config, spec: str, source: str, deferred: list[ConfigError] | None
) -> AgentSource | None:
    """The agent's source. With no ``--tau2-*`` option given, an agent of the ini file or the
    environment is not imported here (its source is pending: the session imports it once it
    collects a scenario), and one that conflicts with a fixture goes to ``deferred`` (None
    then): the ini file and the environment apply to every session of the project, its own
    tests included."""
    defer = deferred is not None and not options_given(config)
    try:
        return load_agent_source(config, spec=spec, spec_source=source, defer=defer)
    except ConfigError as error:
        if deferred is None or not defer:
            raise
        deferred.append(error)
        return None


def resolve_settings_apart(
    config: pytest.Config, model: type[Tau2Settings] = Tau2Settings
) -> tuple[Tau2Settings, ConfigError | None]:
    """The settings, and apart what a run with them lacks here (a key variable unset...: see
    :func:`tau2_retail.settings.resolve_settings_apart`); raises ``pytest.UsageError`` on a bad
    value."""
    deferred: list[ConfigError] = []
    try:
        settings, unmet = resolve_apart(_inputs(config, deferred), model)
    except ConfigError as error:
        raise pytest.UsageError(str(error)) from None
    return settings, deferred[0] if deferred else unmet


def options_given(config: pytest.Config, model: type[Tau2Settings] = Tau2Settings) -> bool:
    """Whether a ``--tau2-*`` option was given (on the command line or in ``addopts``): the
    session is then meant as a benchmark run, and every problem of the run stops it at
    start-up."""
    return any(config.getoption(setting.dest) is not None for setting in declarations(model))


def check_option_names(args: Sequence[str]) -> None:
    """Stop at a misspelled ``--tau2-*`` option, naming the nearest one.

    pytest would refuse it too, with ``unrecognized arguments`` and no suggestion; this runs
    before that parse (from ``pytest_load_initial_conftests``), so the message can say which
    option was meant. Arguments after ``--`` are not options.
    """
    prefix = "--tau2-"
    known = sorted(setting.flag.removeprefix(prefix) for setting in OPTIONS)
    for arg in args:
        if arg == "--":
            return
        name = arg.partition("=")[0]
        if not name.startswith(prefix) or name.removeprefix(prefix) in known:
            continue
        # compared without the prefix that every option shares
        nearest = difflib.get_close_matches(name.removeprefix(prefix), known, n=1, cutoff=0.6)
        hint = f"did you mean {prefix}{nearest[0]}?" if nearest else "pytest --help lists them"
        raise pytest.UsageError(f"unrecognized arguments: {arg}; no tau2 option {name}, {hint}")
