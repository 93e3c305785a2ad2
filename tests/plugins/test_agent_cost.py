"""What an agent given as code costs, through the plugin: the tokens it records
(``toolbox.record_usage``) or returns (a whole completion) reach ``metrics.json`` and the
summary, its declared ``model`` names it in the records and prices its tokens with
``--tau2-prices``, and ``--tau2-max-cost`` counts what it spent once each scenario is over."""

from __future__ import annotations

import json

import pytest

from .conftest import Bench

# Tasks whose gold database is the seed: an agent that ends the call at once passes them.
TASKS = "--tau2-tasks=10,12,24"
SCENARIOS = ("tau2_retail__10", "tau2_retail__12", "tau2_retail__24")
PRICE = {"input": 2.0, "output": 8.0, "cached_input": 0.5}
PRICES = "--tau2-prices=" + json.dumps({"agent-model": PRICE})

AGENTS = """\
END = {"tool_calls": [{"id": "e", "type": "function",
                       "function": {"name": "end_conversation", "arguments": "{}"}}]}


class LoopSpender:
    name = "loop-spender"
    model = "agent-model"

    def converse(self, messages, toolbox):
        # e.g. pydantic-ai's result.usage(): two requests, part of the prompt cached
        toolbox.record_usage(
            input_tokens=100_000, output_tokens=10_000, requests=2, cached_tokens=40_000
        )
        toolbox.call("end_conversation", {})
        return ""


class TurnSpender:
    name = "turn-spender"
    model = "agent-model"

    def respond(self, messages, tools):
        usage = {"prompt_tokens": 60_000, "completion_tokens": 10_000,
                 "prompt_tokens_details": {"cached_tokens": 40_000}}
        return {"choices": [{"message": END, "finish_reason": "tool_calls"}], "usage": usage}


class ModelInInit(LoopSpender):
    model = None

    def __init__(self):
        self.model = "agent-model"
"""

# what one scenario of either agent records and costs
USAGE = {"n_calls": 2, "prompt": 100_000, "completion": 10_000, "cached_prompt": 40_000}
TURN_USAGE = {"n_calls": 1, "prompt": 60_000, "completion": 10_000, "cached_prompt": 40_000}


def _usd(usage: dict[str, int]) -> float:
    cached = usage["cached_prompt"]
    return (
        (usage["prompt"] - cached) * PRICE["input"]
        + cached * PRICE["cached_input"]
        + usage["completion"] * PRICE["output"]
    ) / 1_000_000


@pytest.fixture
def agents(bench: Bench) -> Bench:
    (bench.path / "my_agents.py").write_text(AGENTS, encoding="utf-8")
    return bench


@pytest.mark.parametrize(
    ("agent", "name", "usage"),
    [("LoopSpender", "loop-spender", USAGE), ("TurnSpender", "turn-spender", TURN_USAGE)],
    ids=["loop", "turn"],
)
def test_a_code_agents_tokens_are_recorded_and_priced_by_its_model(
    agents: Bench, xdist: tuple[str, ...], agent: str, name: str, usage: dict[str, int]
) -> None:
    """A loop agent's metrics counted converse() calls with 0 tokens, and a turn agent's
    completion tokens were priced at 0: a code agent has no model at an endpoint."""
    run = agents.run(*xdist, TASKS, f"--tau2-agent=my_agents:{agent}", PRICES, "--tau2-run-id=c")

    assert run.ret == 0, run.output
    described = f"my_agents:{agent} ({name}, model agent-model)"
    run.stdout.fnmatch_lines([f"tau2: agent code {described}; user builtin:customer; *"])
    for scenario in SCENARIOS:
        metrics = agents.metrics("c", scenario)
        assert metrics["token_usage"]["agent"] == usage
        assert metrics["cost"]["agent"] == pytest.approx(_usd(usage), abs=1e-6)
        assert metrics["cost"]["total"] == metrics["cost"]["agent"]  # the customer is built in
    summary = agents.summary("c")
    assert summary["token_usage"]["agent"]["prompt"] == 3 * usage["prompt"]
    assert summary["cost"]["agent"] == pytest.approx(3 * _usd(usage), abs=1e-5)
    assert summary["cost"]["unpriced_models"] == []
    assert summary["models"]["agent"] == described
    code = agents.read_json("c", "run_args.json")["configuration"]["agent"]["code"]
    assert code["model"] == "agent-model"
    text = (agents.run_dir("c") / "all_summary.txt").read_text(encoding="utf-8")
    assert f"Cost (USD): ${summary['cost']['total']:,.4f} total (agent $" in text


