"""The ``tau2`` options: declared once, resolved with precedence, validated at start-up.

Every setting is a ``--tau2-*`` option and a ``tau2_*`` ini key; endpoints, models and
folders also read a ``TAU2_*`` environment variable. The option wins, then the environment,
then the ini file, then the default. A value that cannot work raises ``pytest.UsageError``
naming the option, the value and what is accepted.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from tau2_retail.errors import ConfigError
from tau2_retail.models.config import EndpointConfig

__all__ = ["OPTIONS", "ModelSettings", "Setting", "Tau2Settings", "add_options", "resolve_settings"]

ROLES = ("agent", "user", "judge")
SPLITS = ("base", "train", "test")
DEFAULT_MODELS = {"agent": "builtin:oracle", "user": "builtin:customer", "judge": ""}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


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


def _text(raw: str) -> str:
    return raw.strip()


def _url(raw: str) -> str:
    value = raw.strip()
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


def _name(raw: str) -> str:
    value = raw.strip()
    if not _NAME.fullmatch(value):
        raise _Invalid("letters, digits, '_', '.', '-' (not starting with '.', '_' or '-')")
    return value


def _task_ids(raw: str) -> tuple[str, ...]:
    ids = tuple(part.strip() for part in raw.replace(" ", ",").split(",") if part.strip())
    if not ids or not all(part.isdigit() for part in ids):
        raise _Invalid("task ids separated by commas, e.g. 0,5,17")
    return ids


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: its option, ini key, environment variable and parser."""

    name: str
    parse: Callable[[str], Any]
    default: str
    help: str
    env: bool = False

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
            f"seconds per request of {who}",
        ),
        Setting(f"{role}_max_retries", _int_at_least(0), "4", f"retries per request of {who}"),
    ]


