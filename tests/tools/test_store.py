"""The copy-on-write store: seed isolation, independence, the canonical hash, diffs, equality.

``reference_hash`` recomputes retail_domain.md §5 from scratch, independently of
``tools.canonical``: the whole database as JSON, orders filled with the seven optional fields as
null, whole floats as integers, the strings none/null as null, sorted keys, ``(",", ":")``.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tau2_retail.tools.database import SeedDatabase
from tau2_retail.tools.dispatch import dispatch
from tau2_retail.tools.normalize import normalize_order_id, normalize_user_id
from tau2_retail.tools.record_shapes import ORDER_OPTIONAL_FIELDS, deep_copy
from tau2_retail.tools.store import Store

from .values import NEW_ADDRESS

# the expected database of these tasks is the seed (retail_domain.md §6)
SEED_STATE_TASKS = {"10", "12", "24", "25", "50", "57", "62", "65", "67", "68", "105"}
CANCEL_GIFT_CARD = ("cancel_pending_order", {"order_id": "#W3897284", "reason": "no longer needed"})


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _canonical(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_canonical(item) for item in value]
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in ("none", "null"):
        return None
    return value


def reference_hash(tables: dict[str, dict[str, Any]]) -> str:
    whole = {
        table: {
            key: {**record, **{f: record.get(f) for f in ORDER_OPTIONAL_FIELDS}}
            if table == "orders"
            else record
            for key, record in records.items()
        }
        for table, records in tables.items()
    }
    text = json.dumps(_canonical(whole), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def current(store: Store, order_id: str) -> dict[str, Any]:
    """The store's current order (the seed's until written)."""
    order = store.get("orders", order_id)
    assert order is not None
    return order


def current_tables(store: Store) -> dict[str, dict[str, Any]]:
    return {table: dict(store.items(table)) for table in store.tables()}


def replay(store: Store, calls: list[tuple[str, dict[str, Any]]]) -> None:
    for name, arguments in calls:
        dispatch(store, name, arguments)


def touched_keys(seed: SeedDatabase, calls) -> set[tuple[str, str]]:
    """Seed records the calls can touch: their orders, those orders' users, their users."""
    keys: set[tuple[str, str]] = set()
    for _, arguments in calls:
        if not isinstance(arguments, dict):
            continue
        order_id = arguments.get("order_id")
        if isinstance(order_id, str):
            order = seed.tables["orders"].get(normalize_order_id(order_id))
            if order is not None:
                keys |= {("orders", order["order_id"]), ("users", order["user_id"])}
        user_id = arguments.get("user_id")
        if isinstance(user_id, str) and normalize_user_id(user_id) in seed.tables["users"]:
            keys.add(("users", normalize_user_id(user_id)))
    return keys


@pytest.fixture(scope="module")
def pristine(seed) -> dict[str, dict[str, Any]]:
    """A deep copy of the seed tables taken before this module's tests mutate anything."""
    return deep_copy(seed.tables)


