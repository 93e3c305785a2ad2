"""Resolve the settings: one precedence, one parse, every check, one error type.

:func:`resolve_settings` takes where the raw values come from (:class:`Inputs`: the option of
the command line, and the ini file for pytest) and returns the frozen :class:`Tau2Settings`. The
option wins, then the ``TAU2_*`` environment variable, then the ini key, then the default. Every
problem raises ``ConfigError`` naming where the value came from, the value, the option as the
caller spells it (``--tau2-trials`` for pytest, ``--seed`` for ``python -m tau2_retail run``)
and what is accepted; the pytest plugin turns it into ``pytest.UsageError``, the command line
into exit status 2.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from tau2_retail.engine.conversation import Limits
from tau2_retail.engine.harness import Roles
from tau2_retail.engine.profiles import ProfileName, policy_for
from tau2_retail.errors import ArtifactError, ConfigError
from tau2_retail.models.agent import AgentFactory, AgentIdentity
from tau2_retail.models.cache import CacheMode
from tau2_retail.models.choice import ModelChoice, choose_model
from tau2_retail.models.config import NO_API_KEY, EndpointConfig
from tau2_retail.models.prices import PriceTable
from tau2_retail.results.summary import read_summary
from tau2_retail.settings.schema import (
    OPTIONS,
    SETTINGS,
    InvalidValue,
    Setting,
    env_name,
    plain_setting,
    typed_setting,
)

__all__ = [
    "AgentSource",
    "Inputs",
    "ModelSettings",
    "Tau2Settings",
    "resolve_settings",
    "settings_from_recorded",
]

ModelSettings = ModelChoice
"""Who plays a role (the harness's :class:`~tau2_retail.models.choice.ModelChoice`)."""

#: the settings of a role that only an endpoint uses (the model names the role's player)
_ENDPOINT_SUFFIXES = tuple(
    setting.name.removeprefix("agent_")
    for setting in OPTIONS
    if setting.name.startswith("agent_") and f"judge_{setting.name[6:]}" in SETTINGS
)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSource:
    """Where the agent comes from: an import string (``factory`` set) or a fixture (None)."""

    identity: AgentIdentity
    factory: AgentFactory | None = None

    @property
    def is_fixture(self) -> bool:
        return self.factory is None

    def record(self) -> dict[str, Any]:
        """The ``code`` part of the agent's ``ModelRecord``."""
        return {
            "source": self.identity.source,
            "kind": "fixture" if self.is_fixture else "import",
            "name": self.identity.name,
            "version": self.identity.version,
        }


AgentLoader = Callable[[str, str], AgentSource | None]
"""``(spec, spec_source)``: the agent as code, or None; raises ``ConfigError``."""


def _no_ini(setting: Setting) -> str | None:
    return None


def _declared_default(setting: Setting) -> str:
    return setting.default


@dataclass(frozen=True, slots=True, kw_only=True)
class Inputs:
    """Where raw values come from, and how the caller spells an option.

    - ``flag``: the option of a setting as the user types it.
    - ``option``: the text given on the command line, or None.
    - ``ini``: the text of the configuration file, or None (a relative path already joined).
    - ``applies``: whether the caller has the setting at all; the others keep their default.
    - ``default``: a setting's default as the caller places it (pytest puts a relative default
      folder in its rootdir, as it does its own cache).
    - ``load_agent``: the agent as code (``--tau2-agent``, a ``tau2_agent`` fixture).
    - ``one_scenario``: ``python -m tau2_retail run``, a scenario watched rather than a score
      compared: an endpoint agent may face the scripted customer, and a role's endpoint option
      given with a built-in model (or without a judge) is refused, since it would do nothing.
    """

    flag: Callable[[Setting], str]
    option: Callable[[Setting], str | None]
    load_agent: AgentLoader
    environ: Mapping[str, str]
    ini: Callable[[Setting], str | None] = _no_ini
    applies: Callable[[Setting], bool] = lambda setting: True
    default: Callable[[Setting], str] = _declared_default
    one_scenario: bool = False

    def spelled(self, name: str) -> str:
        return self.flag(SETTINGS[name])

    def raw(self, setting: Setting) -> tuple[str, str]:
        """The raw text of a setting and where it came from."""
        if not self.applies(setting):
            return self.default(setting), "default"
        value = self.option(setting)
        if value is not None:
            return value, self.flag(setting)
        if setting.env_var and self.environ.get(setting.env_var):
            return self.environ[setting.env_var], setting.env_var
        ini = self.ini(setting)
        if ini is not None and ini.strip():
            return ini, f"ini {setting.dest}"
        return self.default(setting), "default"


@dataclass(frozen=True, slots=True, kw_only=True)
class Tau2Settings:
    """Every resolved setting as a typed attribute (safe to print: keys are never held).

    The per-role model settings are the ``agent``, ``user`` and ``judge`` records; every other
    option is an attribute of the same name. ``recorded`` holds each option's parsed value as
    plain JSON (what ``run_args.json`` and ``summary.json`` record) and ``sources`` where each
    came from (``--tau2-trials``, ``TAU2_OUTPUT_DIR``, ``ini tau2_trials``, ``default``).
    """

    data_dir: str
    profile: ProfileName
    agent_notes: bool
    trials: int
    seed: int
    tasks: tuple[str, ...]
    shard: tuple[int, int] | None
    split: str
    max_steps: int
    max_errors: int
    max_duration: float
    concurrency: int
    breaker_failures: int
    breaker_window_seconds: float
    breaker_probe_seconds: float
    max_reply_bytes: int
    output_dir: str
    run_id: str
    resume: str
    min_pass_rate: float | None
    max_infra_errors: int
    baseline: str
    max_regression: float | None
    regression_alpha: float | None
    prices: PriceTable | None
    max_cost: float | None
    cache: str
    cache_mode: CacheMode
    agent: ModelSettings
    user: ModelSettings
    judge: ModelSettings | None
    recorded: Mapping[str, Any]
    sources: Mapping[str, str]
    #: the agent as Python code (``--tau2-agent`` or a ``tau2_agent`` fixture), else None
    agent_source: AgentSource | None = None

    def roles(self) -> Roles:
        """The agent, user and judge these settings choose, as the harness takes them."""
        return Roles(agent=self.agent, user=self.user, judge=self.judge)

    def limits(self) -> Limits:
        """When a conversation is cut short, as these settings say."""
        return Limits(
            max_steps=self.max_steps,
            max_errors=self.max_errors,
            max_duration_seconds=self.max_duration,
        )

    @property
    def is_offline_self_check(self) -> bool:
        return (
            self.agent_source is None
            and self.agent.is_builtin
            and self.user.is_builtin
            and self.judge is None
        )

    def describe_agent(self) -> str:
        if self.agent_source is not None:
            return f"code {self.agent_source.identity.describe()}"
        return self.agent.describe()


_TYPED = frozenset(f.name for f in fields(Tau2Settings)) - {
    "agent", "user", "judge", "recorded", "sources", "agent_source",
}  # fmt: skip


def _parse_all(inputs: Inputs) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for setting in OPTIONS:
        raw, source = inputs.raw(setting)
        flag = inputs.flag(setting)
        sources[setting.name] = source
        if setting.refuse_blank and source == flag and not raw.strip():
            # e.g. --tau2-tasks=$TASKS with TASKS unset: not "every task" without a word
            raise ConfigError(
                f"{source}: an empty value is not valid for {flag}; expected "
                f"{setting.help.partition(', e.g.')[0]} (omit the option for all)"
            )
        if raw == "" and setting.default == "":
            values[setting.name] = setting.empty
            continue
        try:
            values[setting.name] = setting.parse(raw)
        except InvalidValue as error:
            shown = "" if setting.parse is env_name else f" {raw!r}"
            raise ConfigError(
                f"{source}:{shown} is not valid for {flag}; expected {error}"
            ) from None
    return values, sources


def resolve_settings(inputs: Inputs) -> Tau2Settings:
    """Resolve and validate every setting; raises ``ConfigError`` on a bad value."""
    values, sources = _parse_all(inputs)
    flag = inputs.spelled
    if values["resume"] and values["run_id"] and values["resume"] != values["run_id"]:
        raise ConfigError(
            f"{flag('resume')} {values['resume']!r} and {flag('run_id')} {values['run_id']!r} "
            f"disagree; give only {flag('resume')} RUN_ID to continue a run"
        )
    if not policy_for(values["profile"]).takes_agent_notes and sources["agent_notes"] != "default":
        raise ConfigError(
            f"{sources['agent_notes']}: {flag('agent_notes')} applies to the default profile "
            "only; the tau2 profile sends upstream's agent prompt (drop the option, or use "
            f"{flag('profile')} default)"
        )
    # the agent as code first: naming it twice is the problem to report, not a model's key
    if values["agent"] and sources["agent_model"] != "default":
        raise ConfigError(
            f"{sources['agent']}: {flag('agent')} {values['agent']!r} and "
            f"{sources['agent_model']} both name the agent; give one of them"
        )
    agent_source = inputs.load_agent(values["agent"], sources["agent"])
    if agent_source is not None and agent_source.is_fixture and sources["agent_model"] != "default":
        raise ConfigError(
            f"{sources['agent_model']}: an agent model is set, and the fixture "
            f"{agent_source.identity.source} names the agent too; drop one of them"
        )
    models = _models(values, sources)
    judge, agent, user = models
    if inputs.one_scenario:
        _refuse_unused_role_options(sources, inputs, models)
    else:
        _refuse_scripted_customer(
            sources, inputs, agent=agent, agent_source=agent_source, user=user
        )
    _check_cost_and_cache(values, sources, inputs, models)
    _check_baseline(values["baseline"], sources["baseline"], inputs.spelled("baseline"))
    # a replay never contacts an endpoint: it needs no key (a CI run reproduced on a laptop)
    if not (values["cache"] and values["cache_mode"] is CacheMode.REPLAY):
        for role, choice in (("agent", agent), ("user", user), ("judge", judge)):
            _check_key(role, choice, sources, inputs)
    return _settings(values, sources, agent_source, models=models)


def _refuse_scripted_customer(
    sources: Mapping[str, str],
    inputs: Inputs,
    *,
    agent: ModelSettings,
    agent_source: AgentSource | None,
    user: ModelSettings,
) -> None:
    """An agent under test (an endpoint, or Python code) facing the scripted customer by
    default: its score would not compare with tau2's, so the run asks for a customer model or
    an explicit ``builtin:customer``."""
    if not user.is_builtin or sources["user_model"] != "default":
        return
    if agent_source is not None:
        source = agent_source.identity.source
        where = source if agent_source.is_fixture else sources["agent"]
        what = f"the agent is Python code ({source})"
    elif not agent.is_builtin:
        where, what = sources["agent_model"], f"the agent {agent.name!r} is an endpoint"
    else:
        return  # a built-in agent: the offline self-check, or the floor
    flag = inputs.spelled
    raise ConfigError(
        f"{where}: {what}, but the simulated user would be the built-in scripted customer (it "
        "pastes the task and agrees to everything), so the score would not compare with tau2's; "
        f"set {flag('user_model')} (and {flag('user_base_url')}) to a model that plays the "
        f"customer, or {flag('user_model')}=builtin:customer to accept the scripted one"
    )


def settings_from_recorded(
    recorded: Mapping[str, Any],
    sources: Mapping[str, str],
    *,
    agent_source: AgentSource | None = None,
) -> Tau2Settings:
    """The settings whose :attr:`Tau2Settings.recorded` values are ``recorded``: what an xdist
    worker rebuilds from the plan its controller resolved and checked (nothing is read or
    checked again)."""
    values = {
        setting.name: typed_setting(setting.name, recorded[setting.name]) for setting in OPTIONS
    }
    return _settings(values, sources, agent_source, models=_models(values, sources))


_Models = tuple[ModelSettings | None, ModelSettings, ModelSettings]


def _models(values: Mapping[str, Any], sources: Mapping[str, str]) -> _Models:
    """The judge (None without one), the agent and the user."""
    judge = _model("judge", values, sources) if values["judge_model"] else None
    return judge, _model("agent", values, sources), _model("user", values, sources)


def _settings(
    values: Mapping[str, Any],
    sources: Mapping[str, str],
    agent_source: AgentSource | None,
    *,
    models: _Models,
) -> Tau2Settings:
    judge, agent, user = models
    return Tau2Settings(
        **{name: values[name] for name in _TYPED},
        agent=agent,
        user=user,
        judge=judge,
        recorded={name: plain_setting(value) for name, value in values.items()},
        sources=dict(sources),
        agent_source=agent_source,
    )


def _model(role: str, values: Mapping[str, Any], sources: Mapping[str, str]) -> ModelSettings:
    def endpoint(name: str) -> EndpointConfig:
        # every field was parsed and checked by its setting's parser above
        return EndpointConfig(
            model=name,
            base_url=values[f"{role}_base_url"] or None,
            api_key_env=values[f"{role}_api_key_env"],
            temperature=values[f"{role}_temperature"],
            top_p=values[f"{role}_top_p"],
            max_tokens=values[f"{role}_max_tokens"],
            extra_body=values[f"{role}_extra_body"] or {},
            timeout_seconds=values[f"{role}_timeout"],
            max_retries=values[f"{role}_max_retries"],
            max_connections=values[f"{role}_max_connections"],
            breaker_failures=values["breaker_failures"],
            breaker_window_seconds=values["breaker_window_seconds"],
            breaker_probe_seconds=values["breaker_probe_seconds"],
            max_reply_bytes=values["max_reply_bytes"],
        )

    try:
        return choose_model(role, values[f"{role}_model"], endpoint)
    except ConfigError as error:
        raise ConfigError(f"{sources[role + '_model']}: {error}") from error


def _refuse_unused_role_options(
    sources: Mapping[str, str], inputs: Inputs, models: _Models
) -> None:
    """An endpoint option given for a role played by a built-in model (or no judge) would
    silently do nothing."""
    judge, agent, user = models
    for role, choice in (("agent", agent), ("user", user), ("judge", judge)):
        given = [
            inputs.spelled(f"{role}_{suffix}")
            for suffix in _ENDPOINT_SUFFIXES
            if suffix not in ("model", "api_key_env")
            and sources[f"{role}_{suffix}"] == inputs.spelled(f"{role}_{suffix}")
        ]
        if not given:
            continue
        if choice is None:
            model = inputs.spelled(f"{role}_model")
            raise ConfigError(f"{given[0]} given without {model}: name the {role} model")
        if choice.endpoint is None:
            raise ConfigError(
                f"{given[0]} given with the built-in model {choice.name!r}; built-in models "
                "run locally: drop the option or name an endpoint model"
            )


def _check_key(
    role: str, choice: ModelSettings | None, sources: Mapping[str, str], inputs: Inputs
) -> None:
    """A role whose endpoint needs a key stops the run at start-up when its key variable is
    unset or empty: every request would fail (401), each scenario an infra error."""
    if choice is None or choice.endpoint is None:
        return
    problem = choice.endpoint.missing_key(inputs.environ)
    if problem:
        key_flag = inputs.spelled(f"{role}_api_key_env")
        raise ConfigError(
            f"{sources[role + '_model']}: the {role} model {choice.name!r}: {problem}; set it, "
            f"name another variable with {key_flag}, or say the endpoint takes "
            f"no key with {key_flag}={NO_API_KEY}"
        )


def _check_cost_and_cache(
    values: Mapping[str, Any], sources: Mapping[str, str], inputs: Inputs, models: _Models
) -> None:
    """A budget needs a price for every endpoint model; replay needs an existing cache file."""
    flag = inputs.spelled
    prices: PriceTable | None = values["prices"]
    if values["max_cost"] is not None:
        endpoint_models = [
            choice.endpoint.model
            for choice in models
            if choice is not None and choice.endpoint is not None
        ]
        unpriced = sorted({m for m in endpoint_models if prices is None or prices.price(m) is None})
        if unpriced:
            has, it = ("has", "it") if len(unpriced) == 1 else ("have", "them")
            raise ConfigError(
                f"{sources['max_cost']}: {flag('max_cost')} needs a price for every model, and "
                f"{', '.join(map(repr, unpriced))} {has} none; add {it} to {flag('prices')}, e.g. "
                f'{flag("prices")} \'{{"{unpriced[0]}": {{"input": 0.15, "output": 0.6}}}}\''
            )
    mode: CacheMode = values["cache_mode"]
    path = values["cache"]
    if sources["cache_mode"] != "default" and mode is not CacheMode.OFF and not path:
        raise ConfigError(
            f"{sources['cache_mode']}: {flag('cache_mode')} {mode.value} needs a cache file; "
            f"give it with {flag('cache')} PATH"
        )
    if mode is CacheMode.REPLAY and not Path(path).is_file():
        raise ConfigError(
            f"{sources['cache']}: {path!r} is not valid for {flag('cache')} with "
            f"{flag('cache_mode')} replay; expected an existing cache file (the one a run with "
            f"{flag('cache')} wrote)"
        )


def _check_baseline(path: str, source: str, flag: str) -> None:
    """A baseline the gate could not read would be found only after the whole run: it must be
    the folder of a finished run, whose ``summary.json`` reads."""
    if not path:
        return
    folder = Path(path)
    if not folder.exists():
        problem = "it does not exist"
    elif not folder.is_dir():
        problem = "it is a file"
    else:
        try:
            summary = read_summary(folder)
        except ArtifactError as error:
            problem = "its summary.json cannot be read: " + " ".join(str(error).split())
        else:
            if summary is not None:
                return
            problem = "it has no summary.json (a run folder has one once its run ended)"
    raise ConfigError(
        f"{source}: {path!r} is not valid for {flag}; expected the folder of an earlier run "
        f"holding its summary.json, but {problem}"
    )
