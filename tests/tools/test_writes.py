"""The seven write tools through the dispatcher: exact text, every error, check order, quirks.

Each error of retail_domain.md §4 has a test; each pair of consecutive checks has a test whose
call fails both, so reordering the checks of a tool fails a test. Records used (verified by
``_precondition`` where the test depends on their state):

- ``#W6002958`` pending, one item, paid by paypal (anya_sanchez_9707)
- ``#W3897284`` pending, paid by gift_card_3410768 (balance 56.0 < 267.58)
- ``#W8328622`` pending, paid by gift_card_8836799 (78.0); the user also has credit_card_6291943
- ``#W1080318`` pending, one T-shirt 8349118980, paid by credit_card_3577130; gift_card_3749819 91.0
- ``#W8255453`` pending, a laptop and a T-shirt, paid by gift_card_5591026 (91.0)
- ``#W5866402`` delivered, an espresso machine and sneakers, paid by paypal_8049766; the user
  also has gift_card_7794233 (56.0) and credit_card_9753331
- ``#W2378156`` delivered (yusuf_rossi_9620), ``#W3780282`` processed, ``#W3916748`` cancelled
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

from tau2_retail.tools.database import SeedDatabase
from tau2_retail.tools.dispatch import Action, ToolResult, dispatch
from tau2_retail.tools.record_shapes import deep_copy
from tau2_retail.tools.store import Store

from .values import NEW_ADDRESS


def assert_error(result: ToolResult, message: str) -> None:
    assert result == ToolResult(content=f"Error: {message}", error=True)


def succeeded(result: ToolResult) -> dict[str, Any]:
    assert not result.error, result.content
    shown: dict[str, Any] = json.loads(result.content)
    return shown


def balance(store: Store, user_id: str, method_id: str) -> float:
    user = store.get("users", user_id)
    assert user is not None
    amount: float = user["payment_methods"][method_id]["balance"]
    return amount


def current(store: Store, order_id: str) -> dict[str, Any]:
    """The store's current order (the seed's until written)."""
    order = store.get("orders", order_id)
    assert order is not None
    return order


def _precondition(seed: SeedDatabase, order_id: str, status: str, method_id: str) -> None:
    order = seed.tables["orders"][order_id]
    assert order["status"] == status, f"test data changed: {order_id} is {order['status']}"
    assert order["payment_history"][0]["payment_method_id"] == method_id


def derived_seed(seed: SeedDatabase, users: dict[str, Any]) -> SeedDatabase:
    """The seed with some user records replaced (for states the seed does not contain)."""
    tables = {name: dict(table) for name, table in seed.tables.items()}
    tables["users"].update(users)
    return SeedDatabase(tables)


def modify_items_of_w1080318(call: Any) -> None:
    """Swap the T-shirt of ``#W1080318``: its status becomes ``pending (item modified)``."""
    succeeded(
        call(
            "modify_pending_order_items",
            order_id="#W1080318",
            item_ids=["8349118980"],
            new_item_ids=["9647292434"],
            payment_method_id="credit_card_3577130",
        )
    )


@pytest.fixture
def unchanged(store: Store):
    """Use in tests of failures: the store must be left exactly as the seed."""
    yield
    assert store.changed_keys() == []


