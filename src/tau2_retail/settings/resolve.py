"""Resolve the settings: one precedence, one parse, every check, one error type.

:func:`resolve_settings` takes where the raw values come from (:class:`Inputs`: the option of
the command line, and the ini file for pytest) and returns the frozen
:class:`~tau2_retail.settings.schema.Tau2Settings`. The option wins, then the ``TAU2_*``
environment variable, then the ini key, then the default. Every problem raises ``ConfigError``
naming where the value came from, the value, the option as the caller spells it
(``--tau2-trials`` for pytest, ``--seed`` for ``python -m tau2_retail run``) and what is
accepted; the pytest plugin turns it into ``pytest.UsageError``, the command line into exit
status 2. The rules across settings read the typed settings (``settings.cache_mode``); only
where a value came from is looked up by the setting's name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from tau2_retail.engine.profiles import policy_for
from tau2_retail.errors import ArtifactError, ConfigError
from tau2_retail.models.cache import CacheMode
from tau2_retail.models.choice import ROLES, ModelChoice
from tau2_retail.models.config import NO_API_KEY
from tau2_retail.models.request_headers import headers_problem
from tau2_retail.models.secrets import redact_text
from tau2_retail.results.summary import read_summary
from tau2_retail.settings import parsers as p
from tau2_retail.settings.declare import Setting, at, build, declarations
from tau2_retail.settings.parsers import InvalidValue
from tau2_retail.settings.schema import AgentSource, RoleSettings, Tau2Settings
from tau2_retail.tau2_format.importer import read_results

__all__ = [
    "AgentLoader",
    "Inputs",
    "resolve_settings",
    "resolve_settings_apart",
    "settings_from_recorded",
]

AgentLoader = Callable[[str, str], AgentSource | None]
"""``(spec, spec_source)``: the agent as code, or None; raises ``ConfigError``."""

#: a role's settings that do nothing for a role played by a built-in model
_ENDPOINT_ONLY = tuple(
    f.name for f in dataclasses.fields(RoleSettings) if f.name not in ("model", "api_key_env")
)


def _no_ini(setting: Setting) -> str | None:
    return None


def _declared_default(setting: Setting) -> str:
    return setting.default


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
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
      compared: an endpoint agent may face the scripted customer.
    """

    flag: Callable[[Setting], str]
    option: Callable[[Setting], str | None]
    load_agent: AgentLoader
    environ: Mapping[str, str]
    ini: Callable[[Setting], str | None] = _no_ini
    applies: Callable[[Setting], bool] = lambda setting: True
    default: Callable[[Setting], str] = _declared_default
    one_scenario: bool = False

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


@dataclasses.dataclass(frozen=True, slots=True)
class _Where:
    """Where the values of ``model`` came from, and how the caller spells their options."""

    model: type[Tau2Settings]
    inputs: Inputs
    sources: Mapping[str, str]

    def source(self, *attr_path: str) -> str:
        return self.sources[at(self.model, *attr_path).name]

    def flag(self, *attr_path: str) -> str:
        return self.inputs.flag(at(self.model, *attr_path))

    def given(self, *attr_path: str) -> bool:
        return self.source(*attr_path) != "default"


_UNSHOWN: Final = (p.env_name, p.headers, p.json_object)
"""Parsers of values that may hold a secret (a key pasted as a variable's name, a header's
value, an extra body's): a value they refuse is not echoed."""


def _parse(setting: Setting, raw: str, source: str, flag: str) -> Any:
    if setting.refuse_blank and source == flag and not raw.strip():
        # e.g. --tau2-tasks=$TASKS with TASKS unset: not "every task" without a word
        raise ConfigError(
            f"{source}: an empty value is not valid for {flag} (an unset variable?); omit the "
            f"option for {setting.refuse_blank}"
        )
    if raw == "" and setting.default == "":
        return setting.empty
    try:
        return setting.parse(raw)
    except InvalidValue as error:
        # never a key-like value (a key pasted in the wrong place) or a URL's password (an
        # "@" left after the userinfo went: a password holding "/" hides its start)
        shown = f" {redact_text(raw)!r}"
        if setting.parse in _UNSHOWN or "@" in redact_text(raw):
            shown = " the value given"
        raise ConfigError(f"{source}:{shown} is not valid for {flag}; expected {error}") from None


