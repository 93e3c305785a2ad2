"""The seven read tools through the dispatcher: exact text, errors, no state change."""

from __future__ import annotations

import json

import pytest

from tau2_retail.tools.dispatch import ToolResult
from tau2_retail.tools.record_shapes import ORDER_OPTIONAL_FIELDS
from tau2_retail.tools.store import Store

ORDER_W6002958 = (
    '{"order_id": "#W6002958", "user_id": "anya_sanchez_9707", "address": {"address1": '
    '"308 Main Street", "address2": "Suite 214", "city": "Columbus", "country": "USA", '
    '"state": "OH", "zip": "43171"}, "items": [{"name": "Sneakers", "product_id": "7471004230", '
    '"item_id": "2509076505", "price": 189.5, "options": {"size": "10", "color": "gray", '
    '"material": "leather"}}], "status": "pending", "fulfillments": [], "payment_history": '
    '[{"transaction_type": "payment", "amount": 189.5, "payment_method_id": "paypal_1191071"}], '
    '"cancel_reason": null, "exchange_items": null, "exchange_new_items": null, '
    '"exchange_payment_method_id": null, "exchange_price_difference": null, '
    '"return_items": null, "return_payment_method_id": null}'
)
USER_DAIKI_KIM = (
    '{"user_id": "daiki_kim_3197", "name": {"first_name": "Daiki", "last_name": "Kim"}, '
    '"address": {"address1": "110 Willow Lane", "address2": "Suite 769", "city": "Charlotte", '
    '"country": "USA", "state": "NC", "zip": "28232"}, "email": "daiki.kim1307@example.com", '
    '"payment_methods": {"paypal_2299555": {"source": "paypal", "id": "paypal_2299555"}}, '
    '"orders": []}'
)
ITEM_8349118980 = (
    '{"item_id": "8349118980", "options": {"color": "blue", "size": "S", "material": "cotton", '
    '"style": "v-neck"}, "available": true, "price": 53.43}'
)
PRODUCT_RUNNING_SHOES = (
    '{"name": "Running Shoes", "product_id": "6938111410", "variants": {"4153505238": '
    '{"item_id": "4153505238", "options": {"size": "8", "color": "red", "material": "leather", '
    '"sole": "EVA"}, "available": true, "price": 158.67}, "1775591963": {"item_id": '
    '"1775591963", "options": {"size": "10", "color": "white", "material": "leather", '
    '"sole": "EVA"}, "available": true, "price": 154.75}, "9635758562": {"item_id": '
    '"9635758562", "options": {"size": "9", "color": "white", "material": "mesh", "sole": '
    '"rubber"}, "available": true, "price": 148.95}, "9791469541": {"item_id": "9791469541", '
    '"options": {"size": "9", "color": "yellow", "material": "synthetic", "sole": "rubber"}, '
    '"available": true, "price": 147.05}, "4107812777": {"item_id": "4107812777", "options": '
    '{"size": "9", "color": "black", "material": "synthetic", "sole": "rubber"}, "available": '
    'true, "price": 155.33}}}'
)

ORDER_FIELDS = [
    *("order_id", "user_id", "address", "items", "status", "fulfillments", "payment_history"),
    *ORDER_OPTIONAL_FIELDS,
]
ADDRESS_FIELDS = ["address1", "address2", "city", "country", "state", "zip"]
USER_FIELDS = ["user_id", "name", "address", "email", "payment_methods", "orders"]
METHOD_FIELDS = {
    "credit_card": ["source", "id", "brand", "last_four"],
    "gift_card": ["source", "id", "balance"],
    "paypal": ["source", "id"],
}


def assert_ok(result: ToolResult, content: str) -> None:
    assert result == ToolResult(content=content, error=False)


def assert_error(result: ToolResult, message: str) -> None:
    assert result == ToolResult(content=f"Error: {message}", error=True)


@pytest.fixture(autouse=True)
def _reads_change_nothing(store: Store):
    yield
    assert store.changed_keys() == []
    assert store.hash() == store.seed.hash