class TestHash:
    def test_seed_hash_is_the_reference(self, seed):
        assert seed.hash == reference_hash(seed.tables)

    def test_untouched_store_hash_is_the_seed_hash(self, seed, store):
        assert store.hash() == seed.hash
        assert store.changed_keys() == []

    @pytest.mark.parametrize("task_id", ["0", "20", "36", "64", "100"])
    def test_mutated_store_hash_is_the_reference(self, store, gold_tasks, task_id):
        replay(store, gold_tasks[task_id])
        assert store.changed_keys()
        assert store.hash() == reference_hash(current_tables(store))
        assert store.hash() != store.seed.hash

    def test_absent_and_null_optional_fields_hash_alike(self, seed, store):
        order = store.writable("orders", "#W6002958")
        order["cancel_reason"] = None
        order["return_items"] = "None"
        assert store.changed_keys() == []
        assert store.hash() == seed.hash

    def test_whole_floats_hash_as_integers(self, seed, store):
        store.writable("users", "daiki_kim_3197")["orders"] = []
        gift = store.writable("users", "noah_hernandez_4232")["payment_methods"]
        gift["gift_card_3410768"]["balance"] = 56  # the seed holds 56.0
        assert store.changed_keys() == []
        assert store.hash() == seed.hash

    def test_path_independent(self, call, store, seed):
        address = dict(seed.tables["users"]["daiki_kim_3197"]["address"])
        call("modify_user_address", user_id="daiki_kim_3197", **{**address, "city": "Boston"})
        assert store.hash() != seed.hash
        call("modify_user_address", user_id="daiki_kim_3197", **address)
        assert store.hash() == seed.hash
        assert store.diff_from_seed() == {}

    @pytest.mark.parametrize(
        "tables",
        [
            {"orders": {}, "products": {}, "users": {}},
            {"orders": {}, "products": {"p": {"name": "x", "product_id": "p", "variants": {}}}},
            {"users": {"b": {"v": 2.5}, "a": {"v": 1.0, "w": "NULL"}}},
        ],
        ids=["all-empty", "products-only", "users-only"],
    )
    def test_small_databases_with_empty_tables(self, tables):
        tables = {"orders": {}, "products": {}, "users": {}, **tables}
        seed = SeedDatabase(tables)
        assert seed.hash == reference_hash(tables)
        store = Store(seed)
        if tables["users"]:
            store.writable("users", "a")["v"] = 3.5
            changed = deep_copy(tables)
            changed["users"]["a"]["v"] = 3.5
            assert store.hash() == reference_hash(changed)


class TestGoldReplays:
    def test_seed_state_tasks(self, seed, gold_tasks):
        unchanged = set()
        for task_id, calls in gold_tasks.items():
            store = Store(seed)
            replay(store, calls)
            if not store.changed_keys():
                unchanged.add(task_id)
                assert store.hash() == seed.hash
        assert unchanged == SEED_STATE_TASKS

    def test_task_64_one_exchange_fails_then_a_modification_succeeds(self, seed, gold_tasks):
        store = Store(seed)
        outcomes = [
            (name, dispatch(store, name, arguments).error)
            for name, arguments in gold_tasks["64"]
            if name.startswith(("exchange", "modify"))
        ]
        assert ("exchange_delivered_order_items", True) in outcomes
        assert ("modify_pending_order_items", False) in outcomes

    def test_task_105_write_fails_on_gift_card_balance(self, seed, gold_tasks):
        store = Store(seed)
        errors = [
            dispatch(store, name, arguments).content
            for name, arguments in gold_tasks["105"]
            if name in ("cancel_pending_order", "modify_pending_order_payment")
            or name.startswith(("exchange", "modify", "return"))
        ]
        assert len(errors) == 1
        assert errors[0].startswith("Error: Insufficient gift card balance")

    def test_seed_unchanged_after_every_replay(self, seed, gold_tasks, pristine):
        for calls in gold_tasks.values():
            replay(Store(seed), calls)
        assert seed.tables == pristine
        assert reference_hash(seed.tables) == seed.hash