def resolve_settings(inputs: Inputs, model: type[Tau2Settings] = Tau2Settings) -> Tau2Settings:
    """Resolve and validate every setting of ``model``; raises ``ConfigError`` on a bad value
    or on a need of the run this environment does not meet (:func:`resolve_settings_apart`)."""
    settings, unmet = resolve_settings_apart(inputs, model)
    if unmet is not None:
        raise unmet
    return settings


def resolve_settings_apart(
    inputs: Inputs, model: type[Tau2Settings] = Tau2Settings
) -> tuple[Tau2Settings, ConfigError | None]:
    """The settings of ``model``, and apart what a run with them lacks here, or None.

    A bad value, or settings that contradict each other, raise ``ConfigError``. What is
    returned apart is a need of the run that the values themselves cannot show: a role's key
    variable unset, an agent under test facing the scripted customer by default, a baseline or
    a replay cache that is not there. The pytest plugin raises it only in a session that
    collects a scenario: the ini file, the environment and a ``tau2_agent`` fixture apply to
    every pytest run of a project, its own tests included.
    """
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for setting in declarations(model):
        raw, source = inputs.raw(setting)
        sources[setting.name] = source
        values[setting.name] = _parse(setting, raw, source, inputs.flag(setting))
    where = _Where(model, inputs, sources)
    _check_headers(values, where)
    # who plays each role is derived here: a bad model stops it, naming where it came from
    settings = build(model, values, sources=sources)
    _check_run(settings, where)
    agent_source = inputs.load_agent(settings.agent_code, where.source("agent_code"))
    if agent_source is not None and agent_source.is_fixture and where.given("agent", "model"):
        raise ConfigError(
            f"{where.source('agent', 'model')}: an agent model is set, and the fixture "
            f"{agent_source.identity.source} names the agent too; drop one of them"
        )
    settings = dataclasses.replace(settings, agent_source=agent_source)
    _refuse_unused_role_options(settings, where)
    _check_cost_and_cache(settings, where)
    try:
        _check_needs(settings, where)
    except ConfigError as unmet:
        return settings, unmet
    return settings, None


def _check_needs(settings: Tau2Settings, where: _Where) -> None:
    """What a run with these settings needs from this environment (see
    :func:`resolve_settings_apart`)."""
    if not where.inputs.one_scenario:
        _refuse_the_scripted_customer(settings, where)
    _check_replay_file(settings, where)
    _check_baseline(settings.baseline, where.source("baseline"), where.flag("baseline"))
    # first: an OPENAI_BASE_URL that is no URL (``127.0.0.1:8000/v1``) read as a hosted
    # endpoint asked for a key, sending a local server's user the wrong way
    for role, choice in _players(settings):
        _check_client(role, choice, where)
    # a replay never contacts an endpoint: it needs no key (a CI run reproduced on a laptop)
    if not (settings.cache and settings.cache_mode is CacheMode.REPLAY):
        for role, choice in _players(settings):
            _check_key(role, choice, where)


def settings_from_recorded(
    recorded: Mapping[str, Any],
    sources: Mapping[str, str],
    *,
    agent_source: AgentSource | None = None,
    model: type[Tau2Settings] = Tau2Settings,
) -> Tau2Settings:
    """The settings whose :attr:`Tau2Settings.recorded` values are ``recorded``: what an xdist
    worker rebuilds from the plan its controller resolved and checked (nothing is read or
    checked again)."""
    values = {
        setting.name: setting.decode(recorded[setting.name], "the run plan")
        for setting in declarations(model)
    }
    return build(model, values, sources=dict(sources), agent_source=agent_source)


def _players(settings: Tau2Settings) -> tuple[tuple[str, ModelChoice | None], ...]:
    roles = settings.roles
    return (("agent", roles.agent), ("user", roles.user), ("judge", roles.judge))


