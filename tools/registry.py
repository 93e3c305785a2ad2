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
_ITEM_SWAP = (("order_id", S), ("item_ids", A), ("new_item_ids", A), ("payment_method_id", S))


def _calculate_tool(store: Store, *, expression: str) -> str:
    return _calculate(expression)


def _transfer(store: Store, *, summary: str) -> str:
    return "Transfer successful"


def _end_conversation(store: Store) -> str:
    return END_CONVERSATION_RESULT


def _named_after(
    kind: ToolKind, run: Callable[..., str], *params: tuple[str, ParamKind]
) -> ToolSpec:
    """A tool named after its implementation (the reads and writes bear upstream's names)."""
    return ToolSpec(name=run.__name__, kind=kind, params=params, run=run)


_SPECS = (
    ToolSpec(
        name="calculate", kind=ToolKind.GENERIC, params=(("expression", S),), run=_calculate_tool
    ),
    _named_after(ToolKind.WRITE, writes.cancel_pending_order, ("order_id", S), ("reason", S)),
    _named_after(ToolKind.WRITE, writes.exchange_delivered_order_items, *_ITEM_SWAP),
    _named_after(
        ToolKind.READ,
        reads.find_user_id_by_name_zip,
        ("first_name", S),
        ("last_name", S),
        ("zip", S),
    ),
    _named_after(ToolKind.READ, reads.find_user_id_by_email, ("email", S)),
    _named_after(ToolKind.READ, reads.get_order_details, ("order_id", S)),
    _named_after(ToolKind.READ, reads.get_product_details, ("product_id", S)),
    _named_after(ToolKind.READ, reads.get_item_details, ("item_id", S)),
    _named_after(ToolKind.READ, reads.get_user_details, ("user_id", S)),
    _named_after(ToolKind.READ, reads.list_all_product_types),
    _named_after(ToolKind.WRITE, writes.modify_pending_order_address, ("order_id", S), *_ADDRESS),
    _named_after(ToolKind.WRITE, writes.modify_pending_order_items, *_ITEM_SWAP),
    _named_after(
        ToolKind.WRITE,
        writes.modify_pending_order_payment,
        ("order_id", S),
        ("payment_method_id", S),
    ),
    _named_after(ToolKind.WRITE, writes.modify_user_address, ("user_id", S), *_ADDRESS),
    _named_after(
        ToolKind.WRITE,
        writes.return_delivered_order_items,
        ("order_id", S),
        ("item_ids", A),
        ("payment_method_id", S),
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