class TestCancelPendingOrder:
    def test_exact_text_and_action(self, call, store, seed):
        _precondition(seed, "#W6002958", "pending", "paypal_1191071")
        result = call("cancel_pending_order", order_id="w6002958", reason="ordered by mistake")
        assert result.content == (
            '{"order_id": "#W6002958", "user_id": "anya_sanchez_9707", "address": {"address1": '
            '"308 Main Street", "address2": "Suite 214", "city": "Columbus", "country": "USA", '
            '"state": "OH", "zip": "43171"}, "items": [{"name": "Sneakers", "product_id": '
            '"7471004230", "item_id": "2509076505", "price": 189.5, "options": {"size": "10", '
            '"color": "gray", "material": "leather"}}], "status": "cancelled", "fulfillments": '
            '[], "payment_history": [{"transaction_type": "payment", "amount": 189.5, '
            '"payment_method_id": "paypal_1191071"}, {"transaction_type": "refund", "amount": '
            '189.5, "payment_method_id": "paypal_1191071"}], "cancel_reason": "ordered by '
            'mistake", "exchange_items": null, "exchange_new_items": null, '
            '"exchange_payment_method_id": null, "exchange_price_difference": null, '
            '"return_items": null, "return_payment_method_id": null}'
        )
        assert result.error is False
        assert result.action == Action(
            name="cancel_pending_order",
            arguments={"order_id": "#W6002958", "reason": "ordered by mistake"},
        )
        # a paypal refund changes no user record
        assert store.changed_keys() == [("orders", "#W6002958")]

    def test_gift_card_credited(self, call, store, seed):
        _precondition(seed, "#W3897284", "pending", "gift_card_3410768")
        shown = succeeded(
            call("cancel_pending_order", order_id="#W3897284", reason="no longer needed")
        )
        assert shown["cancel_reason"] == "no longer needed"
        assert shown["payment_history"][-1] == {
            "transaction_type": "refund",
            "amount": 267.58,
            "payment_method_id": "gift_card_3410768",
        }
        assert balance(store, "noah_hernandez_4232", "gift_card_3410768") == 323.58
        assert store.changed_keys() == [("orders", "#W3897284"), ("users", "noah_hernandez_4232")]

    def test_refunds_every_history_entry(self, call, store, seed):
        # a payment change keeps the status 'pending' and leaves three entries, refunds included
        _precondition(seed, "#W8328622", "pending", "gift_card_8836799")
        succeeded(
            call(
                "modify_pending_order_payment",
                order_id="#W8328622",
                payment_method_id="credit_card_6291943",
            )
        )
        assert balance(store, "ava_smith_1453", "gift_card_8836799") == 413.99
        shown = succeeded(
            call("cancel_pending_order", order_id="#W8328622", reason="no longer needed")
        )
        assert shown["payment_history"][3:] == [
            {"transaction_type": "refund", "amount": 335.99, "payment_method_id": method}
            for method in ("gift_card_8836799", "credit_card_6291943", "gift_card_8836799")
        ]
        assert balance(store, "ava_smith_1453", "gift_card_8836799") == 1085.97

    def test_order_not_found(self, call, unchanged):
        assert_error(
            call("cancel_pending_order", order_id="#W0000000", reason="no longer needed"),
            "Order not found",
        )

    @pytest.mark.parametrize("order_id", ["#W3780282", "#W2378156", "#W3916748"])
    def test_non_pending(self, call, unchanged, order_id):
        assert_error(
            call("cancel_pending_order", order_id=order_id, reason="no longer needed"),
            "Non-pending order cannot be cancelled",
        )

    def test_item_modified_is_not_pending(self, call):
        modify_items_of_w1080318(call)
        assert_error(
            call("cancel_pending_order", order_id="#W1080318", reason="no longer needed"),
            "Non-pending order cannot be cancelled",
        )

    @pytest.mark.parametrize("reason", ["No longer needed", "no longer needed ", "other", ""])
    def test_invalid_reason(self, call, unchanged, reason):
        assert_error(
            call("cancel_pending_order", order_id="#W6002958", reason=reason), "Invalid reason"
        )

    def test_order_checked_before_status(self, call, unchanged):
        assert_error(
            call("cancel_pending_order", order_id="#W9999999", reason="bad"), "Order not found"
        )

    def test_status_checked_before_reason(self, call, unchanged):
        assert_error(
            call("cancel_pending_order", order_id="#W3780282", reason="bad"),
            "Non-pending order cannot be cancelled",
        )

    def test_credits_made_before_a_failing_refund_stay(self, seed):
        # upstream credits gift cards inside the refund loop: a later unknown method fails the
        # call after earlier credits were made, and the order is left unchanged
        order = deep_copy(seed.tables["orders"]["#W8328622"])
        store = Store(seed)
        store.writable("orders", "#W8328622")["payment_history"] = [
            *order["payment_history"],
            {"transaction_type": "payment", "amount": 1.0, "payment_method_id": "paypal_0000000"},
        ]
        result = dispatch(
            store, "cancel_pending_order", {"order_id": "#W8328622", "reason": "no longer needed"}
        )
        assert_error(result, "Payment method not found")
        assert balance(store, "ava_smith_1453", "gift_card_8836799") == 413.99
        assert current(store, "#W8328622")["status"] == "pending"


class TestModifyPendingOrderAddress:
    NEW: ClassVar[dict[str, str]] = NEW_ADDRESS

    def test_address_stored_in_field_order(self, call, store):
        # arguments arrive in signature order (state before country); storage is field order
        result = call("modify_pending_order_address", order_id=" #w6002958", **self.NEW)
        assert '"address": {"address1": "1 Test Road", "address2": "", "city": "Boston", ' in (
            result.content
        )
        assert '"country": "USA", "state": "MA", "zip": "02101"}, "items": [' in result.content
        assert current(store, "#W6002958")["address"] == {
            "address1": "1 Test Road",
            "address2": "",
            "city": "Boston",
            "country": "USA",
            "state": "MA",
            "zip": "02101",
        }
        assert result.action == Action(
            name="modify_pending_order_address", arguments={"order_id": "#W6002958", **self.NEW}
        )
        shown = succeeded(result)
        assert shown["status"] == "pending"
        assert store.changed_keys() == [("orders", "#W6002958")]

    def test_item_modified_counts_as_pending(self, call):
        modify_items_of_w1080318(call)
        shown = succeeded(call("modify_pending_order_address", order_id="#W1080318", **self.NEW))
        assert shown["status"] == "pending (item modified)"
        assert shown["address"]["city"] == "Boston"

    def test_order_not_found(self, call, unchanged):
        assert_error(
            call("modify_pending_order_address", order_id="#W0000000", **self.NEW),
            "Order not found",
        )

    @pytest.mark.parametrize("order_id", ["#W2378156", "#W3780282", "#W3916748"])
    def test_non_pending(self, call, unchanged, order_id):
        assert_error(
            call("modify_pending_order_address", order_id=order_id, **self.NEW),
            "Non-pending order cannot be modified",
        )


