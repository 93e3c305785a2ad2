"""What every pytest process that runs scenarios holds: settings, run id, folder, data.

One :class:`Tau2Process` per process (the single process, or each xdist worker), kept under
``PROCESS_KEY``. Run-wide values decided by the controller (the run id, the completed
scenarios of a resumed run, the settings a resume adopts from the stored run) reach workers
through ``workerinput`` (see :mod:`tau2_retail.plugins.run`).
"""

from __future__ import annotations

import dataclasses
import re
import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.errors import ArtifactError, Tau2Error, Tau2InfraError
from tau2_retail.models.secrets import redact_extra_body, strip_userinfo
from tau2_retail.plugins.options import ModelSettings, Tau2Settings, typed_setting
from tau2_retail.plugins.runtime import DataBundle, load_bundle
from tau2_retail.results.artifacts import validate_name
from tau2_retail.results.records import ModelRecord, RunConfiguration

__all__ = ["PROCESS_KEY", "Tau2InfraError", "Tau2Process", "redact", "scenario_of"]

_SCENARIO_IN_NODEID = re.compile(r"::test_tau2_retail\[(tau2_retail__\d+(?:-trial\d+)?)\]$")
# A key that names a secret (api_key, x-api-key, access_token, Authorization), not one that only
# mentions a word such as the sampling setting ``max_tokens``.
_SECRETISH = re.compile(r"(key|token|secret|authorization|password)$", re.IGNORECASE)


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def scenario_of(nodeid: str) -> str | None:
    """The scenario id of a benchmark test's node id, None for any other test."""
    match = _SCENARIO_IN_NODEID.search(nodeid)
    return match.group(1) if match else None


def redact(value: Any) -> Any:
    """A copy of ``value`` with anything under a secret-looking key replaced, extra-body values
    redacted unless harmless (``tau2_retail.models.secrets``) and URL userinfo removed."""
    if isinstance(value, dict):
        return {
            key: "[redacted]"
            if _SECRETISH.search(str(key)) and not str(key).endswith("_env")
            else redact_extra_body(item)
            if str(key).endswith("extra_body")
            else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, str):
        return strip_userinfo(value)
    if isinstance(value, list):
        return [redact(item) for item in value]
    return value


class Tau2Process:
    """The settings, run id and run folder of this process, and its data bundle (lazy)."""

    def __init__(
        self, settings: Tau2Settings, *, run_id: str, completed: frozenset[str] = frozenset()
    ) -> None:
        self.settings = settings
        self.run_id = run_id
        try:
            validate_name("run id", run_id)
        except ArtifactError as error:
            raise pytest.UsageError(str(error)) from None
        self.run_dir = Path(settings.output_dir).joinpath(run_id).absolute()
        self.completed = completed
        self._bundle: DataBundle | None = None

    @classmethod
    def for_worker(cls, settings: Tau2Settings, workerinput: dict[str, Any]) -> Tau2Process:
        adopted = workerinput.get("tau2_adopted") or {}
        if adopted:
            typed = {key: typed_setting(key, value) for key, value in adopted.items()}
            settings = dataclasses.replace(settings, **typed)
        return cls(
            settings,
            run_id=workerinput["tau2_run_id"],
            completed=frozenset(workerinput["tau2_completed"]),
        )

    @property
    def configuration(self) -> RunConfiguration:
        """The settings as recorded: plain values, secrets redacted, with the run id."""
        settings = self.settings

        def record(model: ModelSettings) -> ModelRecord:
            data = redact(model.to_json())
            return ModelRecord(model=data["model"], endpoint=data["endpoint"])

        return RunConfiguration(
            run_id=self.run_id,
            settings=redact(dict(settings.recorded)),
            sources=dict(settings.sources),
            agent=record(settings.agent),
            user=record(settings.user),
            judge=record(settings.judge) if settings.judge else None,
        )

    @property
    def bundle(self) -> DataBundle:
        if self._bundle is None:
            try:
                self._bundle = load_bundle(self.settings)
            except Tau2Error as error:
                # from None: the chained error would print the same message a second time
                raise pytest.fail.Exception(str(error), pytrace=False) from None
        return self._bundle


PROCESS_KEY = pytest.StashKey[Tau2Process]()
