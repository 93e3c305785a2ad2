"""The one way to run a scenario: the data bundle, the three role models, limits, the models'
clients, the prompts, and ``run_scenario``.

The pytest fixture ``tau2_outcome`` and ``python -m tau2_retail run`` both go through
``Harness``; nothing here knows about pytest. Typical use::

    bundle = load_bundle(data_dir)
    async with Harness(bundle=bundle, roles=Roles(agent=..., user=...), limits=Limits()) as h:
        outcome = await h.run(scenario)
        write_outcome(run_dir, outcome, prompts=h.prompts(scenario.task), config=...)

(``write_outcome`` lives with the other artifacts in ``tau2_retail.results.artifacts``.)
Endpoint clients are built on first use, one per role, shared by every scenario the harness
runs (on one event loop), and closed by ``aclose``. Several ``run`` calls may be in flight at
once: each scenario gets its own store and its own built-in models.

With a ``cache`` (``tau2_retail.models.cache``), each scenario trial sees its endpoint models
through it; with ``prices``, each outcome's metrics carry its cost per role. With ``spending``
(``--tau2-max-cost``) too, each request of a priced endpoint model reserves its estimated cost
before it is sent (``tau2_retail.models.spending``); a request the budget refuses raises
``BudgetExhausted`` out of ``run``: the scenario is not scored. An agent given as code is
priced by the ``model`` it declares; its cost is charged to the budget when its scenario ends
or the budget stops it. With prices, a scenario stopped without an outcome says what it had
spent: the budget's in ``BudgetExhausted.spent``, one interrupted (cancelled, or
``KeyboardInterrupt``) to the ``on_interrupted`` its ``run`` was given.

The conversation runs on exactly what the models said. The outcome ``run`` returns is what a
run writes and shows (artifacts, failure messages, the terminal): the API keys of the roles'
endpoints are masked in it (``masker``, by default built from the roles' key variables in
the environment; ``tau2_retail.models.masking`` says which values count as keys).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau2_retail.data.gold import GoldBook
from tau2_retail.data.seed import load_seed
from tau2_retail.data.tasks import Task, load_tasks
from tau2_retail.engine.conversation_setup import Limits, MessageListener, ScenarioPrompts
from tau2_retail.engine.profiles import Profile, ProfileName, load_profile
from tau2_retail.engine.scenario import Scenario, ScenarioOutcome, rejudge, run_scenario
from tau2_retail.errors import BudgetExhausted, ConfigError
from tau2_retail.models.agent import AgentIdentity, AgentRunner
from tau2_retail.models.builtin import BUILTINS_BY_ROLE, builtin_model
from tau2_retail.models.cache import CacheMode, ResponseCache
from tau2_retail.models.cached_model import CachedChatModel
from tau2_retail.models.choice import ModelChoice
from tau2_retail.models.dropped_params import supplied
from tau2_retail.models.masking import Masker, masked
from tau2_retail.models.messages import Usage
from tau2_retail.models.prices import PriceTable, RoleCosts
from tau2_retail.models.protocol import ChatModel, ClosedOnExit
from tau2_retail.models.spending import (
    BudgetedChatModel,
    ScenarioSpending,
    Spending,
)
from tau2_retail.tools.store import Store

if TYPE_CHECKING:
    from tau2_retail.models.openai_client import OpenAIChatModel

__all__ = ["DataBundle", "Harness", "Roles", "ScenarioPrompts", "load_bundle"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DataBundle:
    """The verified data of one folder and what is derived from it once per process."""

    data_dir: Path
    tasks: Mapping[str, Task]
    golds: GoldBook
    profile: Profile


def load_bundle(
    data_dir: Path,
    *,
    agent_notes: bool = True,
    profile: ProfileName = ProfileName.DEFAULT,
) -> DataBundle:
    """Load the tasks, the seed database (gold replays happen lazily) and the profile: what
    the models are shown and how scenarios are routed, judged and scored.

    ``agent_notes`` False gives the agent the policy alone (default profile only). The tau2
    profile derives upstream's text from the pinned sources (``DataError`` names a missing or
    altered file, ``UpstreamSourceError`` a construct a changed pin lacks).
    """
    tasks = load_tasks(data_dir)
    return DataBundle(
        data_dir=data_dir,
        tasks=tasks,
        golds=GoldBook(seed=load_seed(data_dir), tasks=tasks),
        profile=load_profile(profile, data_dir, agent_notes=agent_notes, tasks=tasks),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Roles:
    """The three role models; no judge means NL assertions are not applicable."""

    agent: ModelChoice
    user: ModelChoice
    judge: ModelChoice | None = None

    def __post_init__(self) -> None:
        for role, choice in (("agent", self.agent), ("user", self.user), ("judge", self.judge)):
            if choice is None:
                continue
            if choice.endpoint is None and choice.name not in BUILTINS_BY_ROLE[role]:
                accepted = ", ".join(BUILTINS_BY_ROLE[role]) or "none"
                raise ConfigError(
                    f"{role} model {choice.name!r} has no endpoint and is not a built-in "
                    f"{role} model (built-ins: {accepted})"
                )


@dataclass(slots=True, kw_only=True)
class Harness(ClosedOnExit):
    """Runs scenarios of ``bundle`` with ``roles`` under ``limits``; owns the endpoint clients."""

    bundle: DataBundle
    roles: Roles
    limits: Limits = field(default_factory=Limits)
    cache: ResponseCache | None = None
    prices: PriceTable | None = None
    masker: Masker | None = None
    spending: Spending | None = None
    #: says a line once for the run (an endpoint refused a parameter the profile sends)
    notice: Callable[[str], None] | None = None
    _clients: dict[str, OpenAIChatModel] = field(default_factory=dict, init=False, repr=False)
    _closed: bool = field(default=False, init=False, repr=False)

    async def close(self) -> None:
        """Close the endpoint clients; the harness cannot run scenarios afterwards."""
        self._closed = True
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()

    def __post_init__(self) -> None:
        if self.masker is None:
            roles = (self.roles.agent, self.roles.user, self.roles.judge)
            self.masker = Masker.for_endpoints(
                (choice.endpoint for choice in roles if choice is not None), os.environ
            )

    def shown(self, outcome: ScenarioOutcome) -> ScenarioOutcome:
        """``outcome`` as it is written and shown: every key masked in its conversation,
        metrics, judgement and database difference (the same object when none holds one)."""
        masker = self.masker
        if not masker:
            return outcome
        mask = masker.text
        return replace(
            outcome,
            conversation=masked(outcome.conversation, mask),
            judge=masked(outcome.judge, mask),
            db_diff=masked(outcome.db_diff, mask),
            metrics=masked(outcome.metrics, mask),
        )

    def prompts(self, task: Task) -> ScenarioPrompts:
        return self.bundle.profile.prompts(task)

    def _client(self, role: str, choice: ModelChoice) -> ChatModel:
        client = self._clients.get(role)
        if client is None:
            if self._closed:
                raise RuntimeError("the harness is closed")
            assert choice.endpoint is not None  # built-ins never get here
            from tau2_retail.models.openai_client import OpenAIChatModel

            sent = self.bundle.profile.policy.request_config(role, choice.endpoint)
            client = self._clients[role] = OpenAIChatModel(
                sent, droppable=supplied(choice.endpoint, sent), notice=self.notice
            )
        return client

    def _model(
        self, role: str, choice: ModelChoice, scenario: Scenario, spending: ScenarioSpending | None
    ) -> ChatModel:
        if choice.endpoint is None:
            return builtin_model(choice.name, scenario.task, role=role)
        client = self._client(role, choice)
        cache = self.cache
        model: ChatModel = client
        if cache is not None and cache.mode is not CacheMode.OFF:
            model = CachedChatModel(
                self._clients[role], cache, role=role, trial=scenario.trial, masker=self.masker
            )
        price = self.prices.price(choice.endpoint.model) if self.prices is not None else None
        if spending is None or price is None:
            return model
        return BudgetedChatModel(
            model,
            price=price,
            spending=spending,
            max_tokens=self._clients[role].config.max_tokens,
            reserve=self.spending is not None,  # no budget: each reply's cost only counted
        )

    def _scenario_spending(self) -> ScenarioSpending | None:
        """What one scenario's requests cost, counted (with a budget, through the run's
        spending); None without prices."""
        return None if self.prices is None else ScenarioSpending(self.spending)

    def costs(
        self, outcome: ScenarioOutcome, *, agent: AgentIdentity | None = None
    ) -> ScenarioOutcome:
        """``outcome`` with its cost per role in the metrics (unchanged without prices).
        ``agent``: the agent given as code, priced by the model it declares (none: 0)."""
        prices = self.prices
        if prices is None:
            return outcome
        metrics = outcome.metrics
        cost: dict[str, float | None] = {}
        for role in ("agent", "user", "judge"):
            choice: ModelChoice | None = getattr(self.roles, role)
            usage = metrics.token_usage.get(role)
            if choice is None or usage is None:
                cost[role] = 0.0
                continue
            model = None if choice.endpoint is None else choice.endpoint.model
            if role == "agent" and agent is not None:
                model = agent.model
            cost[role] = prices.cost(model, usage)
        return replace(outcome, metrics=replace(metrics, cost=RoleCosts(**cost)))

    def _charge(self, outcome: ScenarioOutcome) -> None:
        """What an agent given as code spent through its own backend (its recorded tokens at
        its model's price) counts into the budget once its scenario is over: no request of
        the suite's is sent, and no scenario starts, once the spending passes the limit."""
        cost = outcome.metrics.cost
        if self.spending is not None and cost is not None and cost.agent:
            self.spending.charge(cost.agent)

    def _code_agent_tokens(self, agent: AgentRunner | None) -> _CodeAgentTokens | None:
        """What an agent given as code spends, counted as it goes (None: no such agent, or
        no prices). A scenario stopped unscored has no outcome to charge it from."""
        if agent is None or self.prices is None:
            return None
        return _CodeAgentTokens(self.prices, agent.identity.model)

    @staticmethod
    @contextlib.contextmanager
    def _stopped_unscored(
        spending: ScenarioSpending | None,
        on_interrupted: Callable[[float], None] | None,
        code_agent: _CodeAgentTokens | None = None,
    ) -> Iterator[None]:
        """A scenario stopped without an outcome says what it had spent: one the budget stops
        carries it (``spent``), the run counting it beside the scored scenarios' cost; one
        interrupted tells ``on_interrupted``."""
        try:
            yield
        except BudgetExhausted as stopped:
            stopped.spent = _spent(spending, code_agent)
            raise
        except (asyncio.CancelledError, KeyboardInterrupt):
            spent = _spent(spending, code_agent)
            if spent and on_interrupted is not None:
                on_interrupted(spent)
            raise

    async def run(
        self,
        scenario: Scenario,
        *,
        store: Store | None = None,
        on_message: MessageListener | None = None,
        agent: AgentRunner | None = None,
        on_interrupted: Callable[[float], None] | None = None,
    ) -> ScenarioOutcome:
        """Run ``scenario`` on ``store`` (default: a fresh copy of the seed database).

        ``on_message`` sees each conversation message as it is recorded. ``agent`` is an
        agent given as Python code (made for this scenario), in place of the agent model.
        ``on_interrupted`` is told what the scenario had spent (USD, with prices, when it had
        spent anything) if it is interrupted before its outcome (cancelled, or
        ``KeyboardInterrupt``).
        """
        task = scenario.task
        roles = self.roles
        judge = roles.judge
        spending = self._scenario_spending()
        agent_model = (
            self._model("agent", roles.agent, scenario, spending) if agent is None else agent
        )
        judge_model = None if judge is None else self._model("judge", judge, scenario, spending)
        code_agent = self._code_agent_tokens(agent)
        with self._stopped_unscored(spending, on_interrupted, code_agent):
            outcome = await run_scenario(
                scenario,
                agent=agent_model,
                user=self._model("user", roles.user, scenario, spending),
                judge_model=judge_model,
                gold=self.bundle.golds[task.id],
                store=Store(self.bundle.golds.seed) if store is None else store,
                profile=self.bundle.profile,
                limits=self.limits,
                on_message=on_message,
                on_usage=code_agent,
            )
        if agent is None:
            return self.shown(self.costs(outcome))
        outcome = self.costs(outcome, agent=agent.identity)
        self._charge(outcome)
        return self.shown(outcome)

    async def rejudge(
        self,
        scenario: Scenario,
        *,
        transcript: Mapping[str, Any],
        expected_db_hash: str,
        agent: AgentIdentity | None = None,
        on_interrupted: Callable[[float], None] | None = None,
    ) -> ScenarioOutcome:
        """Judge ``scenario``'s finished conversation again from its saved ``transcript``
        (``transcript.json``) whose final database hashed to ``expected_db_hash``; ``agent``
        is the agent given as code that held it (its tokens priced by its model);
        ``on_interrupted`` as for :meth:`run`.

        Raises ``SavedConversationError`` when the transcript cannot be used (the caller then
        runs the scenario again) and ``ConfigError`` when no judge is configured.
        """
        judge = self.roles.judge
        if judge is None:
            raise ConfigError("re-judging needs a judge model; none is configured")
        task = scenario.task
        spending = self._scenario_spending()
        with self._stopped_unscored(spending, on_interrupted):
            outcome = await rejudge(
                scenario,
                transcript=transcript,
                judge_model=self._model("judge", judge, scenario, spending),
                gold=self.bundle.golds[task.id],
                seed=self.bundle.golds.seed,
                expected_db_hash=expected_db_hash,
                profile=self.bundle.profile,
                limits=self.limits,
            )
        return self.shown(self.costs(outcome, agent=agent))


class _CodeAgentTokens:
    """A usage listener: the tokens an agent given as code has returned or recorded so far,
    priced by the model it declares."""

    __slots__ = ("_model", "_prices", "usage")

    def __init__(self, prices: PriceTable, model: str | None) -> None:
        self._prices = prices
        self._model = model
        self.usage = Usage()

    def __call__(self, role: str, usage: Usage) -> None:
        if role == "agent":
            self.usage = self.usage + usage

    def cost(self) -> float:
        return self._prices.cost(self._model, self.usage) or 0.0


def _spent(spending: ScenarioSpending | None, code_agent: _CodeAgentTokens | None) -> float:
    """What a scenario stopped unscored had spent: its requests', and what an agent given as
    code spent through its own backend until then (charged now, to the budget too)."""
    if spending is None:
        return 0.0
    cost = code_agent.cost() if code_agent is not None else 0.0
    if cost:
        spending.charge(cost)
    return spending.spent