class TestModifyUserAddress:
    NEW: ClassVar[dict[str, str]] = {
        "address1": "1 Test Road",
        "address2": "Apt 2",
        "city": "Boston",
        "state": "MA",
        "country": "USA",
        "zip": "02101",
    }

    def test_exact_text_and_action(self, call, store):
        result = call("modify_user_address", user_id=" Daiki_Kim_3197 ", **self.NEW)
        assert result == ToolResult(
            content=(
                '{"user_id": "daiki_kim_3197", "name": {"first_name": "Daiki", "last_name": '
                '"Kim"}, "address": {"address1": "1 Test Road", "address2": "Apt 2", "city": '
                '"Boston", "country": "USA", "state": "MA", "zip": "02101"}, "email": '
                '"daiki.kim1307@example.com", "payment_methods": {"paypal_2299555": {"source": '
                '"paypal", "id": "paypal_2299555"}}, "orders": []}'
            ),
            error=False,
            action=Action(
                name="modify_user_address", arguments={"user_id": "daiki_kim_3197", **self.NEW}
            ),
        )
        assert store.changed_keys() == [("users", "daiki_kim_3197")]

    def test_noah_brown_normalized(self, call):
        result = call("modify_user_address", user_id=" Noah_Brown_6181 ", **self.NEW)
        assert result.action is not None
        assert result.action.arguments["user_id"] == "noah_brown_6181"

    def test_user_not_found(self, call, unchanged):
        assert_error(
            call("modify_user_address", user_id="daiki_kim_0000", **self.NEW), "User not found"
        )


class _ItemSwapChecks:
    """The checks both item-swapping tools make in the same order, each with its own texts."""

    TOOL: ClassVar[str]
    ORDER: ClassVar[str]
    METHOD: ClassVar[str]
    ITEM: ClassVar[str]  # an item of ORDER
    NEW: ClassVar[str]  # an available variant of ITEM's product, other than ITEM
    OTHER_PRODUCT: ClassVar[str]  # a variant of another product
    UNAVAILABLE: ClassVar[str]  # an unavailable variant of ITEM's product
    REFUSED_ORDER: ClassVar[str]  # an order in a status the tool refuses
    STATUS_ERROR: ClassVar[str]
    COUNT_ERROR: ClassVar[str]  # with ``{}`` for the missing item id
    LENGTH_ERROR: ClassVar[str]

    def swap(self, call, item_ids, new_item_ids, method=None, order=None):
        return call(
            self.TOOL,
            order_id=order or self.ORDER,
            item_ids=item_ids,
            new_item_ids=new_item_ids,
            payment_method_id=method or self.METHOD,
        )

    def test_order_not_found(self, call, unchanged):
        assert_error(self.swap(call, [], [], order="#W0000000"), "Order not found")

    def test_lengths_must_match(self, call, unchanged):
        assert_error(self.swap(call, [self.ITEM], [self.NEW, self.NEW]), self.LENGTH_ERROR)

    def test_variant_of_another_product(self, call, unchanged):
        assert_error(self.swap(call, [self.ITEM], [self.OTHER_PRODUCT]), "Variant not found")

    def test_unavailable_variant(self, call, unchanged):
        assert_error(
            self.swap(call, [self.ITEM], [self.UNAVAILABLE]),
            f"New item {self.UNAVAILABLE} not found or available",
        )

    def test_status_checked_before_count(self, call, unchanged):
        assert_error(
            self.swap(call, ["0000000000"], [], order=self.REFUSED_ORDER), self.STATUS_ERROR
        )

    def test_count_checked_before_length(self, call, unchanged):
        assert_error(self.swap(call, ["0000000000"], []), self.COUNT_ERROR.format("0000000000"))

    def test_length_checked_before_pairs(self, call, unchanged):
        assert_error(
            self.swap(call, [self.ITEM], [self.OTHER_PRODUCT, "0000000000"]), self.LENGTH_ERROR
        )

    def test_pairs_checked_before_payment_method(self, call, unchanged):
        assert_error(
            self.swap(call, [self.ITEM], [self.OTHER_PRODUCT], "paypal_0000000"),
            "Variant not found",
        )


