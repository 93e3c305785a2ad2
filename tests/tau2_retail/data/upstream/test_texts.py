"""The tau2 profile's text, derived from upstream's pinned sources, equals upstream's byte for byte.

Every comparison is against a sha256 digest of what upstream tau2-bench produces at the pinned
commit (``tests/tau2_retail/tau2_profile_digests.json``); no upstream text is in this repository.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest

from tau2_retail.data import files as datafiles
from tau2_retail.data.upstream import SOURCES, UpstreamTexts, load_upstream_texts
from tau2_retail.data.upstream.source import (
    AGENT_SOURCE,
    TOOL_SOURCE,
    TOOLKIT_SOURCE,
    load_source,
)
from tau2_retail.errors import DigestMismatch, UpstreamSourceError
from tests.tau2_retail.upstream_digests import DIGESTS, json_digest, text_digest


@pytest.fixture(scope="module")
def texts(data_dir: Path) -> UpstreamTexts:
    return load_upstream_texts(data_dir)


def test_agent_system_prompt_is_upstreams(texts: UpstreamTexts) -> None:
    assert text_digest(texts.agent_system_prompt) == DIGESTS["agent_system_prompt"]


def test_tools_are_upstreams_in_upstreams_order(texts: UpstreamTexts) -> None:
    names = [tool["function"]["name"] for tool in texts.tools]
    assert names == DIGESTS["tools_in_order"]
    assert json_digest(list(texts.tools)) == DIGESTS["tools"]


@pytest.mark.parametrize("name", DIGESTS["tools_in_order"])
def test_each_tool_schema_is_upstreams(texts: UpstreamTexts, name: str) -> None:
    (schema,) = [tool for tool in texts.tools if tool["function"]["name"] == name]
    assert json_digest(schema) == DIGESTS["tool"][name]


def test_every_user_system_prompt_is_upstreams(texts: UpstreamTexts) -> None:
    expected = DIGESTS["user_system_prompt"]
    assert len(expected) == 114
    wrong = [
        task_id
        for task_id, digest in expected.items()
        if text_digest(texts.user_system_prompt(task_id)) != digest
    ]
    assert wrong == []


def test_judge_system_prompt_and_reply_keys_are_upstreams(texts: UpstreamTexts) -> None:
    assert text_digest(texts.judge.system_prompt) == DIGESTS["nl_judge_system_prompt"]
    keys = texts.judge.reply
    assert (keys.results, keys.assertion, keys.met, keys.reasoning) == (
        "results",
        "expectedOutcome",
        "metExpectation",
        "reasoning",
    )


def test_judge_user_prompt_lists_every_message_as_role_and_content(texts: UpstreamTexts) -> None:
    content = texts.judge.user_content(
        [{"role": "assistant", "content": "Hello"}, {"role": "assistant", "content": None}],
        ["Agent greets.", "Agent says 'bye'."],
    )
    # upstream renders each message as "role: content" (None when a message has no text) and
    # the assertions as the repr of their list
    assert "assistant: Hello\nassistant: None\n" in content
    assert "['Agent greets.', \"Agent says 'bye'.\"]" in content


def test_first_message_and_endings_are_upstreams(texts: UpstreamTexts) -> None:
    assert texts.first_agent_message == DIGESTS["agent_first_message"]
    assert texts.agent_can_stop is False
    assert {"user_stop", "agent_stop", "max_steps", "too_many_errors", "agent_error"} <= (
        texts.endings
    )


def test_sources_are_in_the_manifest_under_their_upstream_paths() -> None:
    manifest = datafiles.load_manifest()
    for name in SOURCES:
        entry = manifest.file(name)
        assert name == f"upstream/{entry.upstream_path}"
        assert entry.upstream_path.startswith("src/tau2/")
        assert manifest.url(entry) == (
            f"https://raw.githubusercontent.com/sierra-research/tau2-bench/{manifest.commit}/"
            f"{entry.upstream_path}"
        )


# -- bad sources ---------------------------------------------------------------------------------


def test_altered_source_names_file_digests_and_fix(copied_data_dir: Path) -> None:
    path = copied_data_dir / TOOLKIT_SOURCE
    path.write_bytes(path.read_bytes() + b"\n# changed\n")
    with pytest.raises(DigestMismatch) as raised:
        load_upstream_texts(copied_data_dir)
    message = str(raised.value)
    assert str(path) in message
    assert datafiles.load_manifest().file(TOOLKIT_SOURCE).sha256 in message
    assert hashlib.sha256(path.read_bytes()).hexdigest() in message
    assert "python -m tau2_retail data fetch" in message


def test_missing_source_names_file_and_fix(copied_data_dir: Path) -> None:
    (copied_data_dir / AGENT_SOURCE).unlink()
    with pytest.raises(datafiles.DataError, match=r"llm_agent\.py: data file not found"):
        load_upstream_texts(copied_data_dir)


@pytest.mark.parametrize(
    ("name", "old", "new", "construct"),
    [
        (AGENT_SOURCE, b"AGENT_INSTRUCTION = ", b"AGENT_TEXT = ", "a known name AGENT_INSTRUCTION"),
        (TOOLKIT_SOURCE, b"class RetailTools(", b"class ShopTools(", "class RetailTools"),
        (
            TOOLKIT_SOURCE,
            b"def get_order_details(self, order_id: str)",
            b"def get_order_details(self, order_id: int)",
            "a str or List[str] annotation for get_order_details(order_id) (found int)",
        ),
        # what the schemas take from upstream's Tool class, each found in its method
        (
            TOOL_SOURCE,
            b'create_model("parameters", **params)',
            b'create_model("parameters", params)',
            "create_model(<name>, **params) in Tool.parse_data",
        ),
        (
            TOOL_SOURCE,
            b'self.short_desc + "\\n\\n" + self.long_desc',
            b"self.short_desc + self.long_desc",
            "short_desc + <separator> + long_desc in Tool._get_description",
        ),
        (
            TOOL_SOURCE,
            b'"parameters": self.params.model_json_schema()',
            b'"schema": self.params.model_json_schema()',
            '"parameters"}} literal in Tool.openai_schema',
        ),
    ],
)
def test_changed_pin_names_the_construct_not_found(
    copied_data_dir: Path,
    pin_current_content: Callable[[Path, str], None],
    name: str,
    old: bytes,
    new: bytes,
    construct: str,
) -> None:
    path = copied_data_dir / name
    assert old in path.read_bytes()
    path.write_bytes(path.read_bytes().replace(old, new))
    pin_current_content(copied_data_dir, name)
    with pytest.raises(UpstreamSourceError) as raised:
        load_upstream_texts(copied_data_dir)
    assert raised.value.source == name
    assert construct in str(raised.value)
    assert "restore fixtures/manifest.json" in str(raised.value)


def test_source_that_is_not_python_is_refused(
    copied_data_dir: Path, pin_current_content: Callable[[Path, str], None]
) -> None:
    (copied_data_dir / AGENT_SOURCE).write_text("def broken(:\n")
    pin_current_content(copied_data_dir, AGENT_SOURCE)
    with pytest.raises(UpstreamSourceError, match="parseable Python"):
        load_source(copied_data_dir, AGENT_SOURCE)
