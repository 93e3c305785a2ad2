"""Fixtures of the tool tests: the seed database, a fresh store, a call helper, gold calls.

The data comes from the suite's ``data_dir`` fixture (``$TAU2_DATA_DIR``, else the data cache
that ``python -m tau2_retail data fetch`` fills); without it these tests are skipped, saying how
to get the data.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from tau2_retail.data.files import read_verified
from tau2_retail.tools.database import SeedDatabase
from tau2_retail.tools.dispatch import ToolResult, dispatch
from tau2_retail.tools.registry import TOOLS, ToolKind
from tau2_retail.tools.store import Store


@pytest.fixture(scope="session")
def seed(data_dir: Path) -> SeedDatabase:
    """The seed database from the data folder's ``db.json``, parsed once per session."""
    return SeedDatabase.from_json(read_verified(data_dir, "db.json"))


@pytest.fixture(scope="session")
def gold_tasks(data_dir: Path) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Each task's gold actions from the data folder's ``tasks.json``, as ``(name,
    arguments)``."""
    tasks = json.loads(read_verified(data_dir, "tasks.json"))
    return {
        task["id"]: [
            (action["name"], action["arguments"])
            for action in task["evaluation_criteria"]["actions"]
        ]
        for task in tasks
    }


@pytest.fixture(scope="session")
def gold_calls(gold_tasks) -> list[tuple[str, dict[str, Any]]]:
    """Every gold action of every task, in task order."""
    return [call for calls in gold_tasks.values() for call in calls]


@pytest.fixture(scope="session")
def write_calls(seed: SeedDatabase) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """Coherent write calls on seed records: a pending or delivered order (now and then any
    order), its own item ids, variants of the same products, its user's payment methods."""
    orders = seed.tables["orders"]
    any_order = st.sampled_from(list(orders))
    likely = st.sampled_from(
        [key for key, order in orders.items() if order["status"] in ("pending", "delivered")]
    )
    variants = {
        product_id: st.sampled_from(list(product["variants"]))
        for product_id, product in seed.tables["products"].items()
    }
    reasons = st.sampled_from(["no longer needed", "ordered by mistake"])
    texts = st.sampled_from(["1 Main St", "", "Springfield", "IL", "USA", "62701"]) | st.text(
        max_size=8
    )
    # the registry's write tools (test_registry pins them by name)
    names = st.sampled_from(
        sorted(name for name, spec in TOOLS.items() if spec.kind is ToolKind.WRITE)
    )

    @st.composite
    def write_call(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
        name = draw(names)
        order_id = draw(likely | any_order)
        order = orders[order_id]
        user = seed.tables["users"][order["user_id"]]
        if name == "cancel_pending_order":
            return name, {"order_id": order_id, "reason": draw(reasons)}
        if name in ("modify_pending_order_address", "modify_user_address"):
            fields = ("address1", "address2", "city", "state", "country", "zip")
            address = {field: draw(texts) for field in fields}
            if name == "modify_user_address":
                return name, {"user_id": user["user_id"], **address}
            return name, {"order_id": order_id, **address}
        method = draw(st.sampled_from(list(user["payment_methods"])))
        if name == "modify_pending_order_payment":
            return name, {"order_id": order_id, "payment_method_id": method}
        picked = draw(st.lists(st.sampled_from(order["items"]), max_size=len(order["items"])))
        old_ids = [item["item_id"] for item in picked]
        if name == "return_delivered_order_items":
            return name, {"order_id": order_id, "item_ids": old_ids, "payment_method_id": method}
        new_ids = [draw(variants[item["product_id"]]) for item in picked]
        return name, {
            "order_id": order_id,
            "item_ids": old_ids,
            "new_item_ids": new_ids,
            "payment_method_id": method,
        }

    return write_call()


@pytest.fixture
def store(seed: SeedDatabase) -> Store:
    """A fresh store over the seed."""
    return Store(seed)


@pytest.fixture
def call(store: Store) -> Callable[..., ToolResult]:
    """``call(name, **arguments)`` dispatches one tool call against ``store``."""

    def _call(name: str, **arguments: Any) -> ToolResult:
        return dispatch(store, name, arguments)

    return _call