OPTIONS: tuple[Setting, ...] = (
    Setting(
        "data_dir",
        _text,
        "",
        "folder with the upstream data files (default: fixtures/cache)",
        env=True,
    ),
    *(setting for role in ROLES for setting in _model_settings(role)),
    Setting(
        "profile",
        _choice("default", "tau2"),
        "default",
        "default (ours: notes, end_conversation, our judge) or tau2 (upstream tau2-bench's "
        "prompts, tools, endings and reward, from its pinned sources)",
        env=True,
    ),
    Setting(
        "agent_notes",
        _on_off,
        "on",
        "append our Additional Notes to the policy (off: the policy alone, as upstream tau2)",
    ),
    Setting("trials", _int_at_least(1), "1", "runs of each scenario (pass^k over them)"),
    Setting("seed", _int_at_least(0), "300", "base seed; trial seeds follow tau2's rule"),
    Setting("tasks", _task_ids, "", "only these task ids, e.g. 0,5,17"),
    Setting("split", _choice(*SPLITS), "base", "task split: base (all 114), train or test"),
    Setting("max_steps", _int_at_least(1), "200", "routed messages before max_steps"),
    Setting("max_errors", _int_at_least(1), "10", "tool errors before too_many_errors"),
    Setting(
        "max_duration",
        _float_range(0, None, low_open=True),
        "900",
        "wall-clock seconds per scenario before timeout",
    ),
    Setting("output_dir", _text, "tau2_runs", "folder of run directories", env=True),
    Setting("run_id", _name, "", "run directory name (default: a timestamp)"),
    Setting("resume", _name, "", "RUN_ID: re-run only the scenarios without complete artifacts"),
    Setting(
        "min_pass_rate",
        _float_range(0, 1),
        "",
        "CI gate: exit status from the overall success rate (0..1) instead of test failures",
    ),
    Setting(
        "max_infra_errors", _int_at_least(0), "0", "CI gate: infra errors tolerated (default 0)"
    ),
)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("tau2", "tau2 retail benchmark")
    for setting in OPTIONS:
        env_note = f" [env {setting.env_var}]" if setting.env_var else ""
        group.addoption(
            setting.flag,
            dest=setting.dest,
            default=None,
            metavar=setting.name.split("_")[-1].upper(),
            help=f"{setting.help}{env_note} [ini {setting.dest}]",
        )
        parser.addini(setting.dest, help=setting.help, type="string", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """Who plays a role: a built-in model, or an endpoint."""

    name: str
    endpoint: EndpointConfig | None

    @property
    def is_builtin(self) -> bool:
        return self.name.startswith("builtin:")

    def describe(self) -> str:
        if self.endpoint is None or self.is_builtin:
            return self.name
        where = self.endpoint.base_url or "the openai default base URL"
        return f"{self.name} at {where}"

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.name,
            "endpoint": self.endpoint.to_json() if self.endpoint and not self.is_builtin else None,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Tau2Settings:
    """Every resolved setting (plain values; safe to print: keys are never held)."""

    values: Mapping[str, Any]
    sources: Mapping[str, str]
    agent: ModelSettings
    user: ModelSettings
    judge: ModelSettings | None

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def is_offline_self_check(self) -> bool:
        return self.agent.is_builtin and self.user.is_builtin and self.judge is None

    def to_json(self) -> dict[str, Any]:
        return {
            "settings": dict(self.values),
            "sources": dict(self.sources),
            "agent": self.agent.to_json(),
            "user": self.user.to_json(),
            "judge": self.judge.to_json() if self.judge else None,
        }


def _raw(config: pytest.Config, setting: Setting) -> tuple[str, str]:
    """The raw text of a setting and where it came from."""
    value = config.getoption(setting.dest)
    if value is not None:
        return str(value), setting.flag
    if setting.env_var and os.environ.get(setting.env_var):
        return os.environ[setting.env_var], setting.env_var
    ini = config.getini(setting.dest)
    if ini is not None and str(ini).strip():
        return str(ini), f"ini {setting.dest}"
    return setting.default, "default"


def _model(role: str, values: Mapping[str, Any], sources: Mapping[str, str]) -> ModelSettings:
    name = values[f"{role}_model"]
    builtin_names = {"agent": ("builtin:oracle", "builtin:noop"), "user": ("builtin:customer",)}
    if name.startswith("builtin:"):
        allowed = builtin_names.get(role, ())
        if name not in allowed:
            accepted = ", ".join(allowed) if allowed else "none (the judge must be an endpoint)"
            raise pytest.UsageError(
                f"{sources[role + '_model']}: {name!r} is not a built-in {role} model; "
                f"accepted built-ins: {accepted}"
            )
        return ModelSettings(name=name, endpoint=None)
    try:
        endpoint = EndpointConfig(
            model=name,
            base_url=values[f"{role}_base_url"] or None,
            api_key_env=values[f"{role}_api_key_env"],
            temperature=values[f"{role}_temperature"],
            top_p=values[f"{role}_top_p"],
            max_tokens=values[f"{role}_max_tokens"],
            extra_body=values[f"{role}_extra_body"] or {},
            timeout_seconds=values[f"{role}_timeout"],
            max_retries=values[f"{role}_max_retries"],
        )
    except ConfigError as error:
        raise pytest.UsageError(f"--tau2-{role}-*: {error}") from error
    return ModelSettings(name=name, endpoint=endpoint)


def resolve_settings(config: pytest.Config) -> Tau2Settings:
    """Resolve and validate every setting; raises ``pytest.UsageError`` on a bad value."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for setting in OPTIONS:
        raw, source = _raw(config, setting)
        sources[setting.name] = source
        if raw == "" and setting.default == "":
            values[setting.name] = None if setting.parse is not _text else ""
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
    if values["profile"] == "tau2" and sources["agent_notes"] != "default":
        raise pytest.UsageError(
            f"{sources['agent_notes']}: --tau2-agent-notes applies to the default profile only; "
            "the tau2 profile sends upstream's agent prompt (drop the option, or use "
            "--tau2-profile default)"
        )
    judge = _model("judge", values, sources) if values["judge_model"] else None
    return Tau2Settings(
        values=values,
        sources=sources,
        agent=_model("agent", values, sources),
        user=_model("user", values, sources),
        judge=judge,
    )
