"""The OpenAI function schemas of the 17 agent tools (the 16 retail tools and ``end_conversation``).

The schemas are model-visible text, written out here by hand (never generated from the
implementations) and pinned by a snapshot test; another test checks that each schema's
parameters equal ``tools.registry.TOOLS[name].params`` (names, order, kinds), so the two cannot
drift apart. Every parameter is required and no other property is allowed.

``TOOL_SCHEMAS`` is deeply immutable (read-only mappings and tuples), so no caller can change
what every later conversation sends. ``tool_schemas()`` returns fresh plain ``dict``/``list``
copies, ready for a JSON request body; callers may change those freely.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tau2_retail.tools.record_shapes import freeze, thaw

__all__ = ["TOOL_SCHEMAS", "tool_schemas"]

_ORDER_ID = "The order id: '#' followed by 'W' and 7 digits, such as '#W0000000'."
_PAYMENT_METHOD_ID = (
    "The id of one of the user's payment methods, such as 'credit_card_0000000', "
    "'gift_card_0000000' or 'paypal_0000000' (see the user's details)."
)
_CONFIRM = "Before calling, explain the change to the user and get an explicit yes."


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _string_array(description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": description}


def _function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    """One schema; every property is required (upstream has no optional parameter)."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
                "additionalProperties": False,
            },
        },
    }


def _address(owner: str) -> dict[str, Any]:
    return {
        "address1": _string(f"First line of the {owner}, such as '123 Main St'."),
        "address2": _string("Second line, such as 'Apt 1' or 'Suite 200'; '' when there is none."),
        "city": _string("City, such as 'Austin'."),
        "state": _string("State code, such as 'TX'."),
        "country": _string("Country, such as 'USA'."),
        "zip": _string("Zip code, such as '78701'."),
    }


