"""The gold replay (spec: retail_domain.md §6) and the ``gold`` command."""

from __future__ import annotations

import pytest

from tau2_retail.data.gold import GoldBook, compute_gold, replay_calls
from tau2_retail.tools.dispatch import dispatch
from tau2_retail.tools.store import Store

UNCHANGED = {"10", "12", "24", "25", "50", "57", "62", "65", "67", "68", "105"}


def test_expected_database_equals_the_seed_for_exactly_the_eleven_tasks(book: GoldBook) -> None:
    unchanged = {task_id for task_id in book.tasks if not book[task_id].store.changed_keys()}
    assert unchanged == UNCHANGED
    for task_id in UNCHANGED:
        assert book[task_id].db_hash == book.seed.hash


def test_reference_actions_are_the_successful_writes_of_the_one_replay(book: GoldBook) -> None:
    for task_id, task in book.tasks.items():
        store = Store(book.seed)
        results = [dispatch(store, a.name, a.plain_arguments()) for a in task.actions]
        recorded = [r.action for r in results if r.action is not None]
        assert list(book[task_id].actions) == recorded, task_id
        assert store.matches(book[task_id].store), task_id


def test_task_64_skips_the_failing_exchange_and_keeps_the_next_modification(
    book: GoldBook,
) -> None:
    task = book.tasks["64"]
    store, results = replay_calls(book.seed, ((a.name, a.plain_arguments()) for a in task.actions))
    failed = [(a.name, r.content) for a, r in zip(task.actions, results, strict=True) if r.error]
    assert ("exchange_delivered_order_items", "Error: Non-delivered order cannot be exchanged") in (
        failed
    )
    names = [action.name for action in book["64"].actions]
    assert "exchange_delivered_order_items" not in names
    assert "modify_pending_order_items" in names
    assert store.changed_keys()


def test_task_105_only_write_fails_on_gift_card_balance(book: GoldBook) -> None:
    task = book.tasks["105"]
    _, results = replay_calls(book.seed, ((a.name, a.plain_arguments()) for a in task.actions))
    errors = [r.content for r in results if r.error]
    assert errors == ["Error: Insufficient gift card balance to pay for the price difference"]
    assert book["105"].actions == ()
    assert task.nl_assertions  # an assertion that cannot be met with the DB matching (known)


@pytest.mark.parametrize("task_id", ["20", "21", "36", "37", "100"])
def test_last_variant_bug_shapes_the_gold_state(book: GoldBook, task_id: str) -> None:
    """Every modified item carries the price and options of the last pair's new variant."""
    gold = book[task_id]
    modifications = [a for a in gold.actions if a.name == "modify_pending_order_items"]
    assert modifications
    for action in modifications:
        new_ids = action.arguments["new_item_ids"]
        order = gold.store.get("orders", action.arguments["order_id"])
        assert order is not None
        last_variant = None
        for _, product in book.seed.tables["products"].items():
            if new_ids[-1] in product["variants"]:
                last_variant = product["variants"][new_ids[-1]]
        assert last_variant is not None
        modified = [item for item in order["items"] if item["item_id"] in new_ids]
        assert len(modified) >= len(set(new_ids))
        for item in modified:
            assert item["price"] == last_variant["price"]
            assert item["options"] == last_variant["options"]


def test_a_task_where_pair_order_matters(book: GoldBook) -> None:
    """Reversing the pairs of task 20's modification changes the resulting database."""
    action = next(a for a in book["20"].actions if a.name == "modify_pending_order_items")
    arguments = dict(action.arguments)
    reversed_arguments = {
        **arguments,
        "item_ids": list(reversed(arguments["item_ids"])),
        "new_item_ids": list(reversed(arguments["new_item_ids"])),
    }
    forward, _ = replay_calls(book.seed, [(action.name, arguments)])
    backward, _ = replay_calls(book.seed, [(action.name, reversed_arguments)])
    assert not forward.matches(backward)


def test_gold_is_computed_once_per_process(book: GoldBook) -> None:
    assert book["3"] is book["3"]
    assert compute_gold(book.tasks["3"], book.seed).store.matches(book["3"].store)


def test_unknown_task_id_is_a_clear_error(book: GoldBook) -> None:
    with pytest.raises(Exception, match=r"^unknown task id\(s\) 999; valid ids are 0\.\.113$"):
        book["999"]
