"""The seven write tools, with upstream's check order, mutations and quirks (spec §4).

Checks read the current records; only after they pass is a record made writable (copied into
the store's overlay) and changed. Where upstream changes state before a later check can still
fail (gift-card credits during a cancel, the refund leg of a payment change), so do we.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from tau2_retail.tools.lookups import (
    find_order,
    find_payment_method,
    find_user,
    find_variant,
    first_order_item,
    is_gift_card,
)
from tau2_retail.tools.record_shapes import (
    Record,
    address_record,
    deep_copy,
    dump_for_model,
    order_view,
)
from tau2_retail.tools.store import Store
from tau2_retail.tools.tool_error import ToolError

__all__ = [
    "cancel_pending_order",
    "exchange_delivered_order_items",
    "modify_pending_order_address",
    "modify_pending_order_items",
    "modify_pending_order_payment",
    "modify_user_address",
    "return_delivered_order_items",
]

CANCEL_REASONS = frozenset({"no longer needed", "ordered by mistake"})


def _payment(transaction_type: str, amount: Any, payment_method_id: str) -> Record:
    # upstream builds payment entries through its model, which stores the amount as a float
    return {
        "transaction_type": transaction_type,
        "amount": float(amount),
        "payment_method_id": payment_method_id,
    }


def _writable_method(store: Store, user_id: str, payment_method_id: str) -> Record:
    method: Record = store.writable("users", user_id)["payment_methods"][payment_method_id]
    return method


def _first_excess(wanted: list[str], present: list[str]) -> str | None:
    """The first wanted id whose count exceeds its count among the present ids."""
    have = Counter(present)
    need = Counter(wanted)
    for item_id in wanted:
        if need[item_id] > have[item_id]:
            return item_id
    return None


def _show(order: Record) -> str:
    return dump_for_model(order_view(order))


def cancel_pending_order(store: Store, *, order_id: str, reason: str) -> str:
    order = find_order(store, order_id)
    if order["status"] != "pending":
        raise ToolError("Non-pending order cannot be cancelled")
    if reason not in CANCEL_REASONS:
        raise ToolError("Invalid reason")
    refunds = []
    for payment in order["payment_history"]:
        method_id = payment["payment_method_id"]
        refunds.append(_payment("refund", payment["amount"], method_id))
        user_id = find_user(store, order["user_id"])["user_id"]
        method = find_payment_method(store, user_id, method_id)
        if is_gift_card(method):
            method = _writable_method(store, user_id, method_id)
            method["balance"] = round(method["balance"] + payment["amount"], 2)
    order = store.writable("orders", order_id)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    return _show(order)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Swap:
    """How an exchange or a modification of an order's items checks, in upstream's words.

    ``status``: the order status the tool needs; ``wrong_status``, ``missing_item`` (a format
    string taking the item id) and ``count_mismatch``: the refusals of upstream's first three
    checks, which the two tools word differently; ``same_id_check``: whether a new item id equal
    to its old one is refused."""

    status: str
    wrong_status: str
    missing_item: str
    count_mismatch: str
    same_id_check: bool


_EXCHANGE = _Swap(
    status="delivered",
    wrong_status="Non-delivered order cannot be exchanged",
    missing_item="Number of {} not found.",
    count_mismatch="The number of items to be exchanged should match.",
    same_id_check=False,
)
_MODIFY = _Swap(
    status="pending",
    wrong_status="Non-pending order cannot be modified",
    missing_item="{} not found",
    count_mismatch="The number of items to be exchanged should match",
    same_id_check=True,
)


def _order_to_swap(
    store: Store, order_id: str, item_ids: list[str], new_item_ids: list[str], swap: _Swap
) -> Record:
    """The order whose items an exchange or a modification swaps, after upstream's first three
    checks in its order: the status, each item present (as often as named), as many new items
    as old."""
    order = find_order(store, order_id)
    if order["status"] != swap.status:
        raise ToolError(swap.wrong_status)
    missing = _first_excess(item_ids, [item["item_id"] for item in order["items"]])
    if missing is not None:
        raise ToolError(swap.missing_item.format(missing))
    if len(item_ids) != len(new_item_ids):
        raise ToolError(swap.count_mismatch)
    return order


def _price_difference(
    store: Store, order: Record, item_ids: list[str], new_item_ids: list[str], swap: _Swap
) -> tuple[Any, Record | None]:
    """Sum of new minus old prices in argument order (from integer 0), and the last variant."""
    difference: Any = 0
    variant: Record | None = None
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
        if swap.same_id_check and item_id == new_item_id:
            raise ToolError("The new item id should be different from the old item id")
        item = first_order_item(order, item_id)
        variant = find_variant(store, item["product_id"], new_item_id)
        if not variant["available"]:
            raise ToolError(f"New item {new_item_id} not found or available")
        difference += variant["price"] - item["price"]
    return difference, variant


def exchange_delivered_order_items(
    store: Store,
    *,
    order_id: str,
    item_ids: list[str],
    new_item_ids: list[str],
    payment_method_id: str,
) -> str:
    order = _order_to_swap(store, order_id, item_ids, new_item_ids, _EXCHANGE)
    difference, _ = _price_difference(store, order, item_ids, new_item_ids, _EXCHANGE)
    difference = round(difference, 2)
    method = find_payment_method(store, order["user_id"], payment_method_id)
    if is_gift_card(method) and method["balance"] < difference:
        raise ToolError("Insufficient gift card balance to pay for the price difference")
    order = store.writable("orders", order_id)
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = difference
    return _show(order)


def return_delivered_order_items(
    store: Store, *, order_id: str, item_ids: list[str], payment_method_id: str
) -> str:
    order = find_order(store, order_id)
    if order["status"] != "delivered":
        raise ToolError("Non-delivered order cannot be returned")
    user_id = find_user(store, order["user_id"])["user_id"]
    method = find_payment_method(store, user_id, payment_method_id)
    if not is_gift_card(method):
        history = order["payment_history"]
        if not history:
            raise ToolError("list index out of range")  # upstream indexes the empty history
        if payment_method_id != history[0]["payment_method_id"]:
            raise ToolError("Payment method should be the original payment method")
    if _first_excess(item_ids, [item["item_id"] for item in order["items"]]) is not None:
        raise ToolError("Some item not found")
    order = store.writable("orders", order_id)
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    return _show(order)


def modify_pending_order_address(
    store: Store,
    *,
    order_id: str,
    address1: str,
    address2: str,
    city: str,
    state: str,
    country: str,
    zip: str,
) -> str:
    order = find_order(store, order_id)
    if "pending" not in order["status"]:
        raise ToolError("Non-pending order cannot be modified")
    order = store.writable("orders", order_id)
    order["address"] = address_record(
        address1=address1, address2=address2, city=city, country=country, state=state, zip=zip
    )
    return _show(order)


def modify_user_address(
    store: Store,
    *,
    user_id: str,
    address1: str,
    address2: str,
    city: str,
    state: str,
    country: str,
    zip: str,
) -> str:
    find_user(store, user_id)
    user = store.writable("users", user_id)
    user["address"] = address_record(
        address1=address1, address2=address2, city=city, country=country, state=state, zip=zip
    )
    return dump_for_model(user)


def modify_pending_order_items(
    store: Store,
    *,
    order_id: str,
    item_ids: list[str],
    new_item_ids: list[str],
    payment_method_id: str,
) -> str:
    order = _order_to_swap(store, order_id, item_ids, new_item_ids, _MODIFY)
    difference, last_variant = _price_difference(store, order, item_ids, new_item_ids, _MODIFY)
    method = find_payment_method(store, order["user_id"], payment_method_id)
    if is_gift_card(method) and method["balance"] < difference:
        raise ToolError("Insufficient gift card balance to pay for the new item")
    order = store.writable("orders", order_id)
    order["payment_history"].append(
        _payment("payment" if difference > 0 else "refund", abs(difference), payment_method_id)
    )
    if is_gift_card(method):
        method = _writable_method(store, order["user_id"], payment_method_id)
        method["balance"] = round(method["balance"] - difference, 2)
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
        item = first_order_item(order, item_id)
        item["item_id"] = new_item_id
        # Upstream bug kept on purpose: every modified item gets the price and options of the
        # LAST pair's new variant (it shapes the gold state of tasks 20, 21, 36, 37 and 100).
        assert last_variant is not None  # the loop ran, so the pricing loop ran too
        item["price"] = last_variant["price"]
        item["options"] = deep_copy(last_variant["options"])
    order["status"] = "pending (item modified)"
    return _show(order)


def modify_pending_order_payment(store: Store, *, order_id: str, payment_method_id: str) -> str:
    order = find_order(store, order_id)
    if "pending" not in order["status"]:
        raise ToolError("Non-pending order cannot be modified")
    method = find_payment_method(store, order["user_id"], payment_method_id)
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
        raise ToolError("There should be exactly one payment for a pending order")
    old_method_id = history[0]["payment_method_id"]
    if old_method_id == payment_method_id:
        raise ToolError("The new payment method should be different from the current one")
    amount = history[0]["amount"]
    if is_gift_card(method) and method["balance"] < amount:
        raise ToolError("Insufficient gift card balance to pay for the order")
    order = store.writable("orders", order_id)
    order["payment_history"].extend(
        [_payment("payment", amount, payment_method_id), _payment("refund", amount, old_method_id)]
    )
    user_id = order["user_id"]
    if is_gift_card(method):
        method = _writable_method(store, user_id, payment_method_id)
        method["balance"] = round(method["balance"] - amount, 2)
    old_method = find_payment_method(store, user_id, old_method_id)
    if is_gift_card(old_method):
        old_method = _writable_method(store, user_id, old_method_id)
        old_method["balance"] = round(old_method["balance"] + amount, 2)
    return _show(order)