def _check_run(settings: Tau2Settings, where: _Where) -> None:
    """The run id, the profile's notes and export, and the agent named twice."""
    if settings.resume and settings.run_id and settings.resume != settings.run_id:
        resume = where.flag("resume")
        raise ConfigError(
            f"{resume} {settings.resume!r} and {where.flag('run_id')} {settings.run_id!r} "
            f"disagree; give only {resume} RUN_ID to continue a run"
        )
    notes_problem = policy_for(settings.profile).agent_notes_problem()
    if notes_problem is not None and where.given("agent_notes"):
        raise ConfigError(
            f"{where.source('agent_notes')}: {where.flag('agent_notes')} applies to the default "
            f"profile only; {notes_problem} (drop the option, or "
            f"use {where.flag('profile')} default)"
        )
    refusal = policy_for(settings.profile).upstream_export_problem()
    if settings.export_tau2 and refusal is not None:
        raise ConfigError(
            f"{where.source('export_tau2')}: {where.flag('export_tau2')} "
            f"{settings.export_tau2!r}: {refusal}"
        )
    # the agent as code first: naming it twice is the problem to report, not a model's key
    if settings.agent_code and where.given("agent", "model"):
        raise ConfigError(
            f"{where.source('agent_code')}: {where.flag('agent_code')} {settings.agent_code!r} "
            f"and {where.source('agent', 'model')} both name the agent; give one of them"
        )


def _refuse_the_scripted_customer(settings: Tau2Settings, where: _Where) -> None:
    """An agent under test (an endpoint, or Python code) facing the scripted customer by
    default: its score would not compare with tau2's, so the run asks for a customer model or
    an explicit ``builtin:customer``."""
    agent, user = settings.roles.agent, settings.roles.user
    if not user.is_builtin or where.given("user", "model"):
        return
    agent_source = settings.agent_source
    if agent_source is not None:
        source = agent_source.identity.source
        origin = source if agent_source.is_fixture else where.source("agent_code")
        what = f"the agent is Python code ({source})"
    elif not agent.is_builtin:
        origin, what = where.source("agent", "model"), f"the agent {agent.name!r} is an endpoint"
    else:
        return  # a built-in agent: the offline self-check, or the floor
    user_model = where.flag("user", "model")
    raise ConfigError(
        f"{origin}: {what}, but the simulated user would be the built-in scripted customer (it "
        "pastes the task and agrees to everything), so the score would not compare with tau2's; "
        f"set {user_model} (and {where.flag('user', 'base_url')}) to a model that plays the "
        f"customer, or {user_model}=builtin:customer to accept the scripted one"
    )


def _refuse_unused_role_options(settings: Tau2Settings, where: _Where) -> None:
    """An endpoint option given on the command line for a role played by a built-in model, by
    the agent's code, or by no judge would silently do nothing (the ini file's and the
    environment's serve every run of a project, and stay quiet)."""
    for role, choice in _players(settings):
        given = [
            where.flag(role, name)
            for name in _ENDPOINT_ONLY
            if where.source(role, name) == where.flag(role, name)
        ]
        if not given:
            continue
        if role == "agent" and settings.agent_source is not None:
            raise ConfigError(
                f"{given[0]} configures an endpoint agent, but the agent is code "
                f"({settings.agent_source.identity.source}), which calls its model itself: "
                "configure the model in the agent's code, and drop the option"
            )
        if choice is None:
            raise ConfigError(
                f"{given[0]} given without {where.flag(role, 'model')}: name the {role} model"
            )
        if choice.endpoint is None:
            raise ConfigError(
                f"{given[0]} given with the built-in model {choice.name!r}; built-in models "
                "run locally: drop the option or name an endpoint model"
            )


def _check_headers(values: Mapping[str, Any], where: _Where) -> None:
    """A role's own headers that would take the key's place (before the roles are built:
    the endpoint's own check could name only the model)."""
    for role in ROLES:
        headers = values[at(where.model, role, "headers").name] or {}
        key_header = values[at(where.model, role, "key_header").name] or None
        key_env = values[at(where.model, role, "api_key_env").name]
        bearer = key_header is None and key_env.lower() != NO_API_KEY
        problem = headers_problem(headers, key_header=key_header, bearer_key=bearer)
        if problem is not None:
            raise ConfigError(
                f"{where.source(role, 'headers')}: {problem}; send the key in another header "
                f"with {where.flag(role, 'key_header')}, or {_no_key(role, where)}"
            )


def _no_key(role: str, where: _Where) -> str:
    return f"say the endpoint takes no key with {where.flag(role, 'api_key_env')}={NO_API_KEY}"


