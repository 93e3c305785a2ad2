"""The tau2 retail domain: database store, lookup normalization, the 16 tools and dispatch.

Standard library only; knows nothing of tasks, models or pytest.
"""

from __future__ import annotations

from tau2_retail.tools.database import SeedDatabase
from tau2_retail.tools.dispatch import Action, ToolResult, dispatch, dispatch_json, parse_arguments
from tau2_retail.tools.registry import AGENT_TOOL_NAMES, END_CONVERSATION, TOOL_NAMES, TOOLS
from tau2_retail.tools.schemas import TOOL_SCHEMAS, tool_schemas
from tau2_retail.tools.store import Store
from tau2_retail.tools.tool_error import ToolError

__all__ = [
    "AGENT_TOOL_NAMES",
    "END_CONVERSATION",
    "TOOLS",
    "TOOL_NAMES",
    "TOOL_SCHEMAS",
    "Action",
    "SeedDatabase",
    "Store",
    "ToolError",
    "ToolResult",
    "dispatch",
    "dispatch_json",
    "parse_arguments",
    "tool_schemas",
]
