"""The ``tau2`` options: declared once, resolved with precedence, validated at start-up.

Every setting is a ``--tau2-*`` option and a ``tau2_*`` ini key; endpoints, models and
folders also read a ``TAU2_*`` environment variable. The option wins, then the environment,
then the ini file, then the default. A value that cannot work raises ``pytest.UsageError``
naming the option, the value and what is accepted.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest

from tau2_retail import codec
from tau2_retail.data.files import default_cache_dir
from tau2_retail.engine.profiles import PROFILE_NAMES, ProfileName, policy_for
from tau2_retail.errors import ConfigError
from tau2_retail.models.agent import parse_agent_spec
from tau2_retail.models.bounded import DEFAULT_MAX_REPLY_BYTES
from tau2_retail.models.builtin import BUILTIN_CUSTOMER, BUILTIN_ORACLE
from tau2_retail.models.cache import CacheMode
from tau2_retail.models.choice import ROLES, ModelChoice, choose_model
from tau2_retail.models.config import NO_API_KEY, EndpointConfig
from tau2_retail.models.prices import ModelPrice, PriceTable
from tau2_retail.models.secrets import strip_userinfo
from tau2_retail.plugins.agents import AgentSource, load_agent_source
from tau2_retail.results.artifacts import MAX_NAME_CHARS

__all__ = [
    "OPTIONS",
    "ModelSettings",
    "Setting",
    "Tau2Settings",
    "add_options",
    "plain_setting",
    "resolve_settings",
    "typed_setting",
]

SPLITS = ("base", "train", "test")
DEFAULT_MODELS = {"agent": BUILTIN_ORACLE, "user": BUILTIN_CUSTOMER, "judge": ""}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# the lowest pytest is 9.0 (its built-in subtests); 9.1 added union types for ini values
_PYTEST_VERSION = tuple(map(int, re.findall(r"\d+", pytest.__version__)[:2]))


class _Invalid(ValueError):
    """A raw value failed its parser; the message says what is accepted."""


def _int_at_least(low: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise _Invalid(f"an integer >= {low}") from None
        if value < low:
            raise _Invalid(f"an integer >= {low}")
        return value

    return parse


def _float_range(
    low: float, high: float | None, *, low_open: bool = False
) -> Callable[[str], float]:
    accepted = f"a number {'>' if low_open else '>='} {low}" + (f" and <= {high}" if high else "")

    def parse(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise _Invalid(accepted) from None
        if not math.isfinite(value) or value < low or (low_open and value == low):
            raise _Invalid(accepted)
        if high is not None and value > high:
            raise _Invalid(accepted)
        return value

    return parse


def _open_unit(raw: str) -> float:
    """A level strictly between 0 and 1 (a significance level: 0 and 1 decide nothing)."""
    try:
        value = float(raw)
    except ValueError:
        raise _Invalid("a number > 0 and < 1, e.g. 0.05") from None
    if not 0 < value < 1:  # also rejects nan
        raise _Invalid("a number > 0 and < 1, e.g. 0.05")
    return value


def _text(raw: str) -> str:
    return raw.strip()


def _url(raw: str) -> str:
    # A user:password@ part is dropped here, before the value is shown or stored anywhere;
    # the key travels as the bearer key from --tau2-<role>-api-key-env.
    value = strip_userinfo(raw.strip())
    if value and not value.startswith(("http://", "https://")):
        raise _Invalid("an http:// or https:// URL")
    return value


def _env_name(raw: str) -> str:
    value = raw.strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        # never echo it back: it may be the key itself pasted by mistake
        raise _Invalid("the NAME of an environment variable (the value is not shown)")
    return value


def _json_object(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        raise _Invalid('a JSON object, e.g. \'{"chat_template_kwargs": {"x": 1}}\'') from None
    if not isinstance(value, dict):
        raise _Invalid("a JSON object")
    return value


def _on_off(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("on", "true", "yes", "1"):
        return True
    if value in ("off", "false", "no", "0"):
        return False
    raise _Invalid("on or off")


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip()
        if value not in choices:
            raise _Invalid("one of " + ", ".join(choices))
        return value

    return parse


def _profile(raw: str) -> ProfileName:
    try:
        return ProfileName(raw.strip())
    except ValueError:
        raise _Invalid("one of " + ", ".join(PROFILE_NAMES)) from None


def _name(raw: str) -> str:
    value = raw.strip()
    if not _NAME.fullmatch(value) or len(value) > MAX_NAME_CHARS:
        raise _Invalid(
            f"at most {MAX_NAME_CHARS} letters, digits, '_', '.', '-' "
            "(not starting with '.', '_' or '-')"
        )
    return value


def _agent_spec(raw: str) -> str:
    value = raw.strip()
    if value:
        try:
            parse_agent_spec(value)
        except ConfigError:
            raise _Invalid("an import string package.module:factory") from None
    return value


def _task_ids(raw: str) -> tuple[str, ...]:
    ids = tuple(part.strip() for part in raw.replace(" ", ",").split(",") if part.strip())
    if not ids or not all(part.isdigit() for part in ids):
        raise _Invalid("task ids separated by commas, e.g. 0,5,17")
    return ids


def _shard(raw: str) -> tuple[int, int]:
    """``I/N``: the I-th (1-based) of N shards."""
    index, slash, count = raw.strip().partition("/")
    accepted = "I/N with 1 <= I <= N, e.g. 2/4"
    if not slash or not index.isdigit() or not count.isdigit():
        raise _Invalid(accepted)
    if not 1 <= int(index) <= int(count):
        raise _Invalid(accepted)
    return int(index), int(count)


def _prices(raw: str) -> PriceTable:
    text = raw.strip()
    try:
        value: Any = json.loads(text)
    except json.JSONDecodeError:
        # a TOML table under [tool.pytest.ini_options] reaches us as its Python repr
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text
    try:
        return PriceTable.parse(value if isinstance(value, dict) else text)
    except ConfigError as error:
        raise _Invalid(f"JSON prices per million tokens by model ({error})") from None


def _cache_mode(raw: str) -> CacheMode:
    try:
        return CacheMode(raw.strip())
    except ValueError:
        raise _Invalid("one of " + ", ".join(mode.value for mode in CacheMode)) from None


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: its option, ini key, environment variable and parser."""

    name: str
    parse: Callable[[str], Any]
    default: str
    help: str
    env: bool = False
    #: the value of an unset setting whose default is empty
    empty: Any = None
    #: an empty value given on the command line is refused (it would silently mean "all")
    refuse_blank: bool = False
    #: a folder or file: a relative value from a configuration file is relative to that file's
    #: folder (as pytest reads its own paths), not to the current folder
    path: bool = False
    #: where the default really is, found when the options are declared (``--help``)
    default_note: Callable[[], str] | None = None

    @property
    def flag(self) -> str:
        return "--tau2-" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        return "tau2_" + self.name

    @property
    def env_var(self) -> str | None:
        return "TAU2_" + self.name.upper() if self.env else None


