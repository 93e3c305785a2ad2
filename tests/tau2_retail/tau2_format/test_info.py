"""The export's ``info`` names who played each role as upstream's file does, an agent given as
code as such; and the embedded tasks are those of the run's split, as upstream's bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tau2_retail import codec
from tau2_retail.data.tasks import load_tasks
from tau2_retail.errors import DataError
from tau2_retail.results.records import ModelRecord, RunArgs, RunConfiguration
from tau2_retail.tau2_format.info import llm_args, run_info
from tau2_retail.tau2_format.tasks import task_texts


def _run_args(agent: ModelRecord, user: ModelRecord) -> RunArgs:
    configuration = RunConfiguration(
        run_id="r",
        settings={"profile": "tau2", "max_steps": 30, "max_errors": 5, "seed": 7},
        sources={},
        agent=agent,
        user=user,
        judge=None,
    )
    return RunArgs(argv=(), configuration=configuration, trials=4, expected=(), versions={})


@pytest.mark.parametrize(
    ("source", "kind"),
    [("my_agents.support:make_agent", "import"), ("conftest.py::tau2_agent", "fixture")],
)
def test_an_agent_given_as_code_is_named_as_such(data_dir: Path, source: str, kind: str) -> None:
    agent = ModelRecord(
        model="SupportAgent 1.2",
        endpoint=None,
        code={"source": source, "kind": kind, "name": "SupportAgent", "version": "1.2"},
    )
    user = ModelRecord(model="builtin:customer", endpoint=None)
    info = run_info(_run_args(agent, user), data_dir)
    assert (info.agent_info.implementation, info.agent_info.llm) == (source, None)
    assert (info.user_info.implementation, info.user_info.llm) == ("builtin:customer", None)
    assert info.user_info.global_simulation_guidelines is None
    assert (info.num_trials, info.max_steps, info.max_errors, info.seed) == (4, 30, 5, 7)


def test_an_agent_given_as_code_names_the_model_it_declares(data_dir: Path) -> None:
    """Upstream's viewer and leaderboard read the agent's model from ``llm``: a code agent
    that declares one (``model = "gpt-4.1"``) was exported without it.

    Its ``llm_args`` is an empty object, never null: ``tau2 submit prepare`` compares
    ``llm``/``llm_args`` of every domain file by hash (upstream's
    src/tau2/scripts/leaderboard/prepare_submission.py:147-161), and an upstream text run
    always records a dict there (``TextRunConfig.llm_args_agent`` is a ``dict``,
    src/tau2/data_model/simulation.py:556; ``tau2 run --agent-llm-args null`` fails
    validation). A null refused our retail file beside every telecom file ("Agent / User
    Simulator should be the same for all results"); ``{}`` matches a file of ``tau2 run
    --agent-llm gpt-4.1 --agent-llm-args '{}'``."""
    agent = ModelRecord(
        model="SupportAgent (gpt-4.1)",
        endpoint=None,
        code={"source": "my_agents.support:make_agent", "kind": "import", "model": "gpt-4.1"},
    )
    user = ModelRecord(model="builtin:customer", endpoint=None)
    encoded = codec.encode(run_info(_run_args(agent, user), data_dir))
    assert encoded["agent_info"] == {
        "implementation": "my_agents.support:make_agent",
        "llm": "gpt-4.1",
        "llm_args": {},
    }


def test_an_endpoints_arguments_are_those_upstream_records_for_its_requests() -> None:
    """``tool_choice: auto`` is added to each request by upstream's request layer and is not
    in its ``llm_args``: with it, ``tau2 submit prepare`` refused our retail file beside
    upstream's airline and telecom files ("Agent / User Simulator should be the same")."""
    endpoint = {
        "model": "gpt-4.1",
        "temperature": 0.0,
        "top_p": None,
        "max_tokens": 512,
        "extra_body": {"tool_choice": "auto", "reasoning_effort": "low"},
        "timeout_seconds": 120.0,
    }
    assert llm_args(endpoint) == {"temperature": 0.0, "max_tokens": 512, "reasoning_effort": "low"}
    required = {"model": "m", "extra_body": {"tool_choice": "required"}}
    assert llm_args(required) == {"tool_choice": "required"}


def test_the_tasks_of_a_split_are_upstreams_own_bytes(data_dir: Path) -> None:
    tasks = load_tasks(data_dir)
    train = [task.id for task in tasks.values() if task.split == "train"]
    texts = task_texts(data_dir, train)
    assert [json.loads(text)["id"] for text in texts] == train
    pinned = (data_dir / "tasks.json").read_text(encoding="utf-8")
    assert all(text in pinned for text in texts)
    with pytest.raises(DataError, match="no task 999"):
        task_texts(data_dir, ["0", "999"])
