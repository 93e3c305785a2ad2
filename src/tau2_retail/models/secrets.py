"""Secrets that must never reach an output: URL passwords, keys in argv, extra-body values.
(API keys a server echoes are masked in what is written or shown: ``masking``.)

- ``strip_userinfo``: ``http://user:PASS@host/v1`` becomes ``http://host/v1``. The password is
  never printed, stored or sent (as Basic auth); the key goes as the bearer key, from the
  variable the role's API-key setting names.
- ``redact_extra_body``: the values of a role's extra body are replaced by
  ``[redacted]`` unless their key is in ``HARMLESS_EXTRA_BODY_KEYS`` (sampling and template
  switches that hold no credential); nested objects follow the same rule.
- ``redact_headers``: a role's own request headers keep their names, never their values.
- ``json_redaction``: which of the two redacts a setting's JSON, by its name (``*extra_body``,
  ``*headers``; flags, ini keys and record keys alike).
- ``redact_argv``: the command line as recorded in ``run_args.json``: URLs without userinfo,
  the JSON of extra-body and headers options redacted as above (the caller names those flags;
  also given as an ini override, ``-o tau2_agent_extra_body=...``), anything shaped like an API
  key replaced.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Final

__all__ = [
    "HARMLESS_EXTRA_BODY_KEYS",
    "REDACTED",
    "json_redaction",
    "redact_argv",
    "redact_extra_body",
    "redact_headers",
    "redact_text",
    "strip_userinfo",
]

REDACTED: Final = "[redacted]"

HARMLESS_EXTRA_BODY_KEYS: Final = frozenset(
    {
        "chat_template_kwargs",
        "enable_thinking",
        "thinking",
        "reasoning_effort",
        "top_k",
        "min_p",
        "typical_p",
        "repetition_penalty",
        "presence_penalty",
        "frequency_penalty",
        "max_completion_tokens",
        "stop",
        "n",
        "parallel_tool_calls",
        "tool_choice",
        "response_format",
        "type",
        "logprobs",
        "top_logprobs",
        "num_ctx",
        "options",
        "keep_alive",
        "cache_prompt",
        "n_predict",
    }
)
"""Extra-body keys whose values are kept in outputs (README "Security" lists them)."""

# scheme://userinfo@ anywhere in a text (argv values, error messages, URLs), up to the last
# "@" before the path: a password may hold "@", "#" or "?" unencoded (URL parsers take the
# last "@"; stopping at the first left the rest of such a password in the run folder)
_USERINFO: Final = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s]*@")
_KEY_LIKE: Final = re.compile(r"sk-[A-Za-z0-9_-]{8,}")
_INI_FLAGS: Final = frozenset({"-o", "--override-ini"})
_INI_INLINE: Final = re.compile(r"^(--override-ini=|-o)(.+)$", re.DOTALL)


def strip_userinfo(text: str) -> str:
    """``text`` with the ``user:password@`` part of every URL in it removed."""
    return _USERINFO.sub(r"\1", text)


def redact_text(text: str) -> str:
    """``text`` without URL userinfo and without anything shaped like an API key."""
    return _KEY_LIKE.sub(REDACTED, strip_userinfo(text))


def redact_extra_body(value: Any) -> Any:
    """A copy of an extra-body value with every non-harmless key's value redacted."""
    if isinstance(value, Mapping):
        return {
            key: redact_extra_body(item) if key in HARMLESS_EXTRA_BODY_KEYS else REDACTED
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [redact_extra_body(item) for item in value]
    return value


def redact_headers(value: Any) -> Any:
    """Request headers as recorded: their names, every value redacted."""
    if isinstance(value, Mapping):
        return dict.fromkeys(value, REDACTED)
    return REDACTED if value else value


def json_redaction(name: str) -> Callable[[Any], Any] | None:
    """How the JSON value of the setting ``name`` is redacted (a flag, an ini key or a record
    key: ``--tau2-agent-extra-body``, ``tau2_user_headers``, ``headers``); None: it is not."""
    folded = name.strip().replace("-", "_")
    if folded.endswith("extra_body"):
        return redact_extra_body
    if folded.endswith("headers"):
        return redact_headers
    return None


def _redacted_json(text: str, redaction: Callable[[Any], Any]) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        return REDACTED if text.strip() else text
    return json.dumps(redaction(value))


def _redacted_ini(assignment: str) -> str:
    """An ``-o NAME=VALUE`` override: an extra body's or headers' value redacted like the
    option's."""
    name, equals, value = assignment.partition("=")
    redaction = json_redaction(name) if equals else None
    if redaction is not None:
        return f"{name}={_redacted_json(value, redaction)}"
    return redact_text(assignment)


def redact_argv(argv: Sequence[str], *, json_flags: Collection[str]) -> list[str]:
    """The command line with secrets redacted: the JSON of ``json_flags`` as
    :func:`json_redaction` says (``--flag=value`` and ``--flag value`` forms; ini overrides
    ``-o NAME=VALUE``, ``-oNAME=VALUE`` and ``--override-ini[=]NAME=VALUE`` of such a key like
    the options they stand for), URL userinfo and key-shaped text everywhere."""
    shown: list[str] = []
    json_next: Callable[[Any], Any] | None = None
    ini_next = False
    for arg in argv:
        if json_next is not None:
            shown.append(_redacted_json(arg, json_next))
            json_next = None
            continue
        if ini_next:
            shown.append(_redacted_ini(arg))
            ini_next = False
            continue
        if arg in _INI_FLAGS:
            shown.append(arg)
            ini_next = True
            continue
        ini = _INI_INLINE.match(arg)
        if ini:
            shown.append(ini.group(1) + _redacted_ini(ini.group(2)))
            continue
        flag, equals, value = arg.partition("=")
        redaction = json_redaction(flag) if flag in json_flags else None
        if redaction is not None:
            if equals:
                shown.append(f"{flag}={_redacted_json(value, redaction)}")
            else:
                shown.append(flag)
                json_next = redaction
            continue
        shown.append(redact_text(arg))
    return shown