def _model_settings(role: str) -> list[Setting]:
    who = {"agent": "the agent", "user": "the simulated user", "judge": "the NL-assertion judge"}[
        role
    ]
    default = DEFAULT_MODELS[role]
    return [
        Setting(
            f"{role}_model",
            _text,
            default,
            f"model of {who}: a model id at the endpoint"
            + (f", or builtin (default {default})" if default else " (default: no judge)"),
            env=True,
        ),
        Setting(f"{role}_base_url", _url, "", f"OpenAI-compatible base URL of {who}", env=True),
        Setting(
            f"{role}_api_key_env",
            _env_name,
            "OPENAI_API_KEY",
            f"NAME of the environment variable holding the API key of {who}",
            env=True,
        ),
        Setting(f"{role}_temperature", _float_range(0, None), "", f"sampling temperature of {who}"),
        Setting(f"{role}_top_p", _float_range(0, 1, low_open=True), "", f"top_p of {who}"),
        Setting(f"{role}_max_tokens", _int_at_least(1), "", f"max tokens per reply of {who}"),
        Setting(
            f"{role}_extra_body",
            _json_object,
            "",
            f"JSON object merged into every request body of {who} (server-specific fields)",
        ),
        Setting(
            f"{role}_timeout",
            _float_range(0, None, low_open=True),
            "120",
            f"seconds per request attempt of {who}, connect to last byte",
        ),
        Setting(f"{role}_max_retries", _int_at_least(0), "4", f"retries per request of {who}"),
        Setting(
            f"{role}_max_connections",
            _int_at_least(1),
            "",
            f"HTTP connections at most to the endpoint of {who}, shared by the process's "
            "conversations (default: the openai package's, 1000)",
        ),
    ]