class TestExchangeDeliveredOrderItems(_ItemSwapChecks):
    TOOL = "exchange_delivered_order_items"
    ORDER = "#W5866402"
    METHOD = "credit_card_9753331"
    ITEM = "9727387530"
    NEW = "2509076505"
    OTHER_PRODUCT = "7407838442"
    UNAVAILABLE = "3631875806"
    REFUSED_ORDER = "#W1080318"
    STATUS_ERROR = "Non-delivered order cannot be exchanged"
    COUNT_ERROR = "Number of {} not found."
    LENGTH_ERROR = "The number of items to be exchanged should match."

    def test_sorted_lists_rounded_difference_no_payment(self, call, store, seed):
        _precondition(seed, "#W5866402", "delivered", "paypal_8049766")
        result = self.swap(call, ["6242772310", "9727387530"], ["7407838442", "2509076505"])
        assert result.content.endswith(
            '"status": "exchange requested", "fulfillments": '
            + json.dumps(seed.tables["orders"]["#W5866402"]["fulfillments"])
            + ', "payment_history": [{"transaction_type": "payment", "amount": 3203.78, '
            '"payment_method_id": "paypal_8049766"}], "cancel_reason": null, "exchange_items": '
            '["6242772310", "9727387530"], "exchange_new_items": ["2509076505", "7407838442"], '
            '"exchange_payment_method_id": "credit_card_9753331", "exchange_price_difference": '
            '67.63, "return_items": null, "return_payment_method_id": null}'
        )
        shown = succeeded(result)
        # the items themselves are not changed by an exchange request
        assert shown["items"] == seed.tables["orders"]["#W5866402"]["items"]
        assert result.action == Action(
            name="exchange_delivered_order_items",
            arguments={
                "order_id": "#W5866402",
                "item_ids": ["6242772310", "9727387530"],
                "new_item_ids": ["7407838442", "2509076505"],
                "payment_method_id": "credit_card_9753331",
            },
        )
        assert store.changed_keys() == [("orders", "#W5866402")]

    def test_gift_card_refund_changes_no_balance(self, call, store):
        shown = succeeded(self.swap(call, ["6242772310"], ["3709608322"], "gift_card_7794233"))
        assert shown["exchange_price_difference"] == -251.33
        assert balance(store, "olivia_ito_3591", "gift_card_7794233") == 56.0
        assert store.changed_keys() == [("orders", "#W5866402")]

    def test_same_sku_accepted(self, call):
        result = self.swap(call, ["1151293680"], ["1151293680"], "credit_card_9513926", "#W2378156")
        assert '"exchange_price_difference": 0.0, ' in result.content
        assert succeeded(result)["exchange_new_items"] == ["1151293680"]

    def test_empty_lists_accepted(self, call):
        # the difference is upstream's integer start value, rounded: 0, not 0.0
        result = self.swap(call, [], [])
        assert '"exchange_items": [], "exchange_new_items": [], ' in result.content
        assert '"exchange_price_difference": 0, ' in result.content
        assert succeeded(result)["status"] == "exchange requested"

    def test_duplicates_within_count(self, call, seed):
        _precondition(seed, "#W1840144", "delivered", "paypal_2306935")
        shown = succeeded(
            self.swap(
                call,
                ["8590708195", "8590708195"],
                ["8590708195", "8590708195"],
                "paypal_2306935",
                "#W1840144",
            )
        )
        assert shown["exchange_items"] == ["8590708195", "8590708195"]

    @pytest.mark.parametrize("order_id", ["#W1080318", "#W3780282", "#W3916748"])
    def test_non_delivered(self, call, unchanged, order_id):
        assert_error(
            self.swap(call, [], [], order=order_id), "Non-delivered order cannot be exchanged"
        )

    @pytest.mark.parametrize(
        ("item_ids", "missing"),
        [
            (["6242772310", "6242772310"], "6242772310"),
            (["0000000000"], "0000000000"),
            (["6242772310", "1111111111", "2222222222"], "1111111111"),
        ],
    )
    def test_item_count(self, call, unchanged, item_ids, missing):
        new_item_ids = ["3709608322"] * len(item_ids)
        assert_error(self.swap(call, item_ids, new_item_ids), f"Number of {missing} not found.")

    @pytest.mark.parametrize("method", ["credit_card_0000000", "credit_card_3577130"])
    def test_payment_method_not_found(self, call, unchanged, method):
        # credit_card_3577130 exists, but belongs to another user
        assert_error(
            self.swap(call, ["6242772310"], ["3709608322"], method), "Payment method not found"
        )

    def test_insufficient_gift_card(self, call, unchanged):
        assert_error(
            self.swap(
                call,
                ["6242772310", "9727387530"],
                ["7407838442", "2509076505"],
                "gift_card_7794233",
            ),
            "Insufficient gift card balance to pay for the price difference",
        )

    def test_pairs_checked_in_argument_order(self, call, unchanged):
        assert_error(
            self.swap(call, ["9727387530", "6242772310"], ["3631875806", "0000000000"]),
            "New item 3631875806 not found or available",
        )
        assert_error(
            self.swap(call, ["6242772310", "9727387530"], ["0000000000", "3631875806"]),
            "Variant not found",
        )


