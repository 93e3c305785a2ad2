"""The export's document follows upstream's format (``spec/tau2_results.md``): required fields,
info, every task embedded as upstream's bytes, one simulation per scenario and trial, messages
in upstream's shape, reward_info from our scoring; and it streams (one simulation at a time)."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tau2_retail import codec
from tau2_retail.data.files import load_manifest
from tau2_retail.data.tasks import load_policy, load_user_guidelines, trial_seeds
from tau2_retail.engine.prompts import GREETING
from tau2_retail.models.messages import Usage
from tau2_retail.models.prices import ModelPrice
from tau2_retail.tau2_format import export
from tau2_retail.tau2_format.export import export_run
from tau2_retail.tau2_format.schema import UserInfo
from tests.tau2_retail.conftest import MIXED_MAX_STEPS, MIXED_TASKS, MIXED_TRIALS

UPSTREAM_ENDINGS = {
    "user_stop", "agent_stop", "max_steps", "timeout", "too_many_errors", "agent_error",
    "user_error", "infrastructure_error", "context_window_exceeded", "unexpected_error",
}  # fmt: skip
SIMULATION_REQUIRED = ("id", "task_id", "start_time", "end_time", "duration", "termination_reason")
PRICES = {
    "agent": ModelPrice(input=2.0, output=8.0),
    "user": ModelPrice(input=1.0, output=1.0),
}


def _objects(text: str) -> list[str]:
    """The text of each element of the JSON list ``text`` (found by decoding, not by layout)."""
    decoder = json.JSONDecoder()
    position = text.index("[") + 1
    out = []
    while True:
        while text[position] in " \t\r\n,":
            position += 1
        if text[position] == "]":
            return out
        _, end = decoder.raw_decode(text, position)
        out.append(text[position:end])
        position = end


def _by_key(document: Mapping[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(s["task_id"], s["trial"]): s for s in document["simulations"]}


def test_the_document_has_upstreams_top_level_and_info(
    document: dict[str, Any], data_dir: Path
) -> None:
    assert list(document) == ["timestamp", "info", "tasks", "simulations"]
    datetime.fromisoformat(document["timestamp"])
    info = document["info"]
    for key in ("git_commit", "num_trials", "max_steps", "max_errors"):
        assert key in info
    assert info["git_commit"] == load_manifest().commit
    assert (info["num_trials"], info["max_steps"], info["max_errors"], info["seed"]) == (
        MIXED_TRIALS,
        MIXED_MAX_STEPS,
        10,
        300,
    )
    assert info["agent_info"] == {
        "implementation": "llm_agent",
        "llm": "scripted-agent",
        # as upstream's ``tau2 run`` records it (its request layer adds tool_choice itself)
        "llm_args": {"temperature": 0.0},
    }
    user = info["user_info"]
    assert (user["implementation"], user["llm"], user["llm_args"]) == (
        "user_simulator", "scripted-user", {"temperature": 0.0}
    )  # fmt: skip
    # read through our own model of upstream's UserInfo: the guidelines it embeds are the
    # pinned data's, loaded at run time
    guidelines = codec.decode_value(UserInfo, user, "user_info").global_simulation_guidelines
    assert guidelines == load_user_guidelines(data_dir)
    assert info["environment_info"]["domain_name"] == "retail"
    assert info["environment_info"]["policy"] == load_policy(data_dir)
    assert info.get("audio_native_config") is None


def test_every_task_is_embedded_as_upstreams_bytes(exported: Path, data_dir: Path) -> None:
    pinned = (data_dir / "tasks.json").read_text(encoding="utf-8")
    text = exported.read_text(encoding="utf-8")
    embedded = _objects(text[text.index('\n"tasks": [') + 1 :])
    assert len(embedded) == 114
    assert embedded == _objects(pinned)
    assert [json.loads(task) for task in embedded] == json.loads(pinned)


def test_one_simulation_per_scenario_and_trial_with_upstreams_fields(
    document: dict[str, Any],
) -> None:
    simulations = document["simulations"]
    assert len(simulations) == len(MIXED_TASKS) * MIXED_TRIALS
    keys = [(s["task_id"], s["trial"]) for s in simulations]
    assert keys == [(task, trial) for task in MIXED_TASKS for trial in range(MIXED_TRIALS)]
    assert len({s["id"] for s in simulations}) == len(simulations)
    seeds = trial_seeds(300, MIXED_TRIALS)
    for simulation in simulations:
        for key in SIMULATION_REQUIRED:
            assert simulation[key] is not None, key
        assert isinstance(simulation["task_id"], str)
        start = datetime.fromisoformat(simulation["start_time"])
        end = datetime.fromisoformat(simulation["end_time"])
        assert math.isclose((end - start).total_seconds(), simulation["duration"], abs_tol=2e-6)
        assert simulation["termination_reason"] in UPSTREAM_ENDINGS
        assert simulation["seed"] == seeds[simulation["trial"]]
        assert simulation["mode"] == "half_duplex"


def test_the_ids_are_stable_across_exports(mixed_run: Path, document: dict[str, Any]) -> None:
    again = mixed_run.parent / "again.json"
    export_run(mixed_run, again)
    assert [s["id"] for s in json.loads(again.read_bytes())["simulations"]] == [
        s["id"] for s in document["simulations"]
    ]


def _check_messages(messages: list[dict[str, Any]]) -> None:
    assert messages[0]["role"] == "assistant"
    assert messages[0]["content"] == GREETING
    assert (messages[0]["cost"], messages[0]["usage"]) == (0.0, None)
    pending: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        assert message["role"] in ("assistant", "user", "tool")
        assert message["turn_idx"] == index
        datetime.fromisoformat(message["timestamp"])
        if message["role"] == "tool":
            call = pending.pop(0)  # each result follows its call at once, in order
            assert message["id"] == call["id"]
            assert "tool_call_id" not in message
            continue
        assert not pending, "a tool call's result must come next"
        for call in message["tool_calls"] or []:
            assert isinstance(call["arguments"], dict)
            pending.append(call)
        if message["tool_calls"] is not None:
            assert message["tool_calls"]
    assert not pending


def test_messages_are_in_upstreams_shape(document: dict[str, Any]) -> None:
    with_tools = 0
    for simulation in document["simulations"]:
        messages = simulation["messages"]
        if simulation["termination_reason"] == "infrastructure_error":
            assert [m["role"] for m in messages] == ["assistant", "user"]  # then the 500
            continue
        _check_messages(messages)
        with_tools += any(m["role"] == "tool" for m in messages)
    assert with_tools == 8  # 0, 2, 19 and 33 (3 only talks, 5 only reports, 24 has no gold
    # call, 10 failed)


def _price(role: str, usage: Mapping[str, int]) -> float:
    return PRICES[role].cost(
        Usage(n_calls=1, prompt=usage["prompt_tokens"], completion=usage["completion_tokens"])
    )


def test_per_message_usage_and_cost_add_up_to_the_roles_cost(document: dict[str, Any]) -> None:
    for simulation in document["simulations"]:
        totals = {"agent": 0.0, "user": 0.0}
        for message in simulation["messages"][1:]:
            if message["role"] == "tool":
                continue
            role = "agent" if message["role"] == "assistant" else "user"
            assert message["usage"]["prompt_tokens"] > 0
            assert message["cost"] == pytest.approx(_price(role, message["usage"]))
            totals[role] += message["cost"]
        assert simulation["agent_cost"] == pytest.approx(totals["agent"], abs=2e-6)
        assert simulation["user_cost"] == pytest.approx(totals["user"], abs=2e-6)


def test_reward_info_is_our_scoring_in_upstreams_shape(document: dict[str, Any]) -> None:
    sims = _by_key(document)
    passed = sims[("2", 0)]["reward_info"]
    assert passed["reward"] == 1.0
    assert passed["reward_basis"] == ["DB", "NL_ASSERTION"]
    assert passed["db_check"] == {"db_match": True, "db_reward": 1.0}
    assert passed["reward_breakdown"] == {"DB": 1.0, "NL_ASSERTION": 1.0}
    assert [c["met"] for c in passed["nl_assertions"]] == [True]
    no_assertions = sims[("0", 1)]["reward_info"]
    assert (no_assertions["reward"], no_assertions["nl_assertions"]) == (1.0, [])
    db_only = sims[("33", 0)]["reward_info"]
    assert (db_only["reward_basis"], db_only["nl_assertions"]) == (["DB"], None)
    assert db_only["reward_breakdown"] == {"DB": 1.0}
    differs = sims[("5", 1)]["reward_info"]
    assert differs["reward"] == 0.0
    assert differs["db_check"] == {"db_match": False, "db_reward": 0.0}
    nl_failed = sims[("19", 0)]["reward_info"]
    assert nl_failed["reward"] == 0.0
    assert [c["met"] for c in nl_failed["nl_assertions"]] == [True, False]
    assert nl_failed["nl_assertions"][1]["justification"] == "not said"
    assert nl_failed["reward_breakdown"] == {"DB": 1.0, "NL_ASSERTION": 0.0}
    talked = sims[("3", 0)]
    assert talked["termination_reason"] == "max_steps"
    assert (talked["reward_info"]["reward"], talked["reward_info"]["reward_basis"]) == (0.0, None)
    # the signals upstream's reward_info leaves out of an ending it does not evaluate
    assert talked["info"]["db_state_match"] is False
    assert [c["met"] for c in talked["info"]["nl_assertions"]] == [True]
    infra = sims[("10", 0)]
    assert infra["termination_reason"] == "infrastructure_error"
    assert infra["reward_info"]["reward"] == 0.0
    assert infra["reward_info"]["reward_basis"] is None
    assert "HTTP 500" in infra["info"]["stop_detail"]


def test_the_export_streams_one_simulation_at_a_time(
    mixed_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory bounded by one simulation: each scenario is read, written and let go before the
    next one is read (``benchmarks/bench_export.py`` measures it on 456 simulations)."""
    events: list[str] = []
    read_metrics, dump = export.read_metrics, export._dump

    def reading(path: Path) -> Any:
        events.append("read")
        return read_metrics(path)

    def writing(value: Any) -> bytes:
        if isinstance(value, dict) and "task_id" in value:
            events.append("write")
        return dump(value)

    monkeypatch.setattr(export, "read_metrics", reading)
    monkeypatch.setattr(export, "_dump", writing)
    export.export_run(mixed_run, tmp_path / "streamed.json")
    assert events == ["read", "write"] * len(MIXED_TASKS) * MIXED_TRIALS


def test_a_refused_export_leaves_the_target_untouched(mixed_run: Path, tmp_path: Path) -> None:
    from tau2_retail.errors import ExportRefused

    run = tmp_path / "run"
    shutil.copytree(mixed_run, run)
    (run / "tau2_retail__2" / "trial-1" / "metrics.json").unlink()
    target = tmp_path / "results.json"
    target.write_text("earlier export\n")
    with pytest.raises(ExportRefused) as refused:
        export_run(run, target)
    assert refused.value.partial
    assert target.read_text() == "earlier export\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
