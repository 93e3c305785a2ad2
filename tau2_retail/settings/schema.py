"""The settings schema: every setting of a run, declared once, with its parser.

Each :class:`Setting` is a ``--tau2-*`` pytest option, a ``tau2_*`` ini key and, where it is a
deployment detail, a ``TAU2_*`` environment variable; the settings of one scenario are also
flags of ``python -m tau2_retail run`` (``--agent-model``). Nothing here knows pytest or
argparse: ``tau2_retail.plugins.options`` and ``tau2_retail.cli.run`` generate their options
from :data:`OPTIONS`, and :mod:`tau2_retail.settings.resolve` parses and checks the values.
A parser raises :class:`InvalidValue` whose message says what is accepted.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from tau2_retail import codec
from tau2_retail.data.files import default_cache_dir
from tau2_retail.engine.profiles import PROFILE_NAMES, ProfileName
from tau2_retail.errors import ConfigError
from tau2_retail.models.agent import parse_agent_spec
from tau2_retail.models.bounded import DEFAULT_MAX_REPLY_BYTES
from tau2_retail.models.builtin import BUILTIN_CUSTOMER, BUILTIN_ORACLE
from tau2_retail.models.cache import CacheMode
from tau2_retail.models.choice import ROLES
from tau2_retail.models.config import ENDPOINT_BOUNDS, Bound
from tau2_retail.models.prices import ModelPrice, PriceTable
from tau2_retail.models.secrets import strip_userinfo
from tau2_retail.results.artifacts import MAX_NAME_CHARS

__all__ = [
    "DEFAULT_MODELS",
    "EXTRA_BODY_FLAGS",
    "OPTIONS",
    "SETTINGS",
    "SPLITS",
    "InvalidValue",
    "Setting",
    "env_name",
    "on_off",
    "plain_setting",
    "typed_setting",
]

SPLITS = ("base", "train", "test")
DEFAULT_MODELS = {"agent": BUILTIN_ORACLE, "user": BUILTIN_CUSTOMER, "judge": ""}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class InvalidValue(ValueError):
    """A raw value failed its parser; the message says what is accepted."""


def _within(bound: Bound) -> Callable[[str], Any]:
    """A parser of a number within ``bound`` (the rule :class:`EndpointConfig` checks too)."""
    convert: Callable[[str], int | float] = int if bound.integer else float

    def parse(raw: str) -> Any:
        try:
            value = convert(raw)
        except ValueError:
            raise InvalidValue(bound.accepted) from None
        if not bound.accepts(value):
            raise InvalidValue(bound.accepted)
        return value

    return parse


def _int_at_least(low: int) -> Callable[[str], Any]:
    return _within(Bound(low, integer=True))


def _float_range(low: float, high: float | None, *, low_open: bool = False) -> Callable[[str], Any]:
    return _within(Bound(low, high, low_open=low_open))


def _endpoint(field_name: str) -> Callable[[str], Any]:
    """The parser of an endpoint field: its range is :data:`ENDPOINT_BOUNDS`'s."""
    return _within(ENDPOINT_BOUNDS[field_name])


def _open_unit(raw: str) -> float:
    """A level strictly between 0 and 1 (a significance level: 0 and 1 decide nothing)."""
    try:
        value = float(raw)
    except ValueError:
        raise InvalidValue("a number > 0 and < 1, e.g. 0.05") from None
    if not 0 < value < 1:  # also rejects nan
        raise InvalidValue("a number > 0 and < 1, e.g. 0.05")
    return value


def _text(raw: str) -> str:
    return raw.strip()


def _url(raw: str) -> str:
    # A user:password@ part is dropped here, before the value is shown or stored anywhere;
    # the key travels as the bearer key from --tau2-<role>-api-key-env.
    value = strip_userinfo(raw.strip())
    if value and not value.startswith(("http://", "https://")):
        raise InvalidValue("an http:// or https:// URL")
    return value


def env_name(raw: str) -> str:
    value = raw.strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        # never echo it back: it may be the key itself pasted by mistake
        raise InvalidValue("the NAME of an environment variable (the value is not shown)")
    return value


