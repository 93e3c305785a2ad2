"""The 17 OpenAI function schemas: in step with the registry, immutable, snapshot-pinned."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from tau2_retail.tools.registry import AGENT_TOOL_NAMES, TOOLS, ParamKind
from tau2_retail.tools.schemas import TOOL_SCHEMAS, tool_schemas

JSON_TYPES = {
    ParamKind.STRING: {"type": "string"},
    ParamKind.STRING_ARRAY: {"type": "array", "items": {"type": "string"}},
}


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


def test_order_is_the_registry_order():
    assert [schema["function"]["name"] for schema in TOOL_SCHEMAS] == list(AGENT_TOOL_NAMES)


@pytest.mark.parametrize("schema", tool_schemas(), ids=AGENT_TOOL_NAMES)
def test_parameters_equal_the_registry(schema):
    function = schema["function"]
    spec = TOOLS[function["name"]]
    parameters = function["parameters"]
    properties = parameters["properties"]
    assert list(properties) == [name for name, _ in spec.params]
    for name, kind in spec.params:
        described = dict(properties[name])
        assert described.pop("description")
        assert described == JSON_TYPES[kind]
    assert parameters["required"] == [name for name, _ in spec.params]
    assert parameters["type"] == "object"
    assert parameters["additionalProperties"] is False


@pytest.mark.parametrize("schema", tool_schemas(), ids=AGENT_TOOL_NAMES)
def test_shape(schema):
    assert list(schema) == ["type", "function"]
    assert schema["type"] == "function"
    assert list(schema["function"]) == ["name", "description", "parameters"]
    assert list(schema["function"]["parameters"]) == [
        "type",
        "properties",
        "required",
        "additionalProperties",
    ]
    description = schema["function"]["description"]
    assert description.strip() == description
    assert description.endswith(".")


def test_no_parameters():
    by_name = {schema["function"]["name"]: schema for schema in tool_schemas()}
    for name in ("list_all_product_types", "end_conversation"):
        assert by_name[name]["function"]["parameters"] == {
            "type": "object",
            "properties": {},
            "required": [],
            "additionalProperties": False,
        }


def test_write_tools_ask_for_confirmation():
    for schema in tool_schemas():
        function = schema["function"]
        if TOOLS[function["name"]].kind == "write":
            assert "explicit yes" in function["description"]


def test_tool_schemas_are_fresh_json_copies():
    first = tool_schemas()
    assert json.loads(json.dumps(first)) == first
    first[0]["function"]["name"] = "changed"
    first[0]["function"]["parameters"]["required"].append("x")
    second = tool_schemas()
    assert second[0]["function"]["name"] == "calculate"
    assert second[0]["function"]["parameters"]["required"] == ["expression"]
    assert first[1] is not second[1]


def test_tool_schemas_is_deeply_immutable():
    schema = TOOL_SCHEMAS[0]
    assert isinstance(schema, Mapping)
    with pytest.raises(TypeError):
        schema["type"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        schema["function"]["parameters"]["properties"]["x"] = {}
    assert isinstance(schema["function"]["parameters"]["required"], tuple)


def test_snapshot(snapshot_json):
    assert tool_schemas() == snapshot_json
