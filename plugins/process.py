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

from tau2_retail import codec
from tau2_retail.errors import ArtifactError, Tau2Error, Tau2InfraError
from tau2_retail.models.agent import AgentIdentity
from tau2_retail.models.cache import CacheMode, ResponseCache
from tau2_retail.models.secrets import redact_extra_body, strip_userinfo
from tau2_retail.plugins.budget import Budget, new_budget_token
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
        self,
        settings: Tau2Settings,
        *,
        run_id: str,
        completed: frozenset[str] = frozenset(),
        budget_token: str | None = None,
    ) -> None:
        self.settings = settings
        self.run_id = run_id
        #: the session's ledger name (the controller's, handed to workers)
        self.budget_token = budget_token or new_budget_token()
        #: lines for the terminal (e.g. the response cache turned itself off), each said once
        self.notices: list[str] = []
        self.notices_reported = 0
        self._cache: ResponseCache | None = None
        self._budget: Budget | None = None
        try:
            validate_name("run id", run_id)
        except ArtifactError as error:
            raise pytest.UsageError(str(error)) from None
        self.run_dir = Path(settings.output_dir).joinpath(run_id).absolute()
        self.completed = completed
        self._bundle: DataBundle | None = None
        #: the agent as its scenarios saw it (a fixture's agent: name and version, once seen)
        self.agent_identity: AgentIdentity | None = None

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
            budget_token=workerinput.get("tau2_budget_token"),
        )

    @property
    def budget(self) -> Budget | None:
        """The session's spending against ``--tau2-max-cost`` (None without one)."""
        limit = self.settings.max_cost
        if limit is None:
            return None
        if self._budget is None:
            self._budget = Budget(limit=limit, run_dir=self.run_dir, token=self.budget_token)
        return self._budget

    @property
    def cache(self) -> ResponseCache | None:
        """This process's connection to the response cache (None without ``--tau2-cache``)."""
        settings = self.settings
        if not settings.cache or settings.cache_mode is CacheMode.OFF:
            return None
        if self._cache is None:
            self._cache = ResponseCache(
                Path(settings.cache), mode=settings.cache_mode, warn=self.notices.append
            )
        return self._cache

    @property
    def configuration(self) -> RunConfiguration:
        """The settings as recorded: plain values, secrets redacted, with the run id."""
        settings = self.settings

        def record(model: ModelSettings) -> ModelRecord:
            data = redact(codec.encode(model))
            return ModelRecord(model=data["model"], endpoint=data["endpoint"])

        agent = record(settings.agent)
        if settings.agent_source is not None:
            identity = self.agent_identity or settings.agent_source.identity
            code = {**settings.agent_source.record(), "name": identity.name}
            code["version"] = identity.version
            agent = ModelRecord(model=identity.describe(), endpoint=None, code=code)
        return RunConfiguration(
            run_id=self.run_id,
            settings=redact(dict(settings.recorded)),
            sources=dict(settings.sources),
            agent=agent,
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