class TestFindUserIdByNameZip:
    def test_found_bare_id(self, call):
        result = call(
            "find_user_id_by_name_zip", first_name="Yusuf", last_name="Rossi", zip="19122"
        )
        assert_ok(result, "yusuf_rossi_9620")

    def test_names_case_insensitive(self, call):
        result = call(
            "find_user_id_by_name_zip", first_name="yUSUF", last_name="ROSSI", zip="19122"
        )
        assert_ok(result, "yusuf_rossi_9620")

    @pytest.mark.parametrize("zip_code", ["19123", " 19122", "19122 ", ""])
    def test_zip_exact(self, call, zip_code):
        result = call(
            "find_user_id_by_name_zip", first_name="Yusuf", last_name="Rossi", zip=zip_code
        )
        assert_error(result, "User not found")

    def test_names_not_stripped(self, call):
        result = call(
            "find_user_id_by_name_zip", first_name="Yusuf ", last_name="Rossi", zip="19122"
        )
        assert_error(result, "User not found")

    def test_first_match_in_file_order(self, call, seed):
        # every user is found by their own name and zip unless an earlier user shares all three
        seen: dict[tuple[str, str, str], str] = {}
        for user_id, user in seed.tables["users"].items():
            key = (user["name"]["first_name"].lower(), user["name"]["last_name"].lower())
            seen.setdefault((*key, user["address"]["zip"]), user_id)
        for (first, last, zip_code), user_id in seen.items():
            result = call(
                "find_user_id_by_name_zip", first_name=first, last_name=last, zip=zip_code
            )
            assert_ok(result, user_id)


class TestFindUserIdByEmail:
    def test_found_bare_id(self, call):
        assert_ok(
            call("find_user_id_by_email", email="daiki.kim1307@example.com"), "daiki_kim_3197"
        )

    def test_case_insensitive(self, call):
        assert_ok(
            call("find_user_id_by_email", email="Daiki.KIM1307@Example.com"), "daiki_kim_3197"
        )

    @pytest.mark.parametrize("email", ["daiki.kim1307@example.org", "", "daiki_kim_3197"])
    def test_not_found(self, call, email):
        assert_error(call("find_user_id_by_email", email=email), "User not found")


def shown_records(call, seed, table, lookup, step, fields):
    """Every ``step``-th record of ``table`` as its lookup shows it: its fields in ``fields``
    order, its address's in ``ADDRESS_FIELDS`` order."""
    tool, argument, _ = lookup
    for key in list(seed.tables[table])[::step]:
        shown = json.loads(call(tool, **{argument: key}).content)
        assert list(shown) == fields
        assert list(shown["address"]) == ADDRESS_FIELDS
        yield shown


class TestGetOrderDetails:
    def test_field_order_of_every_order(self, call, seed):
        for shown in shown_records(call, seed, "orders", ORDER, 25, ORDER_FIELDS):
            assert all(shown[name] is None for name in ORDER_OPTIONAL_FIELDS)
            for item in shown["items"]:
                assert list(item) == ["name", "product_id", "item_id", "price", "options"]
            for payment in shown["payment_history"]:
                assert list(payment) == ["transaction_type", "amount", "payment_method_id"]


class TestGetUserDetails:
    def test_field_order(self, call, seed):
        for shown in shown_records(call, seed, "users", USER, 10, USER_FIELDS):
            for method in shown["payment_methods"].values():
                assert list(method) == METHOD_FIELDS[method["source"]]


# -- the four lookups by id: the exact text, the spellings found, the ids not found --------------

# the tool, its argument and the error when nothing is found
ORDER = ("get_order_details", "order_id", "Order not found")
USER = ("get_user_details", "user_id", "User not found")
PRODUCT = ("get_product_details", "product_id", "Product not found")
ITEM = ("get_item_details", "item_id", "Item not found")


