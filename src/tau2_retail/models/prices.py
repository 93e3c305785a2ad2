"""What a model's tokens cost: a price table the team supplies, and the cost of a role's usage.

There is no built-in price list (prices change, and a self-hosted model's price is the team's
own figure). ``PriceTable.parse`` reads JSON (``--tau2-prices``, ``TAU2_PRICES``) or the mapping
of a TOML table in the ini file: a model name to ``{"input": USD, "output": USD}`` per million
tokens, with an optional ``"cached_input"`` price for the prompt tokens the provider reports as
read from its prompt cache (the input price when absent)::

    {"gpt-4.1": {"input": 2.0, "output": 8.0, "cached_input": 0.5}}

A price is at most :data:`MAX_PRICE` (USD 100,000 per million tokens, far above any model's) and
a cost counts at most :data:`MAX_BILLED_TOKENS` tokens of each kind, so every cost is a finite
number whatever an endpoint reports (a price of 1e308 once made a cost ``inf``, and writing it
failed).

Replies served from the response cache (``cache_hits``) cost nothing: their tokens are counted
in the usage but never billed. A built-in model costs nothing; a model without a price has a
cost of None (unknown), never a guess.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final

from pydantic import computed_field

from tau2_retail.codec import Omitted, rounded
from tau2_retail.errors import ConfigError
from tau2_retail.models.messages import Usage

__all__ = [
    "COST_ROLES",
    "CURRENCY",
    "MAX_BILLED_TOKENS",
    "MAX_PRICE",
    "ModelPrice",
    "PriceTable",
    "RoleCosts",
]

CURRENCY: Final = "USD"
COST_ROLES: Final = ("agent", "user", "judge")
_PER_TOKENS: Final = 1_000_000
MAX_PRICE: Final = 100_000.0
"""The highest price accepted, in USD per million tokens."""
MAX_BILLED_TOKENS: Final = 10**12
"""The most tokens of one kind a cost counts (an endpoint may report any integer)."""
_PRICE_KEYS: Final = ("input", "output", "cached_input")
_EXAMPLE: Final = '{"my-model": {"input": 0.15, "output": 0.6}}'
_MICRO: Final = rounded(6)


def _round6(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelPrice:
    """USD per million tokens."""

    input: float
    output: float
    cached_input: Annotated[float | None, Omitted] = None

    def cost(self, usage: Usage) -> float:
        """What ``usage`` was billed: cache hits excluded, provider-cached input at its price."""
        prompt = min(max(usage.prompt - usage.hit_prompt, 0), MAX_BILLED_TOKENS)
        completion = min(max(usage.completion - usage.hit_completion, 0), MAX_BILLED_TOKENS)
        cached = min(max(usage.cached_prompt, 0), prompt)
        cached_price = self.input if self.cached_input is None else self.cached_input
        dollars = (prompt - cached) * self.input + cached * cached_price + completion * self.output
        return dollars / _PER_TOKENS


@dataclass(frozen=True, slots=True, kw_only=True)
class RoleCosts:
    """A scenario's (or a run's) cost per role in USD; None for a role whose model has no
    price. ``total`` is None when any role's cost is unknown."""

    # written in micro-dollars: enough for a single short completion, no float noise in the file
    agent: Annotated[float | None, _MICRO] = 0.0
    user: Annotated[float | None, _MICRO] = 0.0
    judge: Annotated[float | None, _MICRO] = 0.0

    def role(self, role: str) -> float | None:
        value: float | None = getattr(self, role)
        return value

    @property
    def total(self) -> float | None:
        values = [self.role(role) for role in COST_ROLES]
        if any(value is None for value in values):
            return None
        return sum(value for value in values if value is not None)

    def __add__(self, other: RoleCosts) -> RoleCosts:
        def plus(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a + b

        return RoleCosts(
            agent=plus(self.agent, other.agent),
            user=plus(self.user, other.user),
            judge=plus(self.judge, other.judge),
        )

    @computed_field(alias="total")  # type: ignore[prop-decorator]
    @property
    def written_total(self) -> float | None:
        """The total as written: the sum of the rounded parts (a reader summing them gets the
        same figure)."""
        values = [_round6(self.role(role)) for role in COST_ROLES]
        return None if None in values else _round6(sum(v for v in values if v is not None))

    @computed_field  # type: ignore[prop-decorator]
    @property
    def currency(self) -> str:
        return CURRENCY


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceTable:
    """Prices by model name (the model id at the endpoint, exactly as configured)."""

    models: Mapping[str, ModelPrice] = field(default_factory=dict)

    def price(self, model: str) -> ModelPrice | None:
        return self.models.get(model)

    def cost(self, model: str | None, usage: Usage) -> float | None:
        """The cost of ``usage`` by ``model`` (None: a built-in model, which costs nothing)."""
        if model is None:
            return 0.0
        price = self.price(model)
        if price is None:
            return None if usage.n_calls - usage.cache_hits > 0 else 0.0
        return price.cost(usage)

    @classmethod
    def parse(cls, raw: str | Mapping[str, Any]) -> PriceTable:
        """A table from JSON text or an already parsed mapping; ``ConfigError`` says what is
        wrong and shows the accepted form."""
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError as error:
                raise ConfigError(
                    f"prices are not valid JSON ({error.msg}); expected e.g. {_EXAMPLE}"
                ) from None
        if not isinstance(raw, Mapping) or not raw:
            raise ConfigError(
                f"prices must map model names to prices per million tokens, e.g. {_EXAMPLE}"
            )
        models: dict[str, ModelPrice] = {}
        for name, entry in raw.items():
            if not isinstance(entry, Mapping):
                raise ConfigError(
                    f"prices: model {name!r}: expected an object such as "
                    '{"input": 0.15, "output": 0.6}'
                )
            unknown = sorted(set(entry) - set(_PRICE_KEYS))
            if unknown:
                raise ConfigError(
                    f"prices: model {name!r}: unknown key(s) {', '.join(unknown)}; accepted: "
                    f"{', '.join(_PRICE_KEYS)} (USD per million tokens)"
                )
            values: dict[str, float] = {}
            for key in _PRICE_KEYS:
                if key not in entry:
                    if key == "cached_input":
                        continue
                    raise ConfigError(f"prices: model {name!r}: {key!r} is required")
                value = entry[key]
                if (
                    not isinstance(value, int | float)
                    or isinstance(value, bool)
                    or not math.isfinite(value)
                    or not 0 <= value <= MAX_PRICE
                ):
                    raise ConfigError(
                        f"prices: model {name!r}: {key!r} must be a number >= 0 and <= "
                        f"{MAX_PRICE:,.0f} (USD per million tokens), got {value!r}"
                    )
                values[key] = float(value)
            models[str(name)] = ModelPrice(
                input=values["input"],
                output=values["output"],
                cached_input=values.get("cached_input"),
            )
        return cls(models=models)
