"""What every pytest process that runs scenarios holds: the run plan, and its data.

The controller (or the only process) decides the run once: :class:`RunPlan`, frozen, holds the
resolved settings (with those a resume adopts from the stored run), the run id and folder, the
scenarios already complete and the budget's ledger name (see :mod:`tau2_retail.plugins.controller`).
It reaches each xdist worker once, through ``workerinput`` (:func:`send_plan` in
``pytest_configure_node``, :func:`receive_plan` on the worker): a worker reads it and resolves
nothing again. One :class:`Tau2Process` per process (the single process, or each xdist
worker), kept under ``PROCESS_KEY``, reads its plan and holds what the process builds from it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tau2_retail import codec
from tau2_retail.engine.profiles import policy_for
from tau2_retail.errors import ArtifactError, ConfigError, Tau2Error, Tau2InfraError
from tau2_retail.models.agent import AgentIdentity
from tau2_retail.models.cache import CacheMode, ResponseCache
from tau2_retail.models.choice import ModelChoice
from tau2_retail.models.secrets import json_redaction, strip_userinfo
from tau2_retail.plugins.agents import AgentSupply, load_agent_source
from tau2_retail.plugins.budget import Budget, new_budget_token
from tau2_retail.plugins.options import Tau2Settings, options_given
from tau2_retail.plugins.runtime import DataBundle, load_bundle
from tau2_retail.plugins.scenario_report import WorkerLeftovers
from tau2_retail.results.artifacts import validate_name
from tau2_retail.results.records import ModelRecord, RunConfiguration
from tau2_retail.settings import SETTINGS, AgentSource, settings_from_recorded

__all__ = [
    "PROCESS_KEY",
    "RunPlan",
    "Tau2InfraError",
    "Tau2Process",
    "receive_plan",
    "redact",
    "run_configuration",
    "send_plan",
]

_PLAN_KEY = "tau2_plan"

# A key that names a secret (api_key, x-api-key, access_token, Authorization), not one that only
# mentions a word such as the sampling setting ``max_tokens``.
_SECRETISH = re.compile(r"(key|token|secret|authorization|password)$", re.IGNORECASE)


def new_run_id() -> str:
    """``YYYYMMDD-HHMMSS-xxxxxx``: the start in UTC, as every time the run's files record."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def redact(value: Any) -> Any:
    """A copy of ``value`` with anything under a secret-looking key replaced, extra-body values
    redacted unless harmless, headers' values redacted (``tau2_retail.models.secrets``) and URL
    userinfo removed."""
    if isinstance(value, dict):
        return {
            key: "[redacted]"
            if _SECRETISH.search(str(key)) and not str(key).endswith("_env")
            else _redacted(str(key), item)
            for key, item in value.items()
        }
    if isinstance(value, str):
        return strip_userinfo(value)
    if isinstance(value, list):
        return [redact(item) for item in value]
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPlan:
    """The run as the controller decided it at start-up, the same in every process."""

    settings: Tau2Settings
    run_id: str
    #: scenarios with a complete record in the resumed run: not run again
    completed: frozenset[str] = frozenset()
    #: settings adopted from the stored run (resume), as typed values
    adopted: Mapping[str, Any] = field(default_factory=dict)
    #: the session's ledger name of ``--tau2-max-cost``
    budget_token: str = field(default_factory=new_budget_token)

    def __post_init__(self) -> None:
        try:
            validate_name("run id", self.run_id)
        except ArtifactError as error:
            raise ConfigError(str(error)) from None

    @property
    def run_dir(self) -> Path:
        return Path(self.settings.output_dir).joinpath(self.run_id).absolute()

    def with_agent(self, source: AgentSource | None) -> RunPlan:
        """This plan with ``source`` as its agent (itself when it has that one)."""
        if source is self.settings.agent_source:
            return self
        settings = dataclasses.replace(self.settings, agent_source=source)
        return dataclasses.replace(self, settings=settings)


def send_plan(workerinput: dict[str, Any], plan: RunPlan) -> None:
    """Put ``plan`` into an xdist worker's ``workerinput`` (plain JSON values; the controller's
    ``pytest_configure_node``)."""
    workerinput[_PLAN_KEY] = {
        "settings": dict(plan.settings.recorded),
        "sources": dict(plan.settings.sources),
        "run_id": plan.run_id,
        "completed": sorted(plan.completed),
        "adopted": sorted(plan.adopted),
        "budget_token": plan.budget_token,
    }


def receive_plan(config: pytest.Config, workerinput: Mapping[str, Any]) -> RunPlan:
    """The plan the controller sent (:func:`send_plan`). Only the agent's code is looked up
    here: a factory and a conftest's fixture live in each process. Without a ``--tau2-*``
    option, an import string is imported once the worker collects a scenario
    (:meth:`Tau2Process.import_agent`), as on the controller."""
    sent = workerinput[_PLAN_KEY]
    settings = settings_from_recorded(sent["settings"], sent["sources"])
    defer = not options_given(config)
    try:
        source = load_agent_source(
            config,
            spec=settings.agent_code,
            spec_source=settings.source("agent_code"),
            defer=defer,
        )
    except ConfigError as error:
        if not defer:
            raise pytest.UsageError(str(error)) from None
        # the controller read the same and stops the session once a scenario is collected
        source = None
    settings = dataclasses.replace(settings, agent_source=source)
    return RunPlan(
        settings=settings,
        run_id=sent["run_id"],
        completed=frozenset(sent["completed"]),
        adopted={key: SETTINGS[key].value_of(settings) for key in sent["adopted"]},
        budget_token=sent["budget_token"],
    )


