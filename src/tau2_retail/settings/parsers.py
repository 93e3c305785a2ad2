"""The parsers of raw setting values: text in, a typed value out, or :class:`InvalidValue`.

A parser takes the raw text (an option, an environment variable, an ini value) and returns the
typed value the settings model holds; :class:`InvalidValue`'s message says what is accepted, in
words the start-up error shows after ``expected``. Numeric bounds are :class:`Bound`'s, the rule
:class:`~tau2_retail.models.config.EndpointConfig` checks too.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from typing import Any

from tau2_retail.engine.profiles import PROFILE_NAMES, ProfileName
from tau2_retail.errors import ConfigError
from tau2_retail.models.agent_import import parse_agent_spec
from tau2_retail.models.base_url import NOT_HTTP, checked_base_url
from tau2_retail.models.cache import CacheMode
from tau2_retail.models.config import ENDPOINT_BOUNDS, Bound
from tau2_retail.models.prices import PriceTable
from tau2_retail.models.request_headers import header_name_problem, headers_problem
from tau2_retail.results.artifacts import MAX_NAME_CHARS

__all__ = [
    "SPLITS",
    "InvalidValue",
    "agent_spec",
    "at_least",
    "cache_mode",
    "choice",
    "endpoint_value",
    "env_name",
    "json_object",
    "on_off",
    "open_unit",
    "positive",
    "prices",
    "profile_name",
    "run_name",
    "shard",
    "task_ids",
    "text",
    "unit_range",
    "url",
    "within",
]

SPLITS = ("base", "train", "test")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class InvalidValue(ValueError):
    """A raw value failed its parser; the message says what is accepted."""


def within(bound: Bound) -> Callable[[str], Any]:
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


def at_least(low: int) -> Callable[[str], Any]:
    """An integer ``>= low``."""
    return within(Bound(low, integer=True))


def positive() -> Callable[[str], Any]:
    """A number ``> 0``."""
    return within(Bound(0, low_open=True))


def unit_range() -> Callable[[str], Any]:
    """A number from 0 to 1 (a rate)."""
    return within(Bound(0, 1))


def endpoint_value(field_name: str) -> Callable[[str], Any]:
    """The parser of an endpoint field: its range is :data:`ENDPOINT_BOUNDS`'s."""
    return within(ENDPOINT_BOUNDS[field_name])


def open_unit(raw: str) -> float:
    """A level strictly between 0 and 1 (a significance level: 0 and 1 decide nothing)."""
    try:
        value = float(raw)
    except ValueError:
        raise InvalidValue("a number > 0 and < 1, e.g. 0.05") from None
    if not 0 < value < 1:  # also rejects nan
        raise InvalidValue("a number > 0 and < 1, e.g. 0.05")
    return value


def text(raw: str) -> str:
    return raw.strip()


def url(raw: str) -> str:
    # A user:password@ part is dropped here, before the value is shown or stored anywhere;
    # the key travels as the bearer key from --tau2-<role>-api-key-env.
    if not raw.strip():
        return ""
    try:
        return checked_base_url(raw)
    except ValueError as error:
        why = "" if str(error) == NOT_HTTP else f" naming a host and a valid port ({error})"
        raise InvalidValue(f"an http:// or https:// URL{why}") from None


def env_name(raw: str) -> str:
    value = raw.strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        # never echo it back: it may be the key itself pasted by mistake
        raise InvalidValue("the NAME of an environment variable (the value is not shown)")
    return value