def _json_object(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        raise InvalidValue('a JSON object, e.g. \'{"chat_template_kwargs": {"x": 1}}\'') from None
    if not isinstance(value, dict):
        raise InvalidValue("a JSON object")
    return value


def on_off(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("on", "true", "yes", "1"):
        return True
    if value in ("off", "false", "no", "0"):
        return False
    raise InvalidValue("on or off")


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip()
        if value not in choices:
            raise InvalidValue("one of " + ", ".join(choices))
        return value

    return parse


def _profile(raw: str) -> ProfileName:
    try:
        return ProfileName(raw.strip())
    except ValueError:
        raise InvalidValue("one of " + ", ".join(PROFILE_NAMES)) from None


def _name(raw: str) -> str:
    value = raw.strip()
    if not _NAME.fullmatch(value) or len(value) > MAX_NAME_CHARS:
        raise InvalidValue(
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
            raise InvalidValue("an import string package.module:factory") from None
    return value


def _task_ids(raw: str) -> tuple[str, ...]:
    ids = tuple(part.strip() for part in raw.replace(" ", ",").split(",") if part.strip())
    if not ids or not all(part.isdigit() for part in ids):
        raise InvalidValue("task ids separated by commas, e.g. 0,5,17")
    return ids


def _shard(raw: str) -> tuple[int, int]:
    """``I/N``: the I-th (1-based) of N shards."""
    index, slash, count = raw.strip().partition("/")
    accepted = "I/N with 1 <= I <= N, e.g. 2/4"
    if not slash or not index.isdigit() or not count.isdigit():
        raise InvalidValue(accepted)
    if not 1 <= int(index) <= int(count):
        raise InvalidValue(accepted)
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
        raise InvalidValue(f"JSON prices per million tokens by model ({error})") from None


def _cache_mode(raw: str) -> CacheMode:
    try:
        return CacheMode(raw.strip())
    except ValueError:
        raise InvalidValue("one of " + ", ".join(mode.value for mode in CacheMode)) from None


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

    #: also a flag of ``python -m tau2_retail run`` (``--agent-model``): a setting of one scenario
    cli: bool = False

    @property
    def cli_flag(self) -> str:
        """The flag of ``python -m tau2_retail run``: the option without ``tau2-``."""
        return "--" + self.name.replace("_", "-")

    @property
    def env_var(self) -> str | None:
        return "TAU2_" + self.name.upper() if self.env else None

    @property
    def metavar(self) -> str:
        return self.name.split("_")[-1].upper()

    @property
    def kind(self) -> type:
        """What a TOML value of the setting may also be: ``bool``, ``int``, ``float`` or ``str``."""
        if self.parse is on_off:
            return bool
        try:
            sample = self.parse("1")
        except InvalidValue:
            return str
        return type(sample) if isinstance(sample, int | float) else str


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
            env_name,
            "OPENAI_API_KEY",
            f"NAME of the environment variable holding the API key of {who}",
            env=True,
        ),
        Setting(
            f"{role}_temperature", _endpoint("temperature"), "", f"sampling temperature of {who}"
        ),
        Setting(f"{role}_top_p", _endpoint("top_p"), "", f"top_p of {who}"),
        Setting(
            f"{role}_max_tokens", _endpoint("max_tokens"), "", f"max tokens per reply of {who}"
        ),
        Setting(
            f"{role}_extra_body",
            _json_object,
            "",
            f"JSON object merged into every request body of {who} (server-specific fields)",
        ),
        Setting(
            f"{role}_timeout",
            _endpoint("timeout_seconds"),
            "120",
            f"seconds per request attempt of {who}, connect to last byte",
        ),
        Setting(
            f"{role}_max_retries", _endpoint("max_retries"), "4", f"retries per request of {who}"
        ),
        Setting(
            f"{role}_max_connections",
            _endpoint("max_connections"),
            "",
            f"HTTP connections at most to the endpoint of {who}, shared by the process's "
            "conversations (default: the openai package's, 1000)",
        ),
    ]


_TABLE: tuple[Setting, ...] = (
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
        _endpoint("breaker_failures"),
        "5",
        "consecutive failed attempts after which an endpoint counts as down: its remaining "
        "scenarios end at once as infra errors (per process)",
    ),
    Setting(
        "breaker_window_seconds",
        _endpoint("breaker_window_seconds"),
        "10",
        "seconds without any successful reply, from the first of those failures, before an "
        "endpoint counts as down (so a burst of refused connections is not 'down')",
    ),
    Setting(
        "breaker_probe_seconds",
        _endpoint("breaker_probe_seconds"),
        "30",
        "seconds between probes of an endpoint that is down (one request; success closes it)",
    ),
    Setting(
        "max_reply_bytes",
        _endpoint("max_reply_bytes"),
        str(DEFAULT_MAX_REPLY_BYTES),
        "the largest reply body read from an endpoint, counted as it arrives and after "
        "decompression (default 8 MiB); a larger one ends the scenario as an infra error",
    ),
    Setting(
        "agent_notes",
        on_off,
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
    Setting(
        "max_steps",
        _int_at_least(1),
        "200",
        "routed messages before max_steps (each tool call's result is one in the default "
        "profile; a turn runs only the calls that fit)",
    ),
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
        "folder of run directories (default: tau2_runs in pytest's rootdir)",
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
        "USD, a cap: each model request reserves its estimated cost first and is not sent "
        "when it would pass this (its scenario stops unscored, resumable); needs "
        "--tau2-prices for every model",
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
        "CI gate: RUN_DIR of an earlier run to compare the success rate against (its "
        "summary.json must read: checked at start-up)",
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


# the run settings that are flags of ``python -m tau2_retail run`` too, with every role setting:
# one scenario has no trials, selection, run folder, budget or gate
_RUN_COMMAND = frozenset(
    {
        "agent",
        "profile",
        "agent_notes",
        "seed",
        "max_steps",
        "max_errors",
        "max_duration",
        "breaker_failures",
        "breaker_window_seconds",
        "breaker_probe_seconds",
        "max_reply_bytes",
        "prices",
        "cache",
        "cache_mode",
    }
)

OPTIONS: tuple[Setting, ...] = tuple(
    replace(setting, cli=True)
    if setting.name in _RUN_COMMAND or setting.name.startswith(tuple(f"{r}_" for r in ROLES))
    else setting
    for setting in _TABLE
)
"""Every setting, in the order ``pytest --help`` lists them."""

SETTINGS: dict[str, Setting] = {setting.name: setting for setting in OPTIONS}
"""The settings by name."""

EXTRA_BODY_FLAGS: frozenset[str] = frozenset(
    setting.flag for setting in OPTIONS if setting.name.endswith("_extra_body")
)
"""The pytest options whose JSON a recorded command line redacts."""


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
    """A recorded (plain JSON) value as the parser gives it: what a resumed run adopts from the
    stored run."""
    if isinstance(value, list):
        return tuple(value)
    if name == "profile" and isinstance(value, str):
        return ProfileName(value)
    if name == "cache_mode" and isinstance(value, str):
        return CacheMode(value)
    if name == "prices" and isinstance(value, dict):
        return PriceTable.parse(value)
    return value
