"""The settings of a run: each declared once, as a field of one typed, frozen model.

:mod:`~tau2_retail.settings.schema` declares every setting as a field of
:class:`Tau2Settings` (parser, default, help, environment variable, ``run`` flag, identity);
:mod:`~tau2_retail.settings.declare` is how a field declares one and walks them all;
:mod:`~tau2_retail.settings.resolve` resolves and checks them once, raising ``ConfigError``;
:mod:`~tau2_retail.settings.resume` compares a resumed run with the stored one. The pytest
plugin (``tau2_retail.plugins.options``), ``python -m tau2_retail run``
(``tau2_retail.cli.run``) and the docs' configuration table are thin adapters over the
declarations; this package imports neither pytest nor argparse.
"""

from __future__ import annotations

from tau2_retail.settings.declare import (
    Identity,
    Setting,
    at,
    declarations,
    group,
    named,
    setting,
)
from tau2_retail.settings.resolve import (
    Inputs,
    resolve_settings,
    resolve_settings_apart,
    settings_from_recorded,
)
from tau2_retail.settings.resume import Difference, adopt_stored, resume_differences
from tau2_retail.settings.schema import (
    OPTIONS,
    REDACTED_JSON_FLAGS,
    SETTINGS,
    AgentSource,
    RoleSettings,
    Tau2Settings,
)

__all__ = [
    "OPTIONS",
    "REDACTED_JSON_FLAGS",
    "SETTINGS",
    "AgentSource",
    "Difference",
    "Identity",
    "Inputs",
    "RoleSettings",
    "Setting",
    "Tau2Settings",
    "adopt_stored",
    "at",
    "declarations",
    "group",
    "named",
    "resolve_settings",
    "resolve_settings_apart",
    "resume_differences",
    "setting",
    "settings_from_recorded",
]
