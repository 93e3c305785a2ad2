"""The ``info`` of an exported ``results.json``: who played each role and the run's limits.

From ``run_args.json``: an agent model at an endpoint is upstream's standard scaffold driving
that model (``implementation`` ``llm_agent``, ``llm`` the model id, ``llm_args`` the sampling
parameters as the requests carried them: ``temperature`` and the rest, and the extra body's
fields such as ``tool_choice``); an agent given as code is named as such (``implementation``
its import string, or ``conftest.py::tau2_agent`` for a fixture; ``llm`` the model it declares,
if any; ``llm_args`` empty: the harness sets no argument of its requests); a built-in model
is named by its name (``builtin:oracle``). The user likewise (``user_simulator`` with
upstream's guidelines when it is a model). ``git_commit`` is the pinned upstream commit whose
prompts, tools and data the tau2 profile reproduces; the policy is the pinned ``policy.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tau2_retail.data.files import load_manifest
from tau2_retail.data.tasks import load_policy, load_user_guidelines
from tau2_retail.results.records import ModelRecord, RunArgs
from tau2_retail.tau2_format.schema import AgentInfo, EnvironmentInfo, Info, UserInfo
from tau2_retail.tau2_format.terms import DOMAIN, LLM_AGENT, USER_SIMULATOR

__all__ = ["llm_args", "run_info"]

#: the sampling parameters of an endpoint record, as upstream's ``llm_args`` names them
_SAMPLING = ("temperature", "top_p", "max_tokens")
#: what upstream's request layer adds itself (``generate``), absent from its ``llm_args``
_ADDED_BY_UPSTREAM = {"tool_choice": "auto"}
#: limits of a run recorded before they were (upstream's defaults, which were ours too)
_DEFAULTS = {"max_steps": 200, "max_errors": 10, "seed": 300}


def llm_args(endpoint: Mapping[str, Any]) -> dict[str, Any]:
    """The request parameters an endpoint's requests carried, as upstream's ``llm_args``
    records them: without ``tool_choice: auto``, which upstream's request layer adds to each
    request with tools and never records (``submit prepare`` refuses a set of domain files
    whose arguments differ)."""
    args = {key: endpoint[key] for key in _SAMPLING if endpoint.get(key) is not None}
    extra = endpoint.get("extra_body")
    if isinstance(extra, Mapping):
        args.update(extra)
    if args.get("tool_choice") == _ADDED_BY_UPSTREAM["tool_choice"]:
        del args["tool_choice"]
    return args


def _player(
    record: ModelRecord, implementation: str
) -> tuple[str, str | None, dict[str, Any] | None]:
    """``implementation``, ``llm``, ``llm_args`` of one role's record."""
    if record.code:
        declared = record.code.get("model")
        # ``llm_args`` {} (the harness sets none of the code's request arguments), not null:
        # upstream's text runs always record a dict (``TextRunConfig.llm_args_agent`` is a
        # ``dict``, src/tau2/data_model/simulation.py:556, so ``tau2 run --agent-llm-args null``
        # is refused) and ``tau2 submit prepare`` requires equal ``llm_args`` in every domain
        # file (src/tau2/scripts/leaderboard/prepare_submission.py:147-161): a null refused our
        # retail file beside any airline or telecom file, `--agent-llm-args '{}'` matches {}.
        source = str(record.code.get("source") or record.model)
        return source, str(declared or "") or None, {}
    if record.endpoint:
        return (
            implementation,
            str(record.endpoint.get("model", record.model)),
            llm_args(record.endpoint),
        )
    return record.model, None, None


def run_info(run_args: RunArgs, data_dir: Path) -> Info:
    """``info`` of a run's export (the policy and guidelines read from the verified data)."""
    configuration = run_args.configuration
    settings = {**_DEFAULTS, **{k: v for k, v in configuration.settings.items() if v is not None}}
    agent, agent_llm, agent_args = _player(configuration.agent, LLM_AGENT)
    user, user_llm, user_args = _player(configuration.user, USER_SIMULATOR)
    return Info(
        git_commit=load_manifest().commit,
        num_trials=run_args.trials,
        max_steps=int(settings["max_steps"]),
        max_errors=int(settings["max_errors"]),
        user_info=UserInfo(
            implementation=user,
            llm=user_llm,
            llm_args=user_args,
            global_simulation_guidelines=(
                load_user_guidelines(data_dir) if user == USER_SIMULATOR else None
            ),
        ),
        agent_info=AgentInfo(implementation=agent, llm=agent_llm, llm_args=agent_args),
        environment_info=EnvironmentInfo(domain_name=DOMAIN, policy=load_policy(data_dir)),
        seed=int(settings["seed"]),
    )