class TestReturnDeliveredOrderItems:
    def give_back(self, call, item_ids, method="paypal_8049766", order="#W5866402"):
        return call(
            "return_delivered_order_items",
            order_id=order,
            item_ids=item_ids,
            payment_method_id=method,
        )

    def test_original_method_sorted_items_no_refund(self, call, store, seed):
        _precondition(seed, "#W5866402", "delivered", "paypal_8049766")
        result = self.give_back(call, ["9727387530", "6242772310"])
        assert result.content.endswith(
            '"payment_history": [{"transaction_type": "payment", "amount": 3203.78, '
            '"payment_method_id": "paypal_8049766"}], "cancel_reason": null, "exchange_items": '
            'null, "exchange_new_items": null, "exchange_payment_method_id": null, '
            '"exchange_price_difference": null, "return_items": ["6242772310", "9727387530"], '
            '"return_payment_method_id": "paypal_8049766"}'
        )
        assert succeeded(result)["status"] == "return requested"
        assert result.action == Action(
            name="return_delivered_order_items",
            arguments={
                "order_id": "#W5866402",
                "item_ids": ["9727387530", "6242772310"],
                "payment_method_id": "paypal_8049766",
            },
        )
        assert store.changed_keys() == [("orders", "#W5866402")]

    def test_any_gift_card_of_the_user(self, call, store):
        shown = succeeded(self.give_back(call, ["6242772310"], "gift_card_7794233"))
        assert shown["return_payment_method_id"] == "gift_card_7794233"
        assert balance(store, "olivia_ito_3591", "gift_card_7794233") == 56.0

    def test_normalized_order_id_recorded(self, call, seed):
        _precondition(seed, "#W2378156", "delivered", "credit_card_9513926")
        result = self.give_back(call, ["4602305039"], "credit_card_9513926", " w2378156 ")
        assert result.action is not None
        assert result.action.arguments["order_id"] == "#W2378156"
        assert succeeded(result)["order_id"] == "#W2378156"

    def test_duplicates_within_count(self, call):
        shown = succeeded(
            self.give_back(call, ["8590708195", "8590708195"], "paypal_2306935", "#W1840144")
        )
        assert shown["return_items"] == ["8590708195", "8590708195"]

    def test_order_not_found(self, call, unchanged):
        assert_error(self.give_back(call, [], order="#W0000000"), "Order not found")

    @pytest.mark.parametrize("order_id", ["#W1080318", "#W3780282", "#W3916748"])
    def test_non_delivered(self, call, unchanged, order_id):
        assert_error(
            self.give_back(call, [], order=order_id), "Non-delivered order cannot be returned"
        )

    @pytest.mark.parametrize("method", ["paypal_0000000", "gift_card_3749819"])
    def test_payment_method_not_found(self, call, unchanged, method):
        # gift_card_3749819 exists, but belongs to another user
        assert_error(self.give_back(call, ["6242772310"], method), "Payment method not found")

    def test_not_the_original_method(self, call, unchanged):
        assert_error(
            self.give_back(call, ["6242772310"], "credit_card_9753331"),
            "Payment method should be the original payment method",
        )

    @pytest.mark.parametrize(
        "item_ids", [["6242772310", "6242772310"], ["0000000000"], ["8590708195"]]
    )
    def test_some_item_not_found(self, call, unchanged, item_ids):
        assert_error(self.give_back(call, item_ids), "Some item not found")

    def test_status_checked_before_payment_method(self, call, unchanged):
        assert_error(
            self.give_back(call, [], "paypal_0000000", "#W1080318"),
            "Non-delivered order cannot be returned",
        )

    def test_method_existence_checked_before_originality(self, call, unchanged):
        assert_error(
            self.give_back(call, ["0000000000"], "credit_card_0000000"), "Payment method not found"
        )

    def test_originality_checked_before_items(self, call, unchanged):
        assert_error(
            self.give_back(call, ["0000000000"], "credit_card_9753331"),
            "Payment method should be the original payment method",
        )

    def test_gift_card_skips_originality_then_items(self, call, unchanged):
        assert_error(
            self.give_back(call, ["0000000000"], "gift_card_7794233"), "Some item not found"
        )