class Tau2Process:
    """This process's view of the run: its plan, and what it builds from it (the data bundle,
    the response cache's connection, the budget; lazily)."""

    def __init__(self, plan: RunPlan) -> None:
        self.plan = plan
        #: lines for the terminal (e.g. the response cache turned itself off), each said once
        self.notices: list[str] = []
        self._notices_reported = 0
        #: a test of the benchmark was collected here (before any deselection)
        self.benchmark_collected = False
        self._cache: ResponseCache | None = None
        self._budget: Budget | None = None
        self._bundle: DataBundle | None = None

    def import_agent(self, agents: AgentSupply) -> None:
        """Import the plan's agent if it is still pending (the ini file's or the environment's,
        once a scenario is collected), in ``agents`` too; ``ConfigError`` for one that cannot
        be loaded."""
        self.plan = self.plan.with_agent(
            agents.import_pending(self.plan.settings.source("agent_code"))
        )

    def notice(self, line: str) -> None:
        """Say ``line`` once, at the end of the run (the controller says each line once)."""
        if line not in self.notices:
            self.notices.append(line)

    def take_notices(self) -> tuple[str, ...]:
        """The notices not handed to the run yet (each is handed once)."""
        new = tuple(self.notices[self._notices_reported :])
        self._notices_reported = len(self.notices)
        return new

    def leftovers(self) -> WorkerLeftovers:
        """What this process still has to tell the run at its end (an xdist worker's
        ``workeroutput``)."""
        return WorkerLeftovers(
            notices=self.take_notices(), benchmark_collected=self.benchmark_collected
        )

    @property
    def budget(self) -> Budget | None:
        """The session's spending against ``--tau2-max-cost`` (None without one)."""
        limit = self.plan.settings.max_cost
        if limit is None:
            return None
        if self._budget is None:
            self._budget = Budget(
                limit=limit, run_dir=self.plan.run_dir, token=self.plan.budget_token
            )
        return self._budget

    @property
    def cache(self) -> ResponseCache | None:
        """This process's connection to the response cache (None without ``--tau2-cache``)."""
        settings = self.plan.settings
        if not settings.cache or settings.cache_mode is CacheMode.OFF:
            return None
        if self._cache is None:
            self._cache = ResponseCache(
                Path(settings.cache), mode=settings.cache_mode, warn=self.notice
            )
        return self._cache

    @property
    def configuration(self) -> RunConfiguration:
        """The settings as recorded: plain values, secrets redacted, with the run id."""
        return run_configuration(self.plan)

    @property
    def bundle(self) -> DataBundle:
        if self._bundle is None:
            try:
                self._bundle = load_bundle(self.plan.settings)
            except Tau2Error as error:
                # from None: the chained error would print the same message a second time
                raise pytest.fail.Exception(str(error), pytrace=False) from None
        return self._bundle


def _redacted(key: str, item: Any) -> Any:
    redaction = json_redaction(key)
    return redact(item) if redaction is None else redaction(item)


def run_configuration(
    plan: RunPlan,
    *,
    agent_identity: AgentIdentity | None = None,
    effective: bool = True,
    environ: Mapping[str, str] | None = None,
) -> RunConfiguration:
    """The settings as recorded: plain values, secrets redacted, with the run id.

    An endpoint is recorded with what its requests carry (``effective``): the profile's
    request defaults applied (the tau2 profile sends ``temperature`` 0.0 when none is set),
    and the base URL they go to (``OPENAI_BASE_URL`` of ``environ``, default ``os.environ``,
    or OpenAI's, for a role given none), so a resume sent elsewhere is refused.
    ``effective=False`` gives the endpoints as configured.
    """
    settings = plan.settings
    environ = os.environ if environ is None else environ

    def record(role: str, model: ModelChoice) -> ModelRecord:
        if effective and model.endpoint is not None:
            endpoint = policy_for(settings.profile).request_config(role, model.endpoint)
            if endpoint.base_url is None:  # where the openai package sends them
                url = endpoint.requests_url(environ).rstrip("/")  # ".../v1/" is ".../v1"
                endpoint = dataclasses.replace(endpoint, base_url=url)
            model = ModelChoice(name=model.name, endpoint=endpoint)
        data = redact(codec.encode(model))
        return ModelRecord(model=data["model"], endpoint=data["endpoint"])

    roles = settings.roles
    agent = record("agent", roles.agent)
    values, sources = dict(settings.recorded), dict(settings.sources)
    if settings.agent_source is not None:
        # the agent is code: no model plays it (the default's name would say one did)
        source = settings.agent_source
        values["agent_model"] = None
        sources["agent_model"] = source.identity.source if source.is_fixture else sources["agent"]
        identity = agent_identity or source.identity
        code = {**source.record(), "name": identity.name}
        code["version"] = identity.version
        if identity.model is not None:  # written only when the agent declares one
            code["model"] = identity.model
        agent = ModelRecord(model=identity.describe(), endpoint=None, code=code)
    return RunConfiguration(
        run_id=plan.run_id,
        settings=redact(values),
        sources=sources,
        agent=agent,
        user=record("user", roles.user),
        judge=record("judge", roles.judge) if roles.judge else None,
    )


PROCESS_KEY = pytest.StashKey[Tau2Process]()