def json_object(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        raise InvalidValue('a JSON object, e.g. \'{"chat_template_kwargs": {"x": 1}}\'') from None
    if not isinstance(value, dict):
        raise InvalidValue("a JSON object")
    return value


def header_name(raw: str) -> str:
    value = raw.strip()
    if not value:
        return ""
    problem = header_name_problem(value)
    if problem is not None:
        raise InvalidValue(f"a header name ({problem})")
    return value


def headers(raw: str) -> dict[str, str]:
    # never echo the text back: its values may be secrets
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        raise InvalidValue(
            'a JSON object of header names and values, e.g. \'{"X-Title": "nightly"}\' '
            "(the text given is not shown in case it holds a secret)"
        ) from None
    if not isinstance(value, dict):
        raise InvalidValue("a JSON object of header names and values")
    problem = headers_problem(value, key_header=None, bearer_key=False)
    if problem is not None:
        raise InvalidValue(f"a JSON object of header names and values ({problem})")
    return value


def on_off(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("on", "true", "yes", "1"):
        return True
    if value in ("off", "false", "no", "0"):
        return False
    raise InvalidValue("on or off")


def choice(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip()
        if value not in choices:
            raise InvalidValue("one of " + ", ".join(choices))
        return value

    return parse


def profile_name(raw: str) -> ProfileName:
    try:
        return ProfileName(raw.strip())
    except ValueError:
        raise InvalidValue("one of " + ", ".join(PROFILE_NAMES)) from None


def run_name(raw: str) -> str:
    value = raw.strip()
    if not _NAME.fullmatch(value) or len(value) > MAX_NAME_CHARS:
        raise InvalidValue(
            f"at most {MAX_NAME_CHARS} letters, digits, '_', '.', '-' "
            "(not starting with '.', '_' or '-')"
        )
    return value


def agent_spec(raw: str) -> str:
    value = raw.strip()
    if value:
        try:
            parse_agent_spec(value)
        except ConfigError:
            raise InvalidValue("an import string package.module:factory") from None
    return value


#: the most task ids a range may name (the retail tasks are 0 to 113; a typo such as 0-1000000
#: must not become a million ids to check)
MAX_RANGE_IDS = 10_000


def task_ids(raw: str) -> tuple[str, ...]:
    """Task ids separated by commas (or spaces), each an id or an inclusive range ``A-B``:
    ``0-4,17`` is ``0,1,2,3,4,17``."""
    accepted = "task ids or ranges separated by commas, e.g. 0,5,17 or 0-9,17"
    ids: list[str] = []
    for part in (part.strip() for part in raw.replace(" ", ",").split(",")):
        first, dash, last = part.partition("-")
        if not part:
            continue
        if not dash and part.isdigit():
            ids.append(part)
        elif dash and first.isdigit() and last.isdigit() and int(first) <= int(last):
            if int(last) - int(first) >= MAX_RANGE_IDS:
                raise InvalidValue(f"a range of at most {MAX_RANGE_IDS:,} ids, e.g. 0-113")
            ids.extend(str(number) for number in range(int(first), int(last) + 1))
        else:
            raise InvalidValue(accepted)
    if not ids:
        raise InvalidValue(accepted)
    return tuple(ids)


def shard(raw: str) -> tuple[int, int]:
    """``I/N``: the I-th (1-based) of N shards."""
    index, slash, count = raw.strip().partition("/")
    accepted = "I/N with 1 <= I <= N, e.g. 2/4"
    if not slash or not index.isdigit() or not count.isdigit():
        raise InvalidValue(accepted)
    if not 1 <= int(index) <= int(count):
        raise InvalidValue(accepted)
    return int(index), int(count)


def prices(raw: str) -> PriceTable:
    value: Any
    try:
        value = json.loads(raw.strip())
    except json.JSONDecodeError:
        # a TOML table under [tool.pytest.ini_options] reaches us as its Python repr
        try:
            value = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            value = raw.strip()
    try:
        return PriceTable.parse(value if isinstance(value, dict) else raw.strip())
    except ConfigError as error:
        raise InvalidValue(f"JSON prices per million tokens by model ({error})") from None


def cache_mode(raw: str) -> CacheMode:
    try:
        return CacheMode(raw.strip())
    except ValueError:
        raise InvalidValue("one of " + ", ".join(mode.value for mode in CacheMode)) from None