class TestModifyPendingOrderItems(_ItemSwapChecks):
    TOOL = "modify_pending_order_items"
    ORDER = "#W1080318"
    METHOD = "credit_card_3577130"
    ITEM = "8349118980"
    NEW = "9647292434"
    OTHER_PRODUCT = "2913673670"
    UNAVAILABLE = "5047954489"
    REFUSED_ORDER = "#W3780282"
    STATUS_ERROR = "Non-pending order cannot be modified"
    COUNT_ERROR = "{} not found"
    LENGTH_ERROR = "The number of items to be exchanged should match"
    # the two items of #W8255453, each with the variant it is swapped for (test_last_pair_*)
    LAPTOP = ("3334537816", "2913673670", 2701.89)
    SHIRT = ("9612497925", "2060066974", 51.05)

    def test_unrounded_payment_and_gift_card_debit(self, call, store, seed):
        _precondition(seed, "#W1080318", "pending", "credit_card_3577130")
        result = self.swap(call, ["8349118980"], ["9647292434"], "gift_card_3749819")
        assert (
            '"status": "pending (item modified)", "fulfillments": [], "payment_history": '
            '[{"transaction_type": "payment", "amount": 53.43, "payment_method_id": '
            '"credit_card_3577130"}, {"transaction_type": "payment", "amount": '
            '0.04999999999999716, "payment_method_id": "gift_card_3749819"}], "cancel_reason": '
            "null, " in result.content
        )
        assert (
            '"items": [{"name": "T-Shirt", "product_id": "9523456873", "item_id": "9647292434", '
            '"price": 53.48, "options": {"color": "purple", "size": "S", "material": '
            '"polyester", "style": "v-neck"}}]' in result.content
        )
        assert balance(store, "omar_kim_3528", "gift_card_3749819") == 90.95
        assert result.action == Action(
            name="modify_pending_order_items",
            arguments={
                "order_id": "#W1080318",
                "item_ids": ["8349118980"],
                "new_item_ids": ["9647292434"],
                "payment_method_id": "gift_card_3749819",
            },
        )

    @pytest.mark.parametrize(
        ("order", "item", "new", "card", "user", "refund", "balance_after", "changed"),
        [
            pytest.param(
                "#W7639559", "9647292434", "8349118980", "gift_card_4303603",
                "yusuf_garcia_1670", "0.04999999999999716", 6.05,
                [("orders", "#W7639559"), ("users", "yusuf_garcia_1670")],
                id="negative_difference_is_a_refund_credited",
            ),
            # the user record was written, but is canonically unchanged
            pytest.param(
                "#W5762451", "9838673490", "7184044281", "gift_card_4544711",
                "liam_kovacs_4286", "0.0", 37.0, [("orders", "#W5762451")],
                id="zero_difference_appends_refund_of_zero",
            ),
        ],
    )  # fmt: skip
    def test_a_difference_not_above_zero_is_a_refund_leg(
        self, call, store, seed, order, item, new, card, user, refund, balance_after, changed
    ):
        _precondition(seed, order, "pending", card)
        result = self.swap(call, [item], [new], card, order)
        leg = (
            f'{{"transaction_type": "refund", "amount": {refund}, "payment_method_id": "{card}"}}]'
        )
        assert leg in result.content
        assert balance(store, user, card) == balance_after
        assert store.changed_keys() == changed

    def test_empty_lists_append_refund_of_zero(self, call):
        shown = succeeded(self.swap(call, [], []))
        assert shown["payment_history"][-1] == {
            "transaction_type": "refund",
            "amount": 0.0,
            "payment_method_id": "credit_card_3577130",
        }
        assert shown["status"] == "pending (item modified)"

    @pytest.mark.parametrize("last", ["shirt", "laptop"])
    def test_last_pair_price_and_options_for_every_item(self, call, store, seed, last):
        # upstream bug reproduced: each modified item gets the LAST pair's variant price/options
        _precondition(seed, "#W8255453", "pending", "gift_card_5591026")
        pairs = [self.LAPTOP, self.SHIRT] if last == "shirt" else [self.SHIRT, self.LAPTOP]
        shown = succeeded(
            self.swap(
                call,
                [old for old, _, _ in pairs],
                [new for _, new, _ in pairs],
                "gift_card_5591026",
                "#W8255453",
            )
        )
        last_id = pairs[-1][1]
        last_variant = seed.tables["products"]["9523456873" if last == "shirt" else "4760268021"][
            "variants"
        ][last_id]
        assert [item["item_id"] for item in shown["items"]] == ["2913673670", "2060066974"]
        assert [item["name"] for item in shown["items"]] == ["Laptop", "T-Shirt"]
        for item in shown["items"]:
            assert item["price"] == last_variant["price"]
            assert item["options"] == last_variant["options"]
        # the difference is still the sum over the pairs' own variants
        assert shown["payment_history"][-1]["transaction_type"] == "refund"
        assert abs(shown["payment_history"][-1]["amount"] - 47.5) < 1e-9
        assert balance(store, "amelia_rossi_5121", "gift_card_5591026") == 138.5

    def test_last_pair_exact_items_text(self, call):
        result = self.swap(
            call,
            ["3334537816", "9612497925"],
            ["2913673670", "2060066974"],
            "paypal_6844511",
            "#W8255453",
        )
        assert (
            '"items": [{"name": "Laptop", "product_id": "4760268021", "item_id": "2913673670", '
            '"price": 51.05, "options": {"color": "black", "size": "XL", "material": "cotton", '
            '"style": "crew neck"}}, {"name": "T-Shirt", "product_id": "9523456873", "item_id": '
            '"2060066974", "price": 51.05, "options": {"color": "black", "size": "XL", '
            '"material": "cotton", "style": "crew neck"}}]' in result.content
        )
        assert (
            '{"transaction_type": "refund", "amount": 47.50000000000008, "payment_method_id": '
            '"paypal_6844511"}]' in result.content
        )

    @pytest.mark.parametrize("order_id", ["#W2378156", "#W3780282", "#W3916748"])
    def test_non_pending(self, call, unchanged, order_id):
        assert_error(
            self.swap(call, [], [], order=order_id), "Non-pending order cannot be modified"
        )

    def test_only_once(self, call):
        succeeded(self.swap(call, ["8349118980"], ["9647292434"]))
        assert_error(
            self.swap(call, ["9647292434"], ["8349118980"]),
            "Non-pending order cannot be modified",
        )

    @pytest.mark.parametrize(
        ("item_ids", "missing"),
        [(["8349118980", "8349118980"], "8349118980"), (["0000000000"], "0000000000")],
    )
    def test_item_count(self, call, unchanged, item_ids, missing):
        assert_error(
            self.swap(call, item_ids, ["9647292434"] * len(item_ids)), f"{missing} not found"
        )

    def test_new_id_must_differ(self, call, unchanged):
        assert_error(
            self.swap(call, ["8349118980"], ["8349118980"]),
            "The new item id should be different from the old item id",
        )

    @pytest.mark.parametrize("method", ["gift_card_0000000", "paypal_8049766"])
    def test_payment_method_not_found(self, call, unchanged, method):
        assert_error(
            self.swap(call, ["8349118980"], ["9647292434"], method), "Payment method not found"
        )

    def test_insufficient_gift_card(self, call, unchanged, seed):
        _precondition(seed, "#W2079779", "pending", "gift_card_3751659")
        assert_error(
            self.swap(call, ["9168994198"], ["5925362855"], "gift_card_3751659", "#W2079779"),
            "Insufficient gift card balance to pay for the new item",
        )

    def test_pairs_checked_in_argument_order(self, call, unchanged):
        items = ["3334537816", "9612497925"]
        assert_error(
            self.swap(call, items, ["3334537816", "0000000000"], "paypal_6844511", "#W8255453"),
            "The new item id should be different from the old item id",
        )
        assert_error(
            self.swap(call, items, ["0000000000", "9612497925"], "paypal_6844511", "#W8255453"),
            "Variant not found",
        )