OPTIONS: tuple[Setting, ...] = (
    Setting(
        "agent",
        _agent_spec,
        "",
        "your agent as Python code: package.module:factory, a class or function making a "
        "fresh agent (respond or converse) per scenario; instead of --tau2-agent-model",
        env=True,
        empty="",
    ),
    Setting(
        "data_dir",
        _text,
        "",
        "folder with the upstream data files",
        env=True,
        empty="",
        path=True,
        default_note=lambda: f"default: {default_cache_dir()}",
    ),
    *(setting for role in ROLES for setting in _model_settings(role)),
    Setting(
        "profile",
        _profile,
        "default",
        "default (ours: notes, end_conversation, our judge) or tau2 (upstream tau2-bench's "
        "prompts, tools, endings and reward, from its pinned sources)",
        env=True,
    ),
    Setting(
        "breaker_failures",
        _int_at_least(1),
        "5",
        "consecutive failed attempts after which an endpoint counts as down: its remaining "
        "scenarios end at once as infra errors (per process)",
    ),
    Setting(
        "breaker_window_seconds",
        _float_range(0, None),
        "10",
        "seconds without any successful reply, from the first of those failures, before an "
        "endpoint counts as down (so a burst of refused connections is not 'down')",
    ),
    Setting(
        "breaker_probe_seconds",
        _float_range(0, None),
        "30",
        "seconds between probes of an endpoint that is down (one request; success closes it)",
    ),
    Setting(
        "max_reply_bytes",
        _int_at_least(1024),
        str(DEFAULT_MAX_REPLY_BYTES),
        "the largest reply body read from an endpoint, counted as it arrives and after "
        "decompression (default 8 MiB); a larger one ends the scenario as an infra error",
    ),
    Setting(
        "agent_notes",
        _on_off,
        "on",
        "append our Additional Notes to the policy (off: the policy alone, as upstream tau2)",
    ),
    Setting("trials", _int_at_least(1), "1", "runs of each scenario (pass^k over them)"),
    Setting("seed", _int_at_least(0), "300", "base seed; trial seeds follow tau2's rule"),
    Setting(
        "tasks",
        _task_ids,
        "",
        "only these task ids, exactly (5 is task 5 only), e.g. 0,5,17",
        empty=(),
        refuse_blank=True,
    ),
    Setting(
        "shard",
        _shard,
        "",
        "I/N: run only the I-th of N balanced shares of the selected scenarios "
        "(all trials of a task in one share); merge the shards' run directories with "
        "python -m tau2_retail merge",
    ),
    Setting("split", _choice(*SPLITS), "base", "task split: base (all 114), train or test"),
    Setting("max_steps", _int_at_least(1), "200", "routed messages before max_steps"),
    Setting("max_errors", _int_at_least(1), "10", "tool errors before too_many_errors"),
    Setting(
        "max_duration",
        _float_range(0, None, low_open=True),
        "900",
        "wall-clock seconds per scenario before timeout",
    ),
    Setting(
        "concurrency",
        _int_at_least(1),
        "1",
        "scenarios in flight per pytest process, started ahead of their tests "
        "(under xdist, per worker: use --dist each, which deals each worker its share)",
    ),
    Setting(
        "output_dir",
        _text,
        "tau2_runs",
        "folder of run directories (default: tau2_runs in the current folder)",
        env=True,
        path=True,
    ),
    Setting("run_id", _name, "", "run directory name, new (default: a timestamp)", empty=""),
    Setting(
        "resume",
        _name,
        "",
        "RUN_ID: re-run only the scenarios without complete artifacts, with the stored settings",
        empty="",
    ),
    Setting(
        "prices",
        _prices,
        "",
        'JSON prices in USD per million tokens by model, e.g. {"my-model": {"input": 0.15, '
        '"output": 0.6, "cached_input": 0.075}} (cached_input optional); the run reports its '
        "cost per role and scenario",
        env=True,
    ),
    Setting(
        "max_cost",
        _float_range(0, None, low_open=True),
        "",
        "USD: once the run has spent this much, no new scenario starts (those in flight "
        "finish; the others are not run, and resumable); needs --tau2-prices for every model",
    ),
    Setting(
        "cache",
        _text,
        "",
        "PATH of the response cache (SQLite): every completion is stored and served again "
        "to an identical request",
        env=True,
        empty="",
    ),
    Setting(
        "cache_mode",
        _cache_mode,
        "read-write",
        "read-write (default), replay (never contact an endpoint: a miss is an infra error) or off",
        env=True,
    ),
    Setting(
        "min_pass_rate",
        _float_range(0, 1),
        "",
        "CI gate: exit status from the overall success rate (0..1) instead of test failures",
    ),
    Setting(
        "max_infra_errors", _int_at_least(0), "0", "CI gate: infra errors tolerated (default 0)"
    ),
    Setting(
        "baseline",
        _text,
        "",
        "CI gate: RUN_DIR of an earlier run to compare the success rate against",
        empty="",
        path=True,
    ),
    Setting(
        "max_regression",
        _float_range(0, 1),
        "",
        "CI gate: largest drop of the success rate against --tau2-baseline (0..1, default 0)",
    ),
    Setting(
        "regression_alpha",
        _open_unit,
        "",
        "CI gate: significance level A (0 < A < 1, e.g. 0.05); a drop beyond "
        "--tau2-max-regression fails only when the paired exact McNemar p-value is <= A, and "
        "--tau2-min-pass-rate fails only when the upper bound of the rate's 95 percent "
        "interval is below it "
        "(default: unset, the point estimates decide)",
        env=True,
    ),
)


