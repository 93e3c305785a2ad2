"""The settings of a run: one schema for the pytest options and the command line.

:mod:`~tau2_retail.settings.schema` declares every setting (option, ini key, environment
variable, default, parser); :mod:`~tau2_retail.settings.resolve` resolves and checks them once,
raising ``ConfigError``. The pytest plugin (``tau2_retail.plugins.options``) and ``python -m
tau2_retail run`` (``tau2_retail.cli.run``) are thin adapters over both; this package imports
neither pytest nor argparse.
"""

from __future__ import annotations

from tau2_retail.settings.resolve import (
    AgentSource,
    Inputs,
    ModelSettings,
    Tau2Settings,
    resolve_settings,
    settings_from_recorded,
)
from tau2_retail.settings.schema import (
    EXTRA_BODY_FLAGS,
    OPTIONS,
    SETTINGS,
    Setting,
    plain_setting,
    typed_setting,
)

__all__ = [
    "EXTRA_BODY_FLAGS",
    "OPTIONS",
    "SETTINGS",
    "AgentSource",
    "Inputs",
    "ModelSettings",
    "Setting",
    "Tau2Settings",
    "plain_setting",
    "resolve_settings",
    "settings_from_recorded",
    "typed_setting",
]