@pytest.mark.parametrize(
    ("lookup", "value", "text"),
    [
        pytest.param(ORDER, "#W6002958", ORDER_W6002958, id="order-seven-null-fields"),
        pytest.param(USER, "daiki_kim_3197", USER_DAIKI_KIM, id="user"),
        pytest.param(PRODUCT, "6938111410", PRODUCT_RUNNING_SHOES, id="product"),
        pytest.param(ITEM, "8349118980", ITEM_8349118980, id="item"),
        pytest.param(ORDER, "w6002958", ORDER_W6002958, id="order-lowercase"),
        pytest.param(ORDER, " #w6002958 ", ORDER_W6002958, id="order-padded"),
        pytest.param(ORDER, "W6002958", ORDER_W6002958, id="order-no-hash"),
        pytest.param(ORDER, "\t#W6002958\n", ORDER_W6002958, id="order-tab-newline"),
        pytest.param(USER, "Daiki_Kim_3197", USER_DAIKI_KIM, id="user-mixed-case"),
        pytest.param(USER, " DAIKI_KIM_3197\t", USER_DAIKI_KIM, id="user-upper-padded"),
    ],
)
def test_lookup_exact_text(call, lookup, value, text):
    tool, argument, _ = lookup
    assert_ok(call(tool, **{argument: value}), text)


@pytest.mark.parametrize(
    ("lookup", "value"),
    [
        pytest.param(ORDER, "#W0000000", id="order-unknown"),
        pytest.param(ORDER, "", id="order-empty"),
        pytest.param(ORDER, "#", id="order-hash-only"),
        pytest.param(ORDER, "6002958", id="order-digits-only"),
        pytest.param(ORDER, "##W6002958", id="order-double-hash"),
        pytest.param(USER, "daiki_kim_319", id="user-truncated"),
        pytest.param(USER, "daiki kim 3197", id="user-spaces"),
        pytest.param(USER, "", id="user-empty"),
        pytest.param(USER, "#W6002958", id="user-order-id"),
        pytest.param(PRODUCT, "4153505238", id="product-item-id"),
        pytest.param(PRODUCT, " 6938111410", id="product-not-stripped"),
        pytest.param(PRODUCT, "0000000000", id="product-unknown"),
        pytest.param(PRODUCT, "", id="product-empty"),
        pytest.param(ITEM, "9523456873", id="item-product-id"),
        pytest.param(ITEM, "8349118980 ", id="item-not-stripped"),
        pytest.param(ITEM, "0000000000", id="item-unknown"),
        pytest.param(ITEM, "", id="item-empty"),
    ],
)
def test_lookup_not_found(call, lookup, value):
    tool, argument, error = lookup
    assert_error(call(tool, **{argument: value}), error)


class TestGetItemDetails:
    def test_every_variant_is_found(self, call, seed):
        for product in seed.tables["products"].values():
            for item_id, variant in product["variants"].items():
                assert_ok(call("get_item_details", item_id=item_id), json.dumps(variant))


class TestListAllProductTypes:
    def test_sorted_fifty_entries(self, call, seed):
        result = call("list_all_product_types")
        assert not result.error
        assert result.content.startswith(
            '{"Action Camera": "3377618313", "Air Purifier": "3821016478", "Backpack": '
        )
        assert result.content.endswith('"Wristwatch": "6066914160", "Yoga Mat": "4635925001"}')
        listed = json.loads(result.content)
        assert len(listed) == 50
        assert list(listed) == sorted(listed)
        expected = {p["name"]: p["product_id"] for p in seed.tables["products"].values()}
        assert listed == expected

    def test_no_action_recorded(self, call):
        assert call("list_all_product_types").action is None


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("find_user_id_by_name_zip", {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}),
        ("find_user_id_by_email", {"email": "daiki.kim1307@example.com"}),
        ("get_order_details", {"order_id": "#W6002958"}),
        ("get_user_details", {"user_id": "daiki_kim_3197"}),
        ("get_product_details", {"product_id": "6938111410"}),
        ("get_item_details", {"item_id": "8349118980"}),
        ("get_order_details", {"order_id": "#W0000000"}),
    ],
)
def test_reads_record_no_action(call, name, arguments):
    assert call(name, **arguments).action is None