def _ini_type(setting: Setting) -> Any:
    """A string, or for a numeric or on/off setting also the TOML number or boolean.

    ``tau2_trials = 2`` in ``[tool.pytest]`` is a TOML integer; the parser then checks it like
    the text ``"2"``. pytest 9.0 knows no such union type: there every value is a string
    (``tau2_trials = "2"`` in ``[tool.pytest]``; any form in ``[tool.pytest.ini_options]``).
    """
    if _PYTEST_VERSION < (9, 1):
        return "string"
    if setting.parse is _on_off:
        return str | bool
    try:
        sample = setting.parse("1")
    except _Invalid:
        return "string"
    if isinstance(sample, int):
        return str | int
    if isinstance(sample, float):
        return str | float
    return "string"


def _ini_text(value: object) -> str:
    """An ini value as the text an option would give (TOML ``true`` is ``on``, a TOML table
    is its JSON)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("tau2", "tau2 retail benchmark")
    for setting in OPTIONS:
        env_note = f" [env {setting.env_var}]" if setting.env_var else ""
        default_note = f" ({setting.default_note()})" if setting.default_note else ""
        group.addoption(
            setting.flag,
            dest=setting.dest,
            default=None,
            metavar=setting.name.split("_")[-1].upper(),
            help=f"{setting.help}{default_note}{env_note} [ini {setting.dest}]",
        )
        parser.addini(setting.dest, help=setting.help, type=_ini_type(setting), default=None)


ModelSettings = ModelChoice
"""Who plays a role (the harness's :class:`~tau2_retail.models.choice.ModelChoice`)."""


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


def _raw(config: pytest.Config, setting: Setting) -> tuple[str, str]:
    """The raw text of a setting and where it came from."""
    value = config.getoption(setting.dest)
    if value is not None:
        return str(value), setting.flag
    if setting.env_var and os.environ.get(setting.env_var):
        return os.environ[setting.env_var], setting.env_var
    ini = config.getini(setting.dest)
    if ini is not None and _ini_text(ini).strip():
        text = _ini_text(ini)
        if setting.path and config.inipath is not None:
            # as pytest reads its own paths: relative to the configuration file's folder
            text = os.path.join(config.inipath.parent, os.path.expanduser(text.strip()))
        return text, f"ini {setting.dest}"
    return setting.default, "default"


def _model(role: str, values: Mapping[str, Any], sources: Mapping[str, str]) -> ModelSettings:
    def endpoint(name: str) -> EndpointConfig:
        try:
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
        except ConfigError as error:
            raise pytest.UsageError(f"--tau2-{role}-*: {error}") from error

    try:
        return choose_model(role, values[f"{role}_model"], endpoint)
    except ConfigError as error:
        raise pytest.UsageError(f"{sources[role + '_model']}: {error}") from error


def _check_key(role: str, choice: ModelSettings | None, sources: Mapping[str, str]) -> None:
    """A role whose endpoint needs a key stops the run at start-up when its key variable is
    unset or empty: every request would fail (401), each scenario an infra error."""
    if choice is None or choice.endpoint is None:
        return
    problem = choice.endpoint.missing_key(os.environ)
    if problem:
        raise pytest.UsageError(
            f"{sources[role + '_model']}: the {role} model {choice.name!r}: {problem}; set it, "
            f"name another variable with --tau2-{role}-api-key-env, or say the endpoint takes "
            f"no key with --tau2-{role}-api-key-env={NO_API_KEY}"
        )


def plain_setting(value: Any) -> Any:
    """A parsed value as plain JSON: what the run files record and what xdist can send to a
    worker (the inverse of :func:`typed_setting`)."""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, ProfileName | CacheMode):
        return value.value
    if isinstance(value, PriceTable):  # {model: price}, the form --tau2-prices takes
        return codec.encode(dict(sorted(value.models.items())), dict[str, ModelPrice])
    return value


