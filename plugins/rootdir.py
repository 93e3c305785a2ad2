"""A guard for pytest's choice of configuration file when a ``--tau2-*`` value is a folder.

pytest chooses its rootdir and configuration file from the paths among the arguments *before*
it loads plugins from entry points, so at that moment it does not know that ``/tmp/runs`` in
``--tau2-output-dir /tmp/runs`` is an option's value: when that folder exists, it becomes the
rootdir and the user's ``pyproject.toml`` / ``pytest.ini`` (with their ``tau2_*`` settings) may
be silently ignored. The same value written ``--tau2-output-dir=/tmp/runs`` is unambiguous.

:func:`check_config_file` finds the configuration file pytest would have used without those
values; when it differs from the one pytest used, the run stops at start-up naming both files
and the fix. When nothing is lost (no configuration file either way) the run goes on.
"""

from __future__ import annotations

import configparser
import itertools
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

__all__ = ["check_config_file", "config_file_for"]

_OPTION_PREFIX = "--tau2-"
# pytest 9's order of candidates in each folder
_CANDIDATES = (
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
)


def _is_config_file(path: Path) -> bool:
    if not path.is_file():
        return False
    name = path.name
    if name in ("pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml"):
        return True
    try:
        if name == "pyproject.toml":
            tool = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {})
            return "pytest" in tool
        parser = configparser.ConfigParser(interpolation=None)
        parser.read(path, encoding="utf-8")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, configparser.Error):
        return False
    return parser.has_section("pytest" if name == "tox.ini" else "tool:pytest")


def config_file_for(anchor: Path) -> Path | None:
    """The configuration file pytest finds from ``anchor`` upwards (None when there is none)."""
    for folder in (anchor, *anchor.parents):
        for name in _CANDIDATES:
            if _is_config_file(folder / name):
                return folder / name
    return None


def _spaced_values(args: Sequence[str]) -> list[tuple[str, str]]:
    """``(flag, value)`` of the ``--tau2-*`` options written with a space before their value."""
    return [
        (flag, value)
        for flag, value in itertools.pairwise(args)
        if flag.startswith(_OPTION_PREFIX) and "=" not in flag and not value.startswith("-")
    ]


def _common_anchor(paths: Iterable[Path], default: Path) -> Path:
    existing = [path.resolve() for path in paths if path.exists()]
    if not existing:
        return default
    anchor = existing[0] if existing[0].is_dir() else existing[0].parent
    for path in existing[1:]:
        while not path.is_relative_to(anchor):
            anchor = anchor.parent
    return anchor


def check_config_file(config: pytest.Config) -> None:
    """Raise ``pytest.UsageError`` when a spaced ``--tau2-*`` value changed pytest's config file."""
    invocation = config.invocation_params
    if config.option.inifilename or config.option.rootdir:
        return  # the user chose explicitly
    base = Path(invocation.dir)
    misread = [
        (flag, value)
        for flag, value in _spaced_values(list(invocation.args))
        if (base / value).exists()
    ]
    if not misread:
        return
    positional = [base / arg.split("::")[0] for arg in config.option.file_or_dir or []]
    expected = config_file_for(_common_anchor(positional, base.resolve()))
    used = config.inipath
    if (used.resolve() if used else None) == (expected.resolve() if expected else None):
        return
    flag, value = misread[0]
    raise pytest.UsageError(
        f"{flag} {value}: pytest took {value!r} for a test path when it chose its configuration "
        f"file (it does so before plugins such as tau2 are loaded), so it read "
        f"{used or 'no configuration file'} instead of {expected or 'none'}. "
        f"Write {flag}={value} (with '=') to keep your configuration."
    )
