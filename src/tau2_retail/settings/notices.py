"""Lines that name the setting to change: said once by a run, in each adapter's spelling.

A time limit that ended a scenario (``tau2_retail.engine.timeouts``) is worded with the flag
that raises it: ``--tau2-agent-timeout`` for the pytest plugin, ``--agent-timeout`` for
``python -m tau2_retail run``.
"""

from __future__ import annotations

from tau2_retail.engine.timeouts import TimeoutHit
from tau2_retail.settings.schema import SETTINGS

__all__ = ["timeout_notice"]

LOCAL_SERVERS_PAGE = "the 'Local model servers' page of the docs"


def timeout_notice(hit: TimeoutHit, *, cli: bool = False) -> str:
    """The one line that says which limit ``hit`` is and which flag raises it."""
    if hit.role is None:
        setting = SETTINGS["max_duration"]
        flag = setting.cli_flag if cli else setting.flag
        return (
            f"tau2: a scenario reached its {hit.seconds:g} s wall-clock limit ({flag} raises "
            f"it; a slow server needs minutes per request: see {LOCAL_SERVERS_PAGE})"
        )
    setting = SETTINGS[f"{hit.role}_timeout"]
    flag = setting.cli_flag if cli else setting.flag
    return (
        f"tau2: {hit.role} requests timed out: no complete reply within {hit.seconds:g} s "
        f"({flag} raises it; a local model on CPU may need minutes per request: see "
        f"{LOCAL_SERVERS_PAGE})"
    )