def typed_setting(name: str, value: Any) -> Any:
    """A recorded (plain JSON) value as the ``Tau2Settings`` attribute ``name`` holds it: what a
    resumed run adopts from the stored run, on the controller and on every worker."""
    if isinstance(value, list):
        return tuple(value)
    if name == "profile" and isinstance(value, str):
        return ProfileName(value)
    if name == "cache_mode" and isinstance(value, str):
        return CacheMode(value)
    if name == "prices" and isinstance(value, dict):
        return PriceTable.parse(value)
    return value


def resolve_settings(config: pytest.Config) -> Tau2Settings:
    """Resolve and validate every setting; raises ``pytest.UsageError`` on a bad value."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for setting in OPTIONS:
        raw, source = _raw(config, setting)
        sources[setting.name] = source
        if setting.refuse_blank and source == setting.flag and not raw.strip():
            # e.g. --tau2-tasks=$TASKS with TASKS unset: not "every task" without a word
            raise pytest.UsageError(
                f"{source}: an empty value is not valid for {setting.flag}; expected "
                f"{setting.help.partition(', e.g.')[0]} (omit the option for all)"
            )
        if raw == "" and setting.default == "":
            values[setting.name] = setting.empty
            continue
        try:
            values[setting.name] = setting.parse(raw)
        except _Invalid as error:
            shown = "" if setting.parse is _env_name else f" {raw!r}"
            raise pytest.UsageError(
                f"{source}:{shown} is not valid for {setting.flag}; expected {error}"
            ) from None
    if values["resume"] and values["run_id"] and values["resume"] != values["run_id"]:
        raise pytest.UsageError(
            f"--tau2-resume {values['resume']!r} and --tau2-run-id {values['run_id']!r} "
            "disagree; give only --tau2-resume RUN_ID to continue a run"
        )
    if not policy_for(values["profile"]).takes_agent_notes and sources["agent_notes"] != "default":
        raise pytest.UsageError(
            f"{sources['agent_notes']}: --tau2-agent-notes applies to the default profile only; "
            "the tau2 profile sends upstream's agent prompt (drop the option, or use "
            "--tau2-profile default)"
        )
    # the agent as code first: naming it twice is the problem to report, not a model's key
    agent_source = load_agent_source(
        config,
        spec=values["agent"],
        spec_source=sources["agent"],
        agent_model_source=sources["agent_model"],
    )
    judge = _model("judge", values, sources) if values["judge_model"] else None
    agent, user = _model("agent", values, sources), _model("user", values, sources)
    if not agent.is_builtin and user.is_builtin and sources["user_model"] == "default":
        raise pytest.UsageError(
            f"{sources['agent_model']}: the agent {agent.name!r} is an endpoint, but the "
            "simulated user would be the built-in scripted customer (it pastes the task and "
            "agrees to everything), so the score would not compare with tau2's; set "
            "--tau2-user-model (and --tau2-user-base-url) to a model that plays the customer, "
            "or --tau2-user-model=builtin:customer to accept the scripted one"
        )
    _check_cost_and_cache(values, sources, agent=agent, user=user, judge=judge)
    # a replay never contacts an endpoint: it needs no key (a CI run reproduced on a laptop)
    if not (values["cache"] and values["cache_mode"] is CacheMode.REPLAY):
        for role, choice in (("agent", agent), ("user", user), ("judge", judge)):
            _check_key(role, choice, sources)
    recorded = {name: plain_setting(value) for name, value in values.items()}
    return Tau2Settings(
        **{name: values[name] for name in _TYPED},
        agent=agent,
        user=user,
        judge=judge,
        recorded=recorded,
        sources=sources,
        agent_source=agent_source,
    )


def _check_cost_and_cache(
    values: Mapping[str, Any],
    sources: Mapping[str, str],
    *,
    agent: ModelSettings,
    user: ModelSettings,
    judge: ModelSettings | None,
) -> None:
    """A budget needs a price for every endpoint model; replay needs an existing cache file."""
    prices: PriceTable | None = values["prices"]
    if values["max_cost"] is not None:
        endpoint_models = [
            choice.endpoint.model
            for choice in (agent, user, judge)
            if choice is not None and choice.endpoint is not None
        ]
        unpriced = sorted({m for m in endpoint_models if prices is None or prices.price(m) is None})
        if unpriced:
            raise pytest.UsageError(
                f"{sources['max_cost']}: --tau2-max-cost needs a price for every model, and "
                f"{', '.join(map(repr, unpriced))} has none; add it to --tau2-prices, e.g. "
                f'--tau2-prices \'{{"{unpriced[0]}": {{"input": 0.15, "output": 0.6}}}}\''
            )
    mode: CacheMode = values["cache_mode"]
    path = values["cache"]
    if sources["cache_mode"] != "default" and mode is not CacheMode.OFF and not path:
        raise pytest.UsageError(
            f"{sources['cache_mode']}: --tau2-cache-mode {mode.value} needs a cache file; "
            "give it with --tau2-cache PATH"
        )
    if mode is CacheMode.REPLAY and not Path(path).is_file():
        raise pytest.UsageError(
            f"{sources['cache']}: {path!r} is not valid for --tau2-cache with "
            "--tau2-cache-mode replay; expected an existing cache file (the one a run with "
            "--tau2-cache wrote)"
        )
