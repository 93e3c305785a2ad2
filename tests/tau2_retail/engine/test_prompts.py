"""The system prompts (spec §2): exact structure, and snapshots of our own text around it.

The snapshots never hold upstream text: the policy, the guidelines and the task fields are
replaced by placeholders before snapshotting, so only our wording and the layout are pinned
(upstream files are never committed).
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from tau2_retail.data.tasks import GoldAction, Task, load_policy, load_user_guidelines
from tau2_retail.engine.prompts import (
    ADDITIONAL_NOTES,
    GREETING,
    agent_system_prompt,
    user_system_prompt,
)
from tau2_retail.models.messages import STOP_TOKENS

NOTES_HEADING = "\n\n## Additional Notes to Follow\n\n"
TASK_FIELDS = ("reason_for_call", "task_instructions", "known_info", "unknown_info")


@pytest.fixture(scope="module")
def policy(data_dir) -> str:
    return load_policy(data_dir)


@pytest.fixture(scope="module")
def guidelines(data_dir) -> str:
    return load_user_guidelines(data_dir)


def without_upstream(prompt: str, replacements: Mapping[str, str]) -> str:
    """``prompt`` with each upstream text replaced by its placeholder (each exactly once)."""
    for placeholder, text in replacements.items():
        assert prompt.count(text) == 1, f"{placeholder} is not in the prompt exactly once"
        prompt = prompt.replace(text, placeholder)
    return prompt


def task_placeholders(task: Task) -> dict[str, str]:
    return {
        f"<{name}>": value.strip()
        for name in TASK_FIELDS
        if (value := getattr(task, name)) and value.strip()
    }


def make_task(**fields: object) -> Task:
    values: dict[str, object] = {
        "id": "999",
        "split": "test",
        "persona_name": "persona",
        "reason_for_call": "  You want to return a lamp.\n",
        "task_instructions": "You are terse.",
        "known_info": "Your name is Ada Lovelace.",
        "unknown_info": "You do not remember your email.",
        "actions": (GoldAction(name="calculate", arguments={"expression": "1+1"}),),
        "communicate_info": (),
        "nl_assertions": (),
        "reward_basis": ("DB",),
    }
    values.update(fields)
    return Task(**values)  # type: ignore[arg-type]


# -- the agent prompt ------------------------------------------------------------------------------


def test_agent_prompt_is_the_policy_verbatim_then_our_notes(policy):
    prompt = agent_system_prompt(policy)
    assert prompt.startswith(policy)
    assert prompt == policy + NOTES_HEADING + ADDITIONAL_NOTES


def test_agent_prompt_without_notes_is_the_policy_alone(policy):
    assert agent_system_prompt(policy, additional_notes=False) == policy


@pytest.mark.parametrize("notes", [True, False], ids=["notes", "no-notes"])
def test_agent_prompt_snapshot(policy, snapshot, notes):
    prompt = agent_system_prompt(policy, additional_notes=notes)
    assert without_upstream(prompt, {"<policy.md>": policy}) == snapshot


def test_additional_notes_say_what_the_spec_asks():
    notes = ADDITIONAL_NOTES.lower()
    assert "plain text" in notes
    assert "`end_conversation`" in notes
    assert "transferred" in notes
    assert "actually did" in notes


# -- the user simulator prompt ---------------------------------------------------------------------


def test_user_prompt_starts_with_the_guidelines_verbatim(guidelines, tasks):
    for task in tasks.values():
        assert user_system_prompt(guidelines, task).startswith(guidelines)


def test_the_guidelines_define_the_stop_tokens(guidelines):
    for token in STOP_TOKENS:
        assert token in guidelines


@pytest.mark.parametrize("task_id", ["0", "10"], ids=["task-0", "task-10-no-unknown-info"])
def test_user_prompt_snapshot(guidelines, tasks, snapshot, task_id):
    task = tasks[task_id]
    prompt = user_system_prompt(guidelines, task)
    replacements = {"<simulation_guidelines.md>": guidelines.rstrip(), **task_placeholders(task)}
    assert without_upstream(prompt, replacements) == snapshot


def test_task_10_has_no_unknown_info_and_its_section_is_left_out(guidelines, tasks):
    task = tasks["10"]
    assert not (task.unknown_info and task.unknown_info.strip())
    prompt = user_system_prompt(guidelines, task)
    assert "## Things you don't know" not in prompt
    assert "## Things you know" in prompt


def test_user_prompt_exact_structure_for_a_small_task():
    task = make_task()
    assert user_system_prompt("GUIDELINES\n", task) == (
        "GUIDELINES\n\n"
        "<scenario>\n"
        "## Your goal\nYou want to return a lamp.\n\n"
        "## Your personality\nYou are terse.\n\n"
        "## Things you know\nYour name is Ada Lovelace.\n\n"
        "## Things you don't know\nYou do not remember your email.\n"
        "</scenario>"
    )


@pytest.mark.parametrize("unknown", [None, "", "  \n"])
def test_user_prompt_leaves_out_a_missing_or_blank_unknown_info(unknown):
    prompt = user_system_prompt("G", make_task(unknown_info=unknown))
    assert prompt.endswith("## Things you know\nYour name is Ada Lovelace.\n</scenario>")
    assert "don't know" not in prompt


def test_user_prompt_never_carries_the_persona_or_evaluation(guidelines):
    task = make_task(
        persona_name="secret_persona_label",
        communicate_info=("the refund is $1",),
        nl_assertions=("The agent apologizes.",),
    )
    prompt = user_system_prompt(guidelines, task)
    for hidden in ("secret_persona_label", "the refund is $1", "The agent apologizes.", "1+1"):
        assert hidden not in prompt


def test_fixed_texts():
    assert GREETING == "Hi! How can I help you today?"
    assert STOP_TOKENS == ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")