NON_PENDING = "Non-pending order cannot be modified"
NO_METHOD = "Payment method not found"
SAME_METHOD = "The new payment method should be different from the current one"


class TestModifyPendingOrderPayment:
    def change(self, call, method, order="#W1080318"):
        return call("modify_pending_order_payment", order_id=order, payment_method_id=method)

    def test_payment_and_refund_legs_new_gift_card_debited(self, call, store, seed):
        _precondition(seed, "#W1080318", "pending", "credit_card_3577130")
        result = self.change(call, "gift_card_3749819", "#w1080318")
        assert (
            '"status": "pending", "fulfillments": [], "payment_history": [{"transaction_type": '
            '"payment", "amount": 53.43, "payment_method_id": "credit_card_3577130"}, '
            '{"transaction_type": "payment", "amount": 53.43, "payment_method_id": '
            '"gift_card_3749819"}, {"transaction_type": "refund", "amount": 53.43, '
            '"payment_method_id": "credit_card_3577130"}], "cancel_reason": null, '
            in result.content
        )
        assert balance(store, "omar_kim_3528", "gift_card_3749819") == 37.57
        assert result.action == Action(
            name="modify_pending_order_payment",
            arguments={"order_id": "#W1080318", "payment_method_id": "gift_card_3749819"},
        )

    def test_old_gift_card_credited(self, call, store, seed):
        _precondition(seed, "#W8328622", "pending", "gift_card_8836799")
        shown = succeeded(self.change(call, "credit_card_6291943", "#W8328622"))
        assert shown["payment_history"][1:] == [
            {
                "transaction_type": "payment",
                "amount": 335.99,
                "payment_method_id": "credit_card_6291943",
            },
            {
                "transaction_type": "refund",
                "amount": 335.99,
                "payment_method_id": "gift_card_8836799",
            },
        ]
        assert balance(store, "ava_smith_1453", "gift_card_8836799") == 413.99

    def test_both_gift_cards_adjusted(self, seed):
        # no seed user has two gift cards: give ava_smith_1453 a second one
        user = deep_copy(seed.tables["users"]["ava_smith_1453"])
        user["payment_methods"]["gift_card_0000001"] = {
            "source": "gift_card",
            "id": "gift_card_0000001",
            "balance": 500.0,
        }
        store = Store(derived_seed(seed, {"ava_smith_1453": user}))
        result = dispatch(
            store,
            "modify_pending_order_payment",
            {"order_id": "#W8328622", "payment_method_id": "gift_card_0000001"},
        )
        assert not result.error, result.content
        assert balance(store, "ava_smith_1453", "gift_card_0000001") == 164.01
        assert balance(store, "ava_smith_1453", "gift_card_8836799") == 413.99

    @pytest.mark.parametrize(
        ("method", "order", "paid_with", "error"),
        [
            pytest.param(
                "gift_card_3749819", "#W0000000", None, "Order not found", id="order-not-found"
            ),
            # the status is checked before the payment method is looked up
            pytest.param("paypal_0000000", "#W2378156", None, NON_PENDING, id="non-pending"),
            pytest.param("paypal_0000000", "#W3780282", None, NON_PENDING, id="non-pending-2"),
            pytest.param("paypal_0000000", "#W3916748", None, NON_PENDING, id="non-pending-3"),
            pytest.param("paypal_0000000", "#W1080318", None, NO_METHOD, id="method-not-found"),
            pytest.param(
                "paypal_8049766", "#W1080318", None, NO_METHOD, id="method-of-another-user"
            ),
            pytest.param("credit_card_3577130", "#W1080318", None, SAME_METHOD, id="same-method"),
            pytest.param(
                "gift_card_2742113",
                "#W2443586",
                "paypal_7859314",
                "Insufficient gift card balance to pay for the order",
                id="insufficient-gift-card",
            ),
            # gift_card_3410768 holds 56.0, less than the order's 267.58
            pytest.param(
                "gift_card_3410768",
                "#W3897284",
                "gift_card_3410768",
                SAME_METHOD,
                id="same-method-checked-before-balance",
            ),
        ],
    )
    def test_refused(self, call, unchanged, seed, method, order, paid_with, error):
        if paid_with is not None:
            _precondition(seed, order, "pending", paid_with)
        assert_error(self.change(call, method, order), error)

    @pytest.mark.parametrize(
        "method",
        [
            pytest.param("gift_card_3749819", id="exactly_one_payment_after_a_change"),
            pytest.param("credit_card_3577130", id="history_checked_before_same_method"),
        ],
    )
    def test_a_second_change_is_refused_by_the_history(self, call, method):
        succeeded(self.change(call, "gift_card_3749819"))
        assert_error(
            self.change(call, method), "There should be exactly one payment for a pending order"
        )

    def test_item_modified_counts_as_pending(self, call):
        # the status passes (it contains 'pending'); the two-entry history does not
        modify_items_of_w1080318(call)
        assert_error(
            self.change(call, "gift_card_3749819"),
            "There should be exactly one payment for a pending order",
        )

    def test_payment_method_checked_before_history(self, call):
        succeeded(self.change(call, "gift_card_3749819"))
        assert_error(self.change(call, "paypal_0000000"), "Payment method not found")

    def test_changes_made_before_a_missing_old_method_stay(self, seed):
        # upstream appends both legs and debits the new gift card before looking up the old
        # method: a missing old method fails the call after those changes
        user = deep_copy(seed.tables["users"]["omar_kim_3528"])
        del user["payment_methods"]["credit_card_3577130"]
        store = Store(derived_seed(seed, {"omar_kim_3528": user}))
        result = dispatch(
            store,
            "modify_pending_order_payment",
            {"order_id": "#W1080318", "payment_method_id": "gift_card_3749819"},
        )
        assert_error(result, "Payment method not found")
        assert balance(store, "omar_kim_3528", "gift_card_3749819") == 37.57
        assert len(current(store, "#W1080318")["payment_history"]) == 3


def test_recorded_lists_are_copies(call, store):
    item_ids = ["6242772310"]
    result = call(
        "return_delivered_order_items",
        order_id="#W5866402",
        item_ids=item_ids,
        payment_method_id="paypal_8049766",
    )
    item_ids.append("9727387530")
    assert result.action is not None
    assert result.action.arguments["item_ids"] == ["6242772310"]
    assert current(store, "#W5866402")["return_items"] == ["6242772310"]
