"""The tool registry: every tool's name, parameters, kind and implementation.

Parameter order is upstream's signature order; every parameter is required. The 16 upstream
tools plus the suite's ``end_conversation`` make the 17 tools an agent is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from tau2_retail.tools import reads, writes
from tau2_retail.tools.calculate import calculate as _calculate
from tau2_retail.tools.store import Store

__all__ = [
    "AGENT_TOOL_NAMES",
    "END_CONVERSATION",
    "END_CONVERSATION_RESULT",
    "TOOLS",
    "TOOL_NAMES",
    "TRANSFER_TO_HUMAN_AGENTS",
    "ParamKind",
    "ToolKind",
    "ToolSpec",
]

END_CONVERSATION = "end_conversation"
END_CONVERSATION_RESULT = "Conversation ended."
TRANSFER_TO_HUMAN_AGENTS = "transfer_to_human_agents"


class ToolKind(StrEnum):
    READ = "read"
    WRITE = "write"
    GENERIC = "generic"
    CONTROL = "control"


class ParamKind(StrEnum):
    STRING = "string"
    STRING_ARRAY = "string_array"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    name: str
    kind: ToolKind
    params: tuple[tuple[str, ParamKind], ...]
    run: Callable[..., str]

    @property
    def records_action(self) -> bool:
        """Whether a successful call is recorded as an action (writes and the transfer)."""
        return self.kind is ToolKind.WRITE or self.name == TRANSFER_TO_HUMAN_AGENTS


S = ParamKind.STRING
A = ParamKind.STRING_ARRAY
_ADDRESS = (("address1", S), ("address2", S), ("city", S), ("state", S), ("country", S), ("zip", S))


def _calculate_tool(store: Store, *, expression: str) -> str:
    return _calculate(expression)


def _transfer(store: Store, *, summary: str) -> str:
    return "Transfer successful"


def _end_conversation(store: Store) -> str:
    return END_CONVERSATION_RESULT


_SPECS = (
    ToolSpec(
        name="calculate", kind=ToolKind.GENERIC, params=(("expression", S),), run=_calculate_tool
    ),
    ToolSpec(
        name="cancel_pending_order",
        kind=ToolKind.WRITE,
        params=(("order_id", S), ("reason", S)),
        run=writes.cancel_pending_order,
    ),
    ToolSpec(
        name="exchange_delivered_order_items",
        kind=ToolKind.WRITE,
        params=(("order_id", S), ("item_ids", A), ("new_item_ids", A), ("payment_method_id", S)),
        run=writes.exchange_delivered_order_items,
    ),
    ToolSpec(
        name="find_user_id_by_name_zip",
        kind=ToolKind.READ,
        params=(("first_name", S), ("last_name", S), ("zip", S)),
        run=reads.find_user_id_by_name_zip,
    ),
    ToolSpec(
        name="find_user_id_by_email",
        kind=ToolKind.READ,
        params=(("email", S),),
        run=reads.find_user_id_by_email,
    ),
    ToolSpec(
        name="get_order_details",
        kind=ToolKind.READ,
        params=(("order_id", S),),
        run=reads.get_order_details,
    ),
    ToolSpec(
        name="get_product_details",
        kind=ToolKind.READ,
        params=(("product_id", S),),
        run=reads.get_product_details,
    ),
    ToolSpec(
        name="get_item_details",
        kind=ToolKind.READ,
        params=(("item_id", S),),
        run=reads.get_item_details,
    ),
    ToolSpec(
        name="get_user_details",
        kind=ToolKind.READ,
        params=(("user_id", S),),
        run=reads.get_user_details,
    ),
    ToolSpec(
        name="list_all_product_types",
        kind=ToolKind.READ,
        params=(),
        run=reads.list_all_product_types,
    ),
    ToolSpec(
        name="modify_pending_order_address",
        kind=ToolKind.WRITE,
        params=(("order_id", S), *_ADDRESS),
        run=writes.modify_pending_order_address,
    ),
    ToolSpec(
        name="modify_pending_order_items",
        kind=ToolKind.WRITE,
        params=(("order_id", S), ("item_ids", A), ("new_item_ids", A), ("payment_method_id", S)),
        run=writes.modify_pending_order_items,
    ),
    ToolSpec(
        name="modify_pending_order_payment",
        kind=ToolKind.WRITE,
        params=(("order_id", S), ("payment_method_id", S)),
        run=writes.modify_pending_order_payment,
    ),
    ToolSpec(
        name="modify_user_address",
        kind=ToolKind.WRITE,
        params=(("user_id", S), *_ADDRESS),
        run=writes.modify_user_address,
    ),
    ToolSpec(
        name="return_delivered_order_items",
        kind=ToolKind.WRITE,
        params=(("order_id", S), ("item_ids", A), ("payment_method_id", S)),
        run=writes.return_delivered_order_items,
    ),
    ToolSpec(
        name=TRANSFER_TO_HUMAN_AGENTS,
        kind=ToolKind.GENERIC,
        params=(("summary", S),),
        run=_transfer,
    ),
    ToolSpec(name=END_CONVERSATION, kind=ToolKind.CONTROL, params=(), run=_end_conversation),
)

TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in _SPECS}
AGENT_TOOL_NAMES: tuple[str, ...] = tuple(TOOLS)
TOOL_NAMES: frozenset[str] = frozenset(name for name in TOOLS if name != END_CONVERSATION)
