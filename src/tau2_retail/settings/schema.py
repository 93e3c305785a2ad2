"""The settings of a run, each declared once: the fields of :class:`Tau2Settings`.

Each field is a ``--tau2-*`` pytest option, a ``tau2_*`` ini key and, where it is a deployment
detail, a ``TAU2_*`` environment variable; the settings of one scenario are also flags of
``python -m tau2_retail run`` (``--agent-model``). A role's settings are :class:`RoleSettings`,
declared once and used for the agent, the simulated user and the judge. Nothing here knows
pytest or argparse: the adapters walk the declarations (:mod:`.declare`), and
:mod:`.resolve` parses the raw values, applies the precedence and checks the rules across
settings. Reading a value is attribute access: ``settings.trials``, ``settings.agent.model``;
who plays each role, as the harness takes it, is derived once: ``settings.roles``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import PlainSerializer, PlainValidator

from tau2_retail.data.files import default_cache_dir
from tau2_retail.engine.conversation_setup import Limits
from tau2_retail.engine.harness import Roles
from tau2_retail.engine.profiles import ProfileName
from tau2_retail.errors import ConfigError
from tau2_retail.models.agent import AgentFactory, AgentIdentity
from tau2_retail.models.bounded import DEFAULT_MAX_REPLY_BYTES
from tau2_retail.models.builtin import BUILTIN_CUSTOMER, BUILTIN_ORACLE
from tau2_retail.models.cache import CacheMode
from tau2_retail.models.choice import ModelChoice, choose_model
from tau2_retail.models.config import DEFAULT_API_KEY_ENV, EndpointConfig
from tau2_retail.models.prices import ModelPrice, PriceTable
from tau2_retail.models.secrets import json_redaction
from tau2_retail.settings import parsers as p
from tau2_retail.settings.declare import Identity, at, declarations, group, named, setting

__all__ = [
    "OPTIONS",
    "REDACTED_JSON_FLAGS",
    "SETTINGS",
    "AgentSource",
    "RoleSettings",
    "Tau2Settings",
]

# the groups of ``python -m tau2_retail run --help``
_AGENT = "agent model (the agent)"
_LIMITS = "limits, seed and output"
_CONNECTIONS = "connections (every endpoint)"
_COST = "cost and response cache (as --tau2-prices, --tau2-cache)"


def _price_mapping(table: PriceTable) -> dict[str, ModelPrice]:
    return dict(sorted(table.models.items()))


def _price_table(value: Any) -> PriceTable:
    if isinstance(value, PriceTable):
        return value
    try:
        return PriceTable.parse(value)
    except ConfigError as error:
        raise ValueError(str(error)) from None


Prices = Annotated[
    PriceTable,
    PlainSerializer(_price_mapping, return_type=dict[str, ModelPrice]),
    PlainValidator(_price_table),
]
"""A price table, recorded as ``--tau2-prices`` takes it: ``{model: price}``."""


def _model_help(who: str, default: str) -> str:
    return f"model of {who}: a model id at the endpoint" + (
        f", or builtin (default {default})" if default else " (default: no judge)"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSource:
    """Where the agent comes from: an import string (``factory`` set, or ``pending``: not
    imported yet) or a fixture (neither)."""

    identity: AgentIdentity
    factory: AgentFactory | None = None
    #: an import string whose module is not imported yet: the pytest plugin imports an agent of
    #: the ini file or the environment only once a session collects a scenario
    pending: bool = False

    @property
    def is_fixture(self) -> bool:
        return self.factory is None and not self.pending

    def record(self) -> dict[str, Any]:
        """The ``code`` part of the agent's ``ModelRecord``."""
        return {
            "source": self.identity.source,
            "kind": "fixture" if self.is_fixture else "import",
            "name": self.identity.name,
            "version": self.identity.version,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RoleSettings:
    """Who plays a role and how its endpoint is called (``--tau2-<role>-*``)."""

    model: str | None = setting(p.text, help=_model_help, env=True)
    base_url: str | None = setting(p.url, help="OpenAI-compatible base URL of {who}", env=True)
    api_key_env: str = setting(
        p.env_name,
        default=DEFAULT_API_KEY_ENV,
        help="NAME of the environment variable holding the API key of {who}",
        env=True,
    )
    key_header: str | None = setting(
        p.header_name,
        help="header carrying the API key of {who}, as it is (e.g. api-key for Azure OpenAI; "
        "default: Authorization: Bearer KEY)",
        env=True,
        refuse_blank="the key as Authorization: Bearer",
    )
    headers: dict[str, str] | None = setting(
        p.headers,
        help="JSON object of headers sent on every request of {who} (a gateway's own); their "
        "values are masked like the key and never recorded",
        env=True,
        refuse_blank="no headers of your own",
        secret=True,
    )
    temperature: float | None = setting(
        p.endpoint_value("temperature"), help="sampling temperature of {who}"
    )
    top_p: float | None = setting(p.endpoint_value("top_p"), help="top_p of {who}")
    max_tokens: int | None = setting(
        p.endpoint_value("max_tokens"), help="max tokens per reply of {who}"
    )
    extra_body: dict[str, Any] | None = setting(
        p.json_object,
        help="JSON object merged into every request body of {who} (server-specific fields)",
        secret=True,
    )
    timeout: float = setting(
        p.endpoint_value("timeout_seconds"),
        default="120",
        help="seconds per request attempt of {who}, connect to last byte",
    )
    max_retries: int = setting(
        p.endpoint_value("max_retries"), default="4", help="retries per request of {who}"
    )
    max_connections: int | None = setting(
        p.endpoint_value("max_connections"),
        help="HTTP connections at most to the endpoint of {who}, shared by the process's "
        "conversations (default: the openai package's, 1000)",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Tau2Settings:
    """Every resolved setting as a typed attribute (safe to print: keys are never held).

    ``sources`` says where each value came from (``--tau2-trials``, ``TAU2_OUTPUT_DIR``, ``ini
    tau2_trials``, ``default``) by setting name; ``agent_source`` is the agent as code
    (``--tau2-agent`` or a ``tau2_agent`` fixture), else None. ``roles`` is derived: the agent,
    user and judge these settings choose, as the harness takes them; a bad model raises
    ``ConfigError`` naming where it came from. ``recorded`` is every value as plain JSON (what
    ``run_args.json`` records and what an xdist worker receives).
    """

    agent_code: str = setting(
        p.agent_spec,
        name="agent",
        help="your agent as Python code: package.module:factory, a class or function making a "
        "fresh agent (respond or converse) per scenario; instead of --tau2-agent-model",
        env=True,
        empty="",
        run=_AGENT,
    )
    data_dir: str = setting(
        p.text,
        help="folder with the upstream data files",
        env=True,
        empty="",
        path=True,
        default_note=lambda: f"default: {default_cache_dir()}",
    )
    agent: RoleSettings = group(
        who="the agent", table="The agent", run=_AGENT, defaults={"model": BUILTIN_ORACLE}
    )
    user: RoleSettings = group(
        who="the simulated user",
        table="The simulated user",
        run="user model (the simulated user)",
        defaults={"model": BUILTIN_CUSTOMER},
    )
    judge: RoleSettings = group(
        who="the NL-assertion judge",
        table="The judge",
        run="judge model (the NL-assertion judge)",
        defaults={"model": ""},
    )
    profile: ProfileName = setting(
        p.profile_name,
        default="default",
        help="default (ours: notes, end_conversation, our judge) or tau2 (upstream tau2-bench's "
        "prompts, tools, endings and reward, from its pinned sources)",
        env=True,
        run=_LIMITS,
        identity=Identity.ADOPTED,
    )
    breaker_failures: int = setting(
        p.endpoint_value("breaker_failures"),
        default="5",
        help="consecutive failed attempts after which an endpoint counts as down: its "
        "remaining scenarios end at once as infra errors (per process)",
        run=_CONNECTIONS,
    )
    breaker_window_seconds: float = setting(
        p.endpoint_value("breaker_window_seconds"),
        default="10",
        help="seconds without any successful reply, from the first of those failures, before "
        "an endpoint counts as down (so a burst of refused connections is not 'down')",
        run=_CONNECTIONS,
    )
    breaker_probe_seconds: float = setting(
        p.endpoint_value("breaker_probe_seconds"),
        default="30",
        help="seconds between probes of an endpoint that is down (one request; success closes it)",
        run=_CONNECTIONS,
    )
    max_reply_bytes: int = setting(
        p.endpoint_value("max_reply_bytes"),
        default=str(DEFAULT_MAX_REPLY_BYTES),
        help="the largest reply body read from an endpoint, counted as it arrives and after "
        "decompression (default 8 MiB); a larger one ends the scenario as an infra error",
        run=_CONNECTIONS,
    )
    agent_notes: bool = setting(
        p.on_off,
        default="on",
        help="append our Additional Notes to the policy (off: the policy alone, as upstream tau2)",
        run=_LIMITS,
        identity=Identity.ADOPTED,
    )
    trials: int = setting(
        p.at_least(1),
        default="1",
        help="runs of each scenario (pass^k over them)",
        identity=Identity.ADOPTED,
    )
    seed: int = setting(
        p.at_least(0),
        default="300",
        help="base seed; trial seeds follow tau2's rule",
        run=_LIMITS,
        identity=Identity.ADOPTED,
    )
    tasks: tuple[str, ...] = setting(
        p.task_ids,
        help="only these task ids, exactly (5 is task 5 only), e.g. 0,5,17; A-B is A to B, "
        "both included, e.g. 0-9,17",
        empty=(),
        refuse_blank="all",
        identity=Identity.ADOPTED,
    )
    shard: tuple[int, int] | None = setting(
        p.shard,
        help="I/N: run only the I-th of N balanced shares of the selected scenarios "
        "(all trials of a task in one share); merge the shards' run directories with "
        "python -m tau2_retail merge",
        identity=Identity.ADOPTED,
    )
    split: str = setting(
        p.choice(*p.SPLITS),
        default="base",
        help="task split: base (all 114), train or test",
        identity=Identity.ADOPTED,
    )
    max_steps: int = setting(
        p.at_least(1),
        default="200",
        help="routed messages before max_steps (each tool call's result is one in the default "
        "profile; a turn runs only the calls that fit)",
        run=_LIMITS,
        identity=Identity.ADOPTED,
    )
    max_errors: int = setting(
        p.at_least(1),
        default="10",
        help="tool errors before too_many_errors",
        run=_LIMITS,
        identity=Identity.ADOPTED,
    )
    max_duration: float = setting(
        p.positive(),
        default="900",
        help="wall-clock seconds per scenario before timeout",
        run=_LIMITS,
        identity=Identity.ADOPTED,
    )
    concurrency: int = setting(
        p.at_least(1),
        default="1",
        help="scenarios in flight per pytest process, started ahead of their tests "
        "(under xdist, per worker: use --dist each, which deals each worker its share)",
    )
    output_dir: str = setting(
        p.text,
        default="tau2_runs",
        help="folder of run directories (default: tau2_runs in pytest's rootdir)",
        env=True,
        path=True,
    )
    run_id: str = setting(
        p.run_name,
        help="run directory name, new (default: the UTC time, YYYYMMDD-HHMMSS-xxxxxx)",
        empty="",
    )
    resume: str = setting(
        p.run_name,
        help="RUN_ID: re-run only the scenarios without complete artifacts, with the stored "
        "settings",
        empty="",
    )
    export_tau2: str = setting(
        p.text,
        help="PATH: when the run ends, write it as upstream tau2-bench's results.json there "
        "(tau2 profile only; on resume too; a shard leaves it to `python -m tau2_retail merge`)",
        env=True,
        empty="",
        path=True,
    )
    prices: Prices | None = setting(
        p.prices,
        help='JSON prices in USD per million tokens by model, e.g. {"my-model": {"input": 0.15, '
        '"output": 0.6, "cached_input": 0.075}} (cached_input optional); the run reports its '
        "cost per role and scenario",
        env=True,
        run=_COST,
    )
    max_cost: float | None = setting(
        p.positive(),
        help="USD, a cap: each model request reserves its estimated cost first and is not sent "
        "when it would pass this (its scenario stops unscored, resumable); needs "
        "--tau2-prices for every model",
    )
    cache: str = setting(
        p.text,
        help="PATH of the response cache (SQLite): every completion is stored and served again "
        "to an identical request",
        env=True,
        empty="",
        run=_COST,
    )
    cache_mode: CacheMode = setting(
        p.cache_mode,
        default="read-write",
        help="read-write (default), replay (never contact an endpoint: a miss is an infra "
        "error) or off",
        env=True,
        run=_COST,
    )
    min_pass_rate: float | None = setting(
        p.unit_range(),
        help="CI gate: exit status from the overall success rate (0..1) instead of test failures",
        refuse_blank="no threshold",
    )
    max_infra_errors: int = setting(
        p.at_least(0), default="0", help="CI gate: infra errors tolerated (default 0)"
    )
    baseline: str = setting(
        p.text,
        help="CI gate: RUN_DIR of an earlier run, or an upstream tau2-bench results.json, to "
        "compare the success rate against, paired by task and trial (it must read: checked "
        "at start-up)",
        empty="",
        path=True,
        refuse_blank="no baseline",
    )
    max_regression: float | None = setting(
        p.unit_range(),
        help="CI gate: largest drop of the success rate against --tau2-baseline (0..1, default 0)",
        refuse_blank="the default, 0",
    )
    regression_alpha: float | None = setting(
        p.open_unit,
        help="CI gate: significance level A (0 < A < 1, e.g. 0.05); a drop beyond "
        "--tau2-max-regression fails only when the paired exact McNemar p-value is <= A, and "
        "--tau2-min-pass-rate fails only when the upper bound of the rate's 95 percent "
        "interval is below it "
        "(default: unset, the point estimates decide)",
        env=True,
    )
    # -- not settings: where the values came from, the agent as code, and what is derived
    sources: Mapping[str, str] = field(default_factory=dict)
    agent_source: AgentSource | None = None
    roles: Roles = field(init=False)

    def __post_init__(self) -> None:
        judge = self._choose("judge", self.judge) if self.judge.model else None
        agent = self._choose("agent", self.agent)
        object.__setattr__(
            self, "roles", Roles(agent=agent, user=self._choose("user", self.user), judge=judge)
        )

    def _choose(self, role: str, declared: RoleSettings) -> ModelChoice:
        def endpoint(name: str) -> EndpointConfig:
            # every field was parsed and checked by its setting's parser
            return EndpointConfig(
                model=name,
                base_url=declared.base_url or None,
                api_key_env=declared.api_key_env,
                key_header=declared.key_header or None,
                headers=declared.headers or {},
                temperature=declared.temperature,
                top_p=declared.top_p,
                max_tokens=declared.max_tokens,
                extra_body=declared.extra_body or {},
                timeout_seconds=declared.timeout,
                max_retries=declared.max_retries,
                max_connections=declared.max_connections,
                breaker_failures=self.breaker_failures,
                breaker_window_seconds=self.breaker_window_seconds,
                breaker_probe_seconds=self.breaker_probe_seconds,
                max_reply_bytes=self.max_reply_bytes,
            )

        try:
            return choose_model(role, declared.model or "", endpoint)
        except ConfigError as error:
            model = at(type(self), role, "model")
            raise ConfigError(f"{self.sources.get(model.name, model.flag)}: {error}") from error

    def source(self, *attr_path: str) -> str:
        """Where the setting at ``attr_path`` came from: ``settings.source("agent", "model")``."""
        return self.sources[at(type(self), *attr_path).name]

    @property
    def recorded(self) -> dict[str, Any]:
        """Every setting's value as plain JSON, by name (the codec's form of its type)."""
        return {s.name: s.encode(s.value_of(self)) for s in declarations(type(self))}

    def limits(self) -> Limits:
        """When a conversation is cut short, as these settings say."""
        return Limits(
            max_steps=self.max_steps,
            max_errors=self.max_errors,
            max_duration_seconds=self.max_duration,
        )

    @property
    def is_offline_self_check(self) -> bool:
        roles = self.roles
        return (
            self.agent_source is None
            and roles.agent.is_builtin
            and roles.user.is_builtin
            and roles.judge is None
        )

    def describe_agent(self) -> str:
        if self.agent_source is not None:
            return f"code {self.agent_source.identity.describe()}"
        return self.roles.agent.describe()


OPTIONS = declarations(Tau2Settings)
"""Every setting, in the order ``pytest --help`` lists them."""

SETTINGS = named(Tau2Settings)
"""The settings by name."""

REDACTED_JSON_FLAGS: frozenset[str] = frozenset(
    setting.flag for setting in OPTIONS if json_redaction(setting.attr_path[-1]) is not None
)
"""The pytest options whose JSON a recorded command line redacts (extra bodies, headers)."""