class TestIsolation:
    # generation is the slow part here; a loaded CI machine must not fail the property on speed
    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def test_any_sequence_leaves_seed_and_other_stores_alone(
        self, seed, gold_calls, write_calls, pristine, data
    ):
        calls = data.draw(
            st.lists(st.sampled_from(gold_calls) | write_calls, min_size=1, max_size=8)
        )
        keys = touched_keys(seed, calls)
        store = Store(seed)
        other = Store(seed)
        replay(store, calls)
        for table, key in keys:
            assert seed.tables[table][key] == pristine[table][key]
        assert other.changed_keys() == []
        assert other.hash() == seed.hash
        assert set(store.changed_keys()) <= keys
        # the same calls on a fresh store reach the same state (tools are deterministic)
        again = Store(seed)
        replay(again, calls)
        assert again.matches(store)
        # a copy diverges without touching its original
        before = store.diff_from_seed()
        clone = store.copy()
        assert clone.matches(store)
        replay(clone, [CANCEL_GIFT_CARD, ("modify_user_address", _ADDRESS_CALL)])
        assert store.diff_from_seed() == before

    def test_writable_copies_on_first_write(self, seed, store, pristine):
        record = store.writable("orders", "#W6002958")
        assert record is not seed.tables["orders"]["#W6002958"]
        record["items"][0]["options"]["size"] = "12"
        assert seed.tables["orders"]["#W6002958"] == pristine["orders"]["#W6002958"]
        assert store.writable("orders", "#W6002958") is record
        assert store.get("orders", "#W6002958") is record

    def test_get_reads_the_seed_until_written(self, seed, store):
        assert store.get("orders", "#W6002958") is seed.tables["orders"]["#W6002958"]
        assert store.get("orders", "#W0000000") is None
        with pytest.raises(KeyError):
            store.writable("orders", "#W0000000")

    def test_items_and_keys_keep_seed_order(self, seed, store):
        dispatch(store, *CANCEL_GIFT_CARD)
        assert list(store.keys("orders")) == list(seed.tables["orders"])
        items = dict(store.items("orders"))
        assert list(items) == list(seed.tables["orders"])
        assert items["#W3897284"]["status"] == "cancelled"
        assert store.tables() == ("orders", "products", "users")


_ADDRESS_CALL = {"user_id": "daiki_kim_3197", **NEW_ADDRESS}


class TestDiffAndEquality:
    def test_diff_from_seed(self, store):
        dispatch(store, *CANCEL_GIFT_CARD)
        diff = store.diff_from_seed()
        assert list(diff) == ["orders", "users"]
        assert list(diff["orders"]) == ["#W3897284"]
        assert diff["orders"]["#W3897284"]["status"] == "cancelled"
        assert diff["orders"]["#W3897284"]["cancel_reason"] == "no longer needed"
        # unset optional fields are left out, not shown as null
        assert "return_items" not in diff["orders"]["#W3897284"]
        methods = diff["users"]["noah_hernandez_4232"]["payment_methods"]
        assert methods["gift_card_3410768"]["balance"] == 323.58

    def test_diff_is_a_copy(self, store):
        dispatch(store, *CANCEL_GIFT_CARD)
        store.diff_from_seed()["orders"]["#W3897284"]["status"] = "pending"
        assert current(store, "#W3897284")["status"] == "cancelled"

    def test_differing_keys_and_matches(self, seed):
        first, second, third = Store(seed), Store(seed), Store(seed)
        dispatch(first, *CANCEL_GIFT_CARD)
        dispatch(second, *CANCEL_GIFT_CARD)
        dispatch(third, "modify_user_address", _ADDRESS_CALL)
        assert first.differing_keys(second) == []
        assert first.matches(second)
        assert first.hash() == second.hash()
        assert first.differing_keys(third) == [
            ("orders", "#W3897284"),
            ("users", "daiki_kim_3197"),
            ("users", "noah_hernandez_4232"),
        ]
        assert not first.matches(third)
        assert not first.matches(Store(seed))
        assert Store(seed).matches(Store(seed))

    def test_written_but_equal_records_match(self, seed, store):
        store.writable("orders", "#W6002958")
        assert store.matches(Store(seed))
        assert store.changed_keys() == []

    def test_different_seeds_cannot_be_compared(self, seed):
        other_seed = SeedDatabase(seed.tables)
        with pytest.raises(ValueError, match="different seed"):
            Store(seed).differing_keys(Store(other_seed))

    def test_copy_is_independent(self, store):
        dispatch(store, *CANCEL_GIFT_CARD)
        clone = store.copy()
        dispatch(clone, "modify_user_address", _ADDRESS_CALL)
        assert store.changed_keys() == [("orders", "#W3897284"), ("users", "noah_hernandez_4232")]
        assert ("users", "daiki_kim_3197") in clone.changed_keys()
        clone.writable("orders", "#W3897284")["status"] = "pending"
        assert current(store, "#W3897284")["status"] == "cancelled"
