"""API keys masked in what a run writes or shows, never in the conversation itself.

An endpoint may echo its key (in an error body, or in a completion). The conversation goes on
with exactly what the models said: masking it would change what the other side sees and what
is scored (a placeholder key such as ``anything`` once turned "Is there anything specific"
into "Is there *** specific"). The key is masked (``***``) where text leaves the run instead:

- a scenario's outcome as the harness hands it out (``Harness.run``): its artifacts, the
  report and the summaries built from them, the test's failure messages, the terminal;
- an endpoint's error text, as it is made (it is only ever shown);
- a reply stored in the response cache file;
- the live lines of ``python -m tau2_retail run``.

Only a value that could be a real secret is masked (:func:`could_be_secret`): shorter than
:data:`MIN_SECRET_CHARS` characters, or a word-like placeholder (letters only, or words joined
by ``-``, ``_``, ``.`` or a space, shorter than :data:`WORDLIKE_MAX_CHARS`: ``anything``,
``not-needed``, ``sk-no-key-required``), it is an ordinary word that text may well contain
and is left alone everywhere. A real key (``sk-...`` with digits, a random token) is masked in
its raw, JSON-escaped and HTML-escaped spellings.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

if TYPE_CHECKING:
    from tau2_retail.models.config import EndpointConfig

__all__ = [
    "MASK",
    "MIN_SECRET_CHARS",
    "WORDLIKE_MAX_CHARS",
    "Masker",
    "could_be_secret",
    "masked",
]

MASK: Final = "***"
MIN_SECRET_CHARS: Final = 8
"""A shorter value (``EMPTY``, ``x``, ``none``) is a placeholder, never masked."""
WORDLIKE_MAX_CHARS: Final = 32
"""A word-like value shorter than this is a placeholder, never masked."""

_WORDLIKE: Final = re.compile(r"[A-Za-z]+(?:[-_. ][A-Za-z]+)*")

_T = TypeVar("_T")


def could_be_secret(value: str) -> bool:
    """Whether ``value`` is masked where text is written or shown (see the module docstring)."""
    value = value.strip()
    if len(value) < MIN_SECRET_CHARS:
        return False
    return not (len(value) < WORDLIKE_MAX_CHARS and _WORDLIKE.fullmatch(value))


class Masker:
    """Replaces the secrets it was given by :data:`MASK` in any text; a no-op (and false)
    when none of them could be a real secret."""

    __slots__ = ("_pattern", "_spellings")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        spellings: set[str] = set()
        for secret in secrets:
            for value in {secret, secret.strip()}:
                if could_be_secret(value):
                    spellings |= {value, json.dumps(value)[1:-1], html.escape(value)}
        # longest first: a key that contains another is masked whole
        self._spellings = tuple(sorted(spellings, key=len, reverse=True))
        self._pattern = (
            re.compile("|".join(map(re.escape, self._spellings))) if self._spellings else None
        )

    @classmethod
    def for_endpoints(
        cls, configs: Iterable[EndpointConfig | None], environ: Mapping[str, str]
    ) -> Masker:
        """The keys the clients of ``configs`` send, read from ``environ`` as they read them,
        and the values of their own headers."""
        secrets: list[str] = []
        for config in configs:
            if config is None:
                continue
            if not config.takes_no_key:
                secrets.append(environ.get(config.api_key_env, ""))
            secrets.extend(config.headers.values())
        return cls(secrets)

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __repr__(self) -> str:
        return f"Masker({len(self._spellings)} spelling(s))"  # never the values

    def text(self, text: str) -> str:
        """``text`` with every secret masked; the same object when it holds none."""
        pattern = self._pattern
        if pattern is None:
            return text
        for spelling in self._spellings:
            if spelling in text:
                return pattern.sub(MASK, text)
        return text


def masked(value: _T, mask: Callable[[str], str]) -> _T:
    """``value`` with ``mask`` applied to every string inside it: strings, tuples, lists,
    dicts (keys and values) and dataclass records (their ``init`` fields, rebuilt with
    ``dataclasses.replace``). Anything else is kept as it is. The same object comes back
    wherever nothing changed, so an outcome without a secret costs no copy."""
    result: Any = value
    if isinstance(value, str):
        result = mask(value)
    elif isinstance(value, tuple | list):
        items = [masked(item, mask) for item in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            result = type(value)(items) if type(value) in (tuple, list) else tuple(items)
    elif isinstance(value, dict):
        pairs = [(masked(key, mask), masked(item, mask)) for key, item in value.items()]
        if any(
            new_key is not key or new is not item
            for (new_key, new), (key, item) in zip(pairs, value.items(), strict=True)
        ):
            result = dict(pairs)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for name in _init_fields(type(value)):
            old = getattr(value, name)
            new = masked(old, mask)
            if new is not old:
                changes[name] = new
        if changes:
            result = dataclasses.replace(value, **changes)
    return result  # type: ignore[no-any-return]


@functools.cache
def _init_fields(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(kind) if f.init)
