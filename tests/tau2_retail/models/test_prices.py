"""Prices: the table a team supplies, and what a role's usage costs (hits are free)."""

from __future__ import annotations

import pytest

from tau2_retail import codec
from tau2_retail.errors import ConfigError
from tau2_retail.models.messages import Usage
from tau2_retail.models.prices import (
    MAX_BILLED_TOKENS,
    MAX_PRICE,
    ModelPrice,
    PriceTable,
    RoleCosts,
)


def test_the_cost_is_tokens_times_prices_per_million() -> None:
    price = ModelPrice(input=2.0, output=8.0)
    usage = Usage(n_calls=3, prompt=1_500_000, completion=250_000)
    assert price.cost(usage) == pytest.approx(1.5 * 2.0 + 0.25 * 8.0)


def test_cache_hits_cost_nothing_and_provider_cached_input_has_its_own_price() -> None:
    price = ModelPrice(input=2.0, output=8.0, cached_input=0.5)
    # 2 calls: one answered by the endpoint (1M prompt, 400k of it from its prompt cache,
    # 100k completion), one served from our response cache (3M prompt, 1M completion)
    usage = Usage(
        n_calls=2,
        prompt=4_000_000,
        completion=1_100_000,
        cached_prompt=400_000,
        cache_hits=1,
        hit_prompt=3_000_000,
        hit_completion=1_000_000,
    )
    assert price.cost(usage) == pytest.approx(0.6 * 2.0 + 0.4 * 0.5 + 0.1 * 8.0)
    # without a cached-input price, cached input is billed as input
    assert ModelPrice(input=2.0, output=8.0).cost(usage) == pytest.approx(1.0 * 2.0 + 0.1 * 8.0)


def test_a_model_without_a_price_has_an_unknown_cost_and_a_builtin_costs_nothing() -> None:
    table = PriceTable.parse('{"priced": {"input": 1, "output": 1}}')
    spent = Usage(n_calls=1, prompt=10, completion=10)
    assert table.cost("priced", spent) == pytest.approx(20 / 1_000_000)
    assert table.cost("unpriced", spent) is None
    assert table.cost("unpriced", Usage()) == 0.0  # it was never called
    assert table.cost(None, spent) == 0.0  # a built-in model


def test_role_costs_add_up_and_an_unknown_role_makes_the_total_unknown() -> None:
    run = RoleCosts(agent=0.1, user=0.2, judge=0.0) + RoleCosts(agent=0.3, user=0.0, judge=0.5)
    assert codec.encode(run) == {
        "agent": 0.4,
        "user": 0.2,
        "judge": 0.5,
        "total": 1.1,
        "currency": "USD",
    }
    unknown = run + RoleCosts(agent=0.1, user=0.1, judge=None)
    assert unknown.judge is None
    assert unknown.total is None
    back = codec.decode_value(RoleCosts, codec.encode(unknown))
    assert back.agent == pytest.approx(0.5)
    assert back.user == pytest.approx(0.3)
    assert back.judge is None


def test_the_total_in_json_is_the_sum_of_its_rounded_parts() -> None:
    cost = RoleCosts(agent=0.0000014, user=0.0000014, judge=0.0000014)
    data = codec.encode(cost)
    assert data["total"] == pytest.approx(data["agent"] + data["user"] + data["judge"])
    assert codec.decode_value(RoleCosts, data).total == pytest.approx(data["total"])


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{nope", "prices are not valid JSON"),
        ("[]", "prices must map model names to prices per million tokens"),
        ("{}", "prices must map model names"),
        ('{"m": 3}', "prices: model 'm': expected an object"),
        ('{"m": {"input": 1}}', "prices: model 'm': 'output' is required"),
        ('{"m": {"input": 1, "output": -2}}', "'output' must be a number >= 0"),
        ('{"m": {"input": true, "output": 2}}', "'input' must be a number >= 0"),
        ('{"m": {"input": 1e308, "output": 2}}', "'input' must be a number >= 0 and <= 100,000"),
        ('{"m": {"input": 1, "output": 100000.5}}', "'output' must be a number >= 0 and <= "),
        ('{"m": {"input": 1, "output": 2, "reasoning": 3}}', "unknown key(s) reasoning"),
    ],
)
def test_a_bad_price_table_says_what_is_wrong(raw: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        PriceTable.parse(raw)
    assert message in str(error.value)


def test_a_table_round_trips_through_json() -> None:
    table = PriceTable.parse(
        {"a": {"input": 1, "output": 2, "cached_input": 0.5}, "b": {"input": 0, "output": 0}}
    )
    assert PriceTable.parse(codec.encode(table.models, dict[str, ModelPrice])) == table
    assert table.price("a") == ModelPrice(input=1.0, output=2.0, cached_input=0.5)


def test_a_cost_is_finite_whatever_the_token_count() -> None:
    """An endpoint may report any integer; the highest price times 10**400 tokens must not
    overflow (it is counted as MAX_BILLED_TOKENS)."""
    table = PriceTable.parse({"m": {"input": MAX_PRICE, "output": MAX_PRICE}})
    cost = table.cost("m", Usage(n_calls=1, prompt=10**400, completion=10**400))
    assert cost == 2 * MAX_PRICE * MAX_BILLED_TOKENS / 1_000_000
