"""The seven read tools. They never change the store."""

from __future__ import annotations

from tau2_retail.tools.lookups import find_item, find_order, find_product, find_user
from tau2_retail.tools.normalize import same_text
from tau2_retail.tools.record_shapes import dump_for_model, order_view
from tau2_retail.tools.store import Store
from tau2_retail.tools.tool_error import ToolError

__all__ = [
    "find_user_id_by_email",
    "find_user_id_by_name_zip",
    "get_item_details",
    "get_order_details",
    "get_product_details",
    "get_user_details",
    "list_all_product_types",
]


def find_user_id_by_name_zip(store: Store, *, first_name: str, last_name: str, zip: str) -> str:
    for user_id, user in store.items("users"):
        name = user["name"]
        # the zip is compared first only because it is cheaper; the result is the same
        if (
            user["address"]["zip"] == zip
            and same_text(name["first_name"], first_name)
            and same_text(name["last_name"], last_name)
        ):
            return user_id
    raise ToolError("User not found")


def find_user_id_by_email(store: Store, *, email: str) -> str:
    for user_id, user in store.items("users"):
        if same_text(user["email"], email):
            return user_id
    raise ToolError("User not found")


def get_order_details(store: Store, *, order_id: str) -> str:
    return dump_for_model(order_view(find_order(store, order_id)))


def get_product_details(store: Store, *, product_id: str) -> str:
    return dump_for_model(find_product(store, product_id))


def get_item_details(store: Store, *, item_id: str) -> str:
    return dump_for_model(find_item(store, item_id))


def get_user_details(store: Store, *, user_id: str) -> str:
    return dump_for_model(find_user(store, user_id))


def list_all_product_types(store: Store) -> str:
    names = {product["name"]: product["product_id"] for _, product in store.items("products")}
    return dump_for_model(dict(sorted(names.items())))