def _check_key(role: str, choice: ModelChoice | None, where: _Where) -> None:
    """A role whose endpoint needs a key stops the run at start-up when its key variable is
    unset or empty: every request would fail (401), each scenario an infra error."""
    if choice is None or choice.endpoint is None:
        return
    problem = choice.endpoint.missing_key(where.inputs.environ)
    if problem:
        raise ConfigError(
            f"{where.source(role, 'model')}: the {role} model {choice.name!r}: {problem}; set "
            f"it, name another variable with {where.flag(role, 'api_key_env')}, or "
            f"{_no_key(role, where)}"
        )


def _check_client(role: str, choice: ModelChoice | None, where: _Where) -> None:
    """A role whose HTTP client cannot be built here (a proxy variable, ``SSL_CERT_FILE`` or
    ``OPENAI_BASE_URL`` it cannot use) stops the run at start-up: in a scenario's set-up it was
    a traceback, and every scenario lost."""
    if choice is None or choice.endpoint is None:
        return
    # here, not at the top: the openai package is 500 modules, and a session without an
    # endpoint (the team's own tests, the offline run) must not pay for their import
    from tau2_retail.models.sdk_client import client_problem

    problem = client_problem(choice.endpoint)
    if problem:
        # the environment's fault, not the option's: named by the endpoint, not by a flag
        at = choice.endpoint.base_url or "the default base URL"
        raise ConfigError(f"the {role} endpoint ({choice.name!r} at {at}): {problem}")


def _check_cost_and_cache(settings: Tau2Settings, where: _Where) -> None:
    """A budget needs a price for every endpoint model; a cache mode needs a cache file."""
    prices = settings.prices
    if settings.max_cost is not None:
        endpoint_models = [
            choice.endpoint.model
            for _, choice in _players(settings)
            if choice is not None and choice.endpoint is not None
        ]
        unpriced = sorted({m for m in endpoint_models if prices is None or prices.price(m) is None})
        if unpriced:
            flag = where.flag("prices")
            has, it = ("has", "it") if len(unpriced) == 1 else ("have", "them")
            raise ConfigError(
                f"{where.source('max_cost')}: {where.flag('max_cost')} needs a price for every "
                f"model, and {', '.join(map(repr, unpriced))} {has} none; add {it} to {flag}, "
                f'e.g. {flag} \'{{"{unpriced[0]}": {{"input": 0.15, "output": 0.6}}}}\''
            )
    mode, path = settings.cache_mode, settings.cache
    cache, cache_mode = where.flag("cache"), where.flag("cache_mode")
    if where.given("cache_mode") and mode is not CacheMode.OFF and not path:
        raise ConfigError(
            f"{where.source('cache_mode')}: {cache_mode} {mode.value} needs a cache file; "
            f"give it with {cache} PATH"
        )


def _check_replay_file(settings: Tau2Settings, where: _Where) -> None:
    """Replay reads the cache file a recording run wrote: it must be there."""
    mode, path = settings.cache_mode, settings.cache
    cache, cache_mode = where.flag("cache"), where.flag("cache_mode")
    if mode is CacheMode.REPLAY and not Path(path).is_file():
        raise ConfigError(
            f"{where.source('cache')}: {path!r} is not valid for {cache} with {cache_mode} "
            f"replay; expected an existing cache file (the one a run with {cache} wrote)"
        )


def _check_baseline(path: str, source: str, flag: str) -> None:
    """A baseline the gate could not read would be found only after the whole run: it must be
    the folder of a finished run, whose ``summary.json`` reads, or an upstream tau2-bench
    ``results.json`` (:func:`_upstream_file_problem`)."""
    if not path:
        return
    folder = Path(path)
    if not folder.exists():
        problem = "it does not exist"
    elif not folder.is_dir():
        problem = _upstream_file_problem(folder)
        if not problem:
            return
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
        f"holding its summary.json, or an upstream tau2-bench results.json, but {problem}"
    )


def _upstream_file_problem(path: Path) -> str:
    """Why the file ``path`` is not an upstream retail ``results.json`` (empty when it is one)."""
    try:
        read_results(path)
    except ArtifactError as error:
        return "it is a file that is not an upstream results.json: " + " ".join(str(error).split())
    return ""
