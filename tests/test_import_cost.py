"""What the plugin imports in every pytest run of a team's environment: not the ``openai``
package (500 modules, about 0.5 s of CPU), which only a session with an endpoint needs.

A start-up check of the endpoints' HTTP clients imported it from the settings module: every
pytest run of the environment, the team's own unit tests included, paid for it (found by a
new-user walk-through; docs/performance.md "The plugin's cost in your other runs")."""

from __future__ import annotations

import subprocess
import sys

_PROBE = """
import sys
import pytest
import tau2_retail.plugins.tau2_plugin
from tau2_retail.settings import Inputs, resolve_settings
settings = resolve_settings(Inputs(
    flag=lambda s: s.flag, option=lambda s: None, ini=lambda s: None, environ={},
    load_agent=lambda spec, source: None,
))
assert settings.roles.agent.endpoint is None  # the offline self-check's settings
clients = ("openai", "httpx", "httpx2")
print(sorted(name for name in sys.modules if name.partition(".")[0] in clients))
"""


def test_the_plugin_and_an_offline_session_import_no_http_client() -> None:
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "[]"