def test_a_code_agents_model_without_a_price_is_named_as_unpriced(agents: Bench) -> None:
    other = "--tau2-prices=" + json.dumps({"some-other-model": PRICE})
    run = agents.run("-n", "0", TASKS, "--tau2-agent=my_agents:LoopSpender", other)

    assert run.ret == 0, run.output
    summary = agents.summary(_only_run(agents))
    assert summary["cost"]["agent"] is None
    assert summary["cost"]["total"] is None
    assert summary["cost"]["unpriced_models"] == ["agent-model"]
    assert "no price for model(s) agent-model: add them to --tau2-prices" in run.stdout


def test_a_model_a_named_class_sets_in_init_is_said_to_be_unseen(agents: Bench) -> None:
    """The records and the prices read a class named by --tau2-agent before any agent exists,
    so a model set in __init__ (as both examples did) was silently left unpriced."""
    run = agents.run("-n", "0", TASKS, "--tau2-agent=my_agents:ModelInInit", PRICES)

    assert run.ret == 0, run.output
    notice = (
        "tau2: agent my_agents:ModelInInit sets model 'agent-model' on the agents it makes, "
        "but the run reads the model from the factory itself (none), before any agent exists"
    )
    assert run.stdout.count(notice) == 1, run.output
    assert agents.summary(_only_run(agents))["cost"]["agent"] == 0

    declared = agents.run("-n", "0", TASKS, "--tau2-agent=my_agents:LoopSpender", PRICES)
    assert "sets model" not in declared.stdout

    # a fixture's function factory: the fix is another (the fixture already names a function)
    (agents.path / "conftest.py").write_text(
        "import pytest\nfrom my_agents import ModelInInit\n\n\n@pytest.fixture\n"
        "def tau2_agent():\n    return lambda: ModelInInit()\n",
        encoding="utf-8",
    )
    fixture = agents.run("-n", "0", TASKS, PRICES, "--tau2-user-model=builtin:customer")
    assert "return the agent itself from the fixture" in fixture.stdout, fixture.output


def _only_run(bench: Bench) -> str:
    (run_dir,) = bench.output_dir.iterdir()
    return run_dir.name


def test_the_budget_counts_what_a_code_agent_spent_and_resume_keeps_its_model(
    agents: Bench,
) -> None:
    """Its spending was outside the budget: a code agent could spend any amount under
    ``--tau2-max-cost``. Charged once each scenario is over, it stops the scenarios after it."""
    per_scenario = _usd(USAGE)  # $0.228
    budget = f"--tau2-max-cost={per_scenario * 1.5:.4f}"
    args = ("-n", "0", TASKS, "--tau2-agent=my_agents:LoopSpender", PRICES)

    stopped = agents.run(*args, budget, "--tau2-run-id=b")

    assert stopped.ret == pytest.ExitCode.TESTS_FAILED, stopped.output
    summary = agents.summary("b")
    assert summary["counts"]["scored"] == 2
    assert summary["not_run"] == ["tau2_retail__24"]
    stopped.stdout.fnmatch_lines(
        [f"tau2: budget reached: spent ${2 * per_scenario:,.4f} of --tau2-max-cost *"]
    )

    # another model is another agent: its scores do not compare
    module = agents.path / "my_agents.py"
    module.write_text(AGENTS.replace('model = "agent-model"', 'model = "cheaper-model"', 1))
    refused = agents.run(*args, "--tau2-max-cost=10", "--tau2-resume=b")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert "agent_code_model: stored 'agent-model', now 'cheaper-model'" in refused.stderr

    module.write_text(AGENTS)
    resumed = agents.run(*args, "--tau2-max-cost=10", "--tau2-resume=b")
    assert resumed.ret == 0, resumed.output
    assert agents.summary("b")["cost"]["agent"] == pytest.approx(3 * per_scenario, abs=1e-5)
