"""The tool registry: exactly upstream's 16 tools, plus ``end_conversation`` for the agent."""

from __future__ import annotations

import inspect

import pytest

import tau2_retail.tools as tools
from tau2_retail.tools.registry import (
    AGENT_TOOL_NAMES,
    END_CONVERSATION,
    TOOL_NAMES,
    TOOLS,
    TRANSFER_TO_HUMAN_AGENTS,
    ParamKind,
    ToolKind,
)

S, A = ParamKind.STRING, ParamKind.STRING_ARRAY
R, W, G = ToolKind.READ, ToolKind.WRITE, ToolKind.GENERIC
ADDRESS = [("address1", S), ("address2", S), ("city", S), ("state", S), ("country", S), ("zip", S)]
ITEM_SWAP = [("order_id", S), ("item_ids", A), ("new_item_ids", A), ("payment_method_id", S)]
# each tool's kind and parameters, in signature order
EXPECTED = {
    "calculate": (G, [("expression", S)]),
    "cancel_pending_order": (W, [("order_id", S), ("reason", S)]),
    "exchange_delivered_order_items": (W, ITEM_SWAP),
    "find_user_id_by_name_zip": (R, [("first_name", S), ("last_name", S), ("zip", S)]),
    "find_user_id_by_email": (R, [("email", S)]),
    "get_order_details": (R, [("order_id", S)]),
    "get_product_details": (R, [("product_id", S)]),
    "get_item_details": (R, [("item_id", S)]),
    "get_user_details": (R, [("user_id", S)]),
    "list_all_product_types": (R, []),
    "modify_pending_order_address": (W, [("order_id", S), *ADDRESS]),
    "modify_pending_order_items": (W, ITEM_SWAP),
    "modify_pending_order_payment": (W, [("order_id", S), ("payment_method_id", S)]),
    "modify_user_address": (W, [("user_id", S), *ADDRESS]),
    "return_delivered_order_items": (
        W,
        [("order_id", S), ("item_ids", A), ("payment_method_id", S)],
    ),
    "transfer_to_human_agents": (G, [("summary", S)]),
    "end_conversation": (ToolKind.CONTROL, []),
}
PARAMS = {name: params for name, (_, params) in EXPECTED.items()}
READS, WRITES, GENERIC = (
    {name for name, (k, _) in EXPECTED.items() if k is kind} for kind in (R, W, G)
)


def test_tool_names_are_upstreams_sixteen():
    assert TOOL_NAMES == READS | WRITES | GENERIC
    assert len(TOOL_NAMES) == 16
    assert END_CONVERSATION not in TOOL_NAMES


def test_agent_tools_are_the_sixteen_and_end_conversation():
    assert END_CONVERSATION == "end_conversation"
    assert len(AGENT_TOOL_NAMES) == 17
    assert len(set(AGENT_TOOL_NAMES)) == 17
    assert set(AGENT_TOOL_NAMES) == TOOL_NAMES | {END_CONVERSATION}
    assert AGENT_TOOL_NAMES[-1] == END_CONVERSATION
    assert tuple(TOOLS) == AGENT_TOOL_NAMES


def test_kinds():
    kinds = {name: spec.kind for name, spec in TOOLS.items()}
    assert {name for name, kind in kinds.items() if kind is ToolKind.READ} == READS
    assert {name for name, kind in kinds.items() if kind is ToolKind.WRITE} == WRITES
    assert {name for name, kind in kinds.items() if kind is ToolKind.GENERIC} == GENERIC
    assert kinds[END_CONVERSATION] is ToolKind.CONTROL


def test_recorded_actions_are_writes_and_the_transfer():
    recorded = {name for name, spec in TOOLS.items() if spec.records_action}
    assert recorded == WRITES | {TRANSFER_TO_HUMAN_AGENTS}


@pytest.mark.parametrize("name", list(PARAMS))
def test_parameters_in_signature_order(name):
    spec = TOOLS[name]
    assert spec.name == name
    assert list(spec.params) == PARAMS[name]


@pytest.mark.parametrize("name", list(PARAMS))
def test_implementations_take_exactly_the_parameters(name):
    spec = TOOLS[name]
    signature = inspect.signature(spec.run)
    keyword_only = [
        parameter.name
        for parameter in signature.parameters.values()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    assert sorted(keyword_only) == sorted(param for param, _ in spec.params)


def test_public_surface():
    for name in tools.__all__:
        assert hasattr(tools, name), name
    assert {"TOOLS", "TOOL_NAMES", "AGENT_TOOL_NAMES", "TOOL_SCHEMAS", "tool_schemas"} <= set(
        tools.__all__
    )
