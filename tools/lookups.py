"""Record lookups shared by the tools, with upstream's error texts (spec §2).

Identifiers arrive here already normalized by the dispatcher (spec §3).
"""

from __future__ import annotations

from tau2_retail.tools.record_shapes import Record
from tau2_retail.tools.store import Store
from tau2_retail.tools.tool_error import ToolError

__all__ = [
    "find_item",
    "find_order",
    "find_payment_method",
    "find_product",
    "find_user",
    "find_variant",
    "first_order_item",
    "is_gift_card",
]


def _find(store: Store, table: str, key: str, missing: str) -> Record:
    record = store.get(table, key)
    if record is None:
        raise ToolError(missing)
    return record


def find_order(store: Store, order_id: str) -> Record:
    return _find(store, "orders", order_id, "Order not found")


def find_user(store: Store, user_id: str) -> Record:
    return _find(store, "users", user_id, "User not found")


def find_product(store: Store, product_id: str) -> Record:
    return _find(store, "products", product_id, "Product not found")


def find_item(store: Store, item_id: str) -> Record:
    """The variant with this item id, scanning products in file order."""
    for _, product in store.items("products"):
        variant = product["variants"].get(item_id)
        if variant is not None:
            return variant  # type: ignore[no-any-return]
    raise ToolError("Item not found")


def find_variant(store: Store, product_id: str, item_id: str) -> Record:
    """A variant of one product (so an item of another product is rejected)."""
    variant = find_product(store, product_id)["variants"].get(item_id)
    if variant is None:
        raise ToolError("Variant not found")
    return variant  # type: ignore[no-any-return]


def find_payment_method(store: Store, user_id: str, payment_method_id: str) -> Record:
    method = find_user(store, user_id)["payment_methods"].get(payment_method_id)
    if method is None:
        raise ToolError("Payment method not found")
    return method  # type: ignore[no-any-return]


def is_gift_card(method: Record) -> bool:
    return bool(method["source"] == "gift_card")


def first_order_item(order: Record, item_id: str) -> Record:
    """The first item of the order with this id (upstream pairs ids with items this way)."""
    for item in order["items"]:
        if item["item_id"] == item_id:
            return item  # type: ignore[no-any-return]
    raise ToolError(f"Item {item_id} not found")