_SCHEMAS: tuple[dict[str, Any], ...] = (
    _function(
        "calculate",
        "Evaluate an arithmetic expression and return the result rounded to 2 decimals. Only "
        "digits, spaces, parentheses, the decimal point and the operators + - * / are allowed.",
        {"expression": _string("The expression, such as '(120.50 - 30) * 0.9'.")},
    ),
    _function(
        "cancel_pending_order",
        "Cancel an order whose status is 'pending' (processed, delivered or cancelled orders "
        "cannot be cancelled). The full payment is refunded: at once to a gift card, within "
        "5-7 business days to other methods. " + _CONFIRM + " Returns the updated order.",
        {
            "order_id": _string(_ORDER_ID),
            "reason": _string("Either 'no longer needed' or 'ordered by mistake'."),
        },
    ),
    _function(
        "exchange_delivered_order_items",
        "Exchange items of a delivered order for other variants of the same products (another "
        "size, color, ...). An order can be exchanged or returned only once, so collect every "
        "item first. The price difference is charged to or refunded to the given payment "
        "method. " + _CONFIRM + " Returns the updated order.",
        {
            "order_id": _string(_ORDER_ID),
            "item_ids": _string_array(
                "Item ids of the order to exchange, such as '1000000000'; repeat an id to "
                "exchange several units of it."
            ),
            "new_item_ids": _string_array(
                "The replacement item ids, position by position: each must be an available "
                "variant of the same product as the item it replaces."
            ),
            "payment_method_id": _string(_PAYMENT_METHOD_ID),
        },
    ),
    _function(
        "find_user_id_by_name_zip",
        "Find a user's id from first name, last name and zip code. Use it when the user cannot "
        "give an email or the email finds nobody.",
        {
            "first_name": _string("First name, such as 'Jane'."),
            "last_name": _string("Last name, such as 'Smith'."),
            "zip": _string("Zip code of the user's default address, such as '78701'."),
        },
    ),
    _function(
        "find_user_id_by_email",
        "Find a user's id from their email address. The usual way to identify a user.",
        {"email": _string("Email address, such as 'jane.smith1234@example.com'.")},
    ),
    _function(
        "get_order_details",
        "Get an order: status, items (with item ids, product ids, prices and options), "
        "shipping address, fulfillments and payment history.",
        {"order_id": _string(_ORDER_ID)},
    ),
    _function(
        "get_product_details",
        "Get a product and all its variants (item id, options, availability, price). Takes a "
        "product id, which is not the same as an item id.",
        {"product_id": _string("The product id, such as '1000000000' (not an item id).")},
    ),
    _function(
        "get_item_details",
        "Get one item, that is one variant of a product: options, availability and price. "
        "Takes an item id, which is not the same as a product id.",
        {"item_id": _string("The item id, such as '1000000000' (not a product id).")},
    ),
    _function(
        "get_user_details",
        "Get a user's profile: name, default address, email, payment methods (with gift card "
        "balances) and order ids.",
        {"user_id": _string("The user id, such as 'jane_smith_1234'.")},
    ),
    _function(
        "list_all_product_types",
        "List the 50 product types of the store as a JSON object mapping each product name to "
        "its product id.",
        {},
    ),
    _function(
        "modify_pending_order_address",
        "Change the shipping address of an order that is still pending. "
        + _CONFIRM
        + " Returns the updated order.",
        {"order_id": _string(_ORDER_ID), **_address("new shipping address")},
    ),
    _function(
        "modify_pending_order_items",
        "Swap items of a pending order for other variants of the same products (another size, "
        "color, ...). An order's items can be modified only once, so collect every change "
        "first. The price difference is charged to or refunded to the given payment method. "
        + _CONFIRM
        + " Returns the updated order.",
        {
            "order_id": _string(_ORDER_ID),
            "item_ids": _string_array(
                "Item ids of the order to modify, such as '1000000000'; repeat an id to modify "
                "several units of it."
            ),
            "new_item_ids": _string_array(
                "The new item ids, position by position: each must be an available variant of "
                "the same product as the item it replaces, and differ from it."
            ),
            "payment_method_id": _string(_PAYMENT_METHOD_ID),
        },
    ),
    _function(
        "modify_pending_order_payment",
        "Pay for a pending order with another of the user's payment methods; the original "
        "payment is refunded. A gift card must cover the whole amount. "
        + _CONFIRM
        + " Returns the updated order.",
        {"order_id": _string(_ORDER_ID), "payment_method_id": _string(_PAYMENT_METHOD_ID)},
    ),
    _function(
        "modify_user_address",
        "Change a user's default address (existing orders keep their shipping address). "
        + _CONFIRM
        + " Returns the updated user.",
        {
            "user_id": _string("The user id, such as 'jane_smith_1234'."),
            **_address("new default address"),
        },
    ),
    _function(
        "return_delivered_order_items",
        "Request the return of items of a delivered order; its status becomes 'return "
        "requested' and the user gets return instructions by email. The refund goes to the "
        "original payment method or to one of the user's gift cards. An order can be returned "
        "or exchanged only once, so collect every item first. "
        + _CONFIRM
        + " Returns the updated order.",
        {
            "order_id": _string(_ORDER_ID),
            "item_ids": _string_array(
                "Item ids of the order to return, such as '1000000000'; repeat an id to return "
                "several units of it."
            ),
            "payment_method_id": _string(
                "Where the refund goes: the order's original payment method or a gift card of "
                "the user, such as 'gift_card_0000000'."
            ),
        },
    ),
    _function(
        "transfer_to_human_agents",
        "Transfer the user to a human agent, with a summary of the issue. Only when the user "
        "asks for a human agent, or the request cannot be handled with these tools within the "
        "policy.",
        {"summary": _string("A short summary of the user's issue and what was done so far.")},
    ),
    _function(
        "end_conversation",
        "End the conversation. Call it only after the user has confirmed they need nothing "
        "else, or right after transferring them to a human agent.",
        {},
    ),
)


TOOL_SCHEMAS: tuple[Mapping[str, Any], ...] = tuple(freeze(schema) for schema in _SCHEMAS)
"""The 17 schemas in ``tools.registry.AGENT_TOOL_NAMES`` order, deeply immutable."""


def tool_schemas() -> list[dict[str, Any]]:
    """Fresh, mutable, JSON-ready copies of the 17 schemas (OpenAI ``tools`` request field)."""
    thawed: list[dict[str, Any]] = [thaw(schema) for schema in TOOL_SCHEMAS]
    return thawed
