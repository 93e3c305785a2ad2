"""A scripted OpenAI-compatible endpoint for every task: the responder of a loopback server
that plays the agent, the customer and the judge, with replies and faults chosen per task.

- agent: by default all of the task's gold actions in one message (ids ``gold-<n>``), then a
  report asking whether anything else is needed, then ``end_conversation`` once the customer
  stopped; with the built-in customer it reaches ``agent_exit`` with the gold database in
  three requests. ``default_agent`` replaces that script with one reply for every task (e.g.
  ``END``); ``agent[task_id]`` with a reply, or a function of the request's seed giving one.
- customer (``--tau2-user-model`` at this endpoint): the built-in customer's words.
- judge: one verdict per assertion, all met (score 0.9) except the 1-based indexes listed in
  ``judge_fails[task_id]`` (score 0.2); ``judge_wraps[task_id]`` turns that JSON text into the
  reply's text (e.g. inside a code fence).

With ``profile`` (a loaded tau2 :class:`~tau2_retail.engine.profiles.Profile`) the endpoint
recognises upstream's prompts instead of ours (the user prompts and the judge's) and the
judge answers in upstream's shape (``results`` with ``metExpectation``); the customer's stop
then ends the conversation, so the agent never needs ``end_conversation``.

``faults`` maps a task id to a :data:`Fault` (``default_fault`` for the others); a fault's
reply, when it gives one, wins over everything else. Every request is kept in ``log``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from tau2_retail.data.tasks import Task
from tau2_retail.engine.judge import JUDGE_SYSTEM_PROMPT
from tau2_retail.engine.profiles import Profile
from tau2_retail.engine.prompts import user_system_prompt
from tau2_retail.models.builtin import CUSTOMER_DONE, CUSTOMER_YES, ScriptedCustomer
from tau2_retail.testing.loopback_server import (
    Completion,
    Hang,
    HttpError,
    LoopbackOpenAIServer,
    Reply,
    ReplyToolCall,
)

__all__ = [
    "CHAT",
    "END",
    "REPORT",
    "SERVER_ERROR",
    "AgentBehaviour",
    "Fault",
    "HoldAgent",
    "Request",
    "ScriptedEndpoint",
    "always",
    "is_gold_call",
    "once",
]

REPORT: Final = "I have taken care of your request. Is there anything else I can help you with?"
END: Final = Completion(tool_calls=(ReplyToolCall(name="end_conversation", id="end"),))
"""The agent ends the conversation (at once, as a ``default_agent``: only seed-DB tasks match)."""
SERVER_ERROR: Final = HttpError.server_error()
"""A 500: with ``--tau2-agent-max-retries=0`` the scenario ends as ``infra_error``."""
CHAT: Final = Completion(content="Let me look into that for you.")
"""The agent only talks: the customer gives up after its turns, the ending is ``user_stop``."""

AgentBehaviour: TypeAlias = Reply | Callable[[int | None], Reply]
"""A reply, or a function of the request's seed (trials differ by seed) giving one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One request as the endpoint understood it.

    ``attempt`` counts the earlier requests of the same role, task and seed (client retries
    included): a fault on ``attempt == 0`` only is transient, one on every attempt persists.
    """

    role: str
    task_id: str
    seed: int | None
    attempt: int
    body: Mapping[str, Any] = field(repr=False)
    at: float


Fault: TypeAlias = Callable[[Request], Reply | None]
"""A reply that replaces the scripted one, or None to let the script answer."""


def once(reply: Reply, *, role: str = "agent") -> Fault:
    """``reply`` to the first request of ``role`` in each scenario, then the script."""
    return lambda request: reply if request.role == role and request.attempt == 0 else None


def always(reply: Reply, *, role: str = "agent") -> Fault:
    """``reply`` to every request of ``role``."""
    return lambda request: reply if request.role == role else None


class HoldAgent:
    """A fault: the agent's requests hang (see ``Hang``) until ``release`` is set; ``held`` is
    set when the first one arrives."""

    __slots__ = ("held", "release")

    def __init__(self) -> None:
        self.held = threading.Event()
        self.release = threading.Event()

    def __call__(self, request: Request) -> Reply | None:
        if request.role == "agent" and not self.release.is_set():
            self.held.set()
            return Hang()
        return None


def is_gold_call(call: Mapping[str, Any]) -> bool:
    return str(call.get("id", "")).startswith("gold-")


class ScriptedEndpoint:
    """See the module docstring; ``server`` is a loopback server answering with this script
    (start it with ``with endpoint.server:``)."""

    def __init__(
        self,
        tasks: Mapping[str, Task],
        guidelines: str,
        *,
        default_agent: Reply | None = None,
        profile: Profile | None = None,
    ) -> None:
        self.tasks = tasks
        self.upstream = profile.upstream if profile is not None else None
        self.default_agent = default_agent
        self.agent: dict[str, AgentBehaviour] = {}
        self.judge_fails: dict[str, set[int]] = {}
        self.judge_wraps: dict[str, Callable[[str], str]] = {}
        self.faults: dict[str, Fault] = {}
        self.default_fault: Fault | None = None
        self.log: list[Request] = []
        self._lock = threading.Lock()
        self._attempts: Counter[tuple[str, str, int | None]] = Counter()
        self._openings = {ScriptedCustomer(task).opening(): task.id for task in tasks.values()}
        if profile is not None:
            self._user_prompts = {profile.user_prompt(t): t.id for t in tasks.values()}
        else:
            self._user_prompts = {user_system_prompt(guidelines, t): t.id for t in tasks.values()}
        self._judge_prompt = (
            self.upstream.judge.system_prompt if self.upstream is not None else JUDGE_SYSTEM_PROMPT
        )
        self.server = LoopbackOpenAIServer(responder=self)

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def args(self, role: str = "agent", *, model: str | None = None, **options: Any) -> list[str]:
        """``--tau2-<role>-model/-base-url`` for this endpoint, plus ``--tau2-<role>-<option>``."""
        shown = [f"--tau2-{role}-model={model or 'scripted-' + role}"]
        shown.append(f"--tau2-{role}-base-url={self.base_url}")
        shown += [f"--tau2-{role}-{k.replace('_', '-')}={v}" for k, v in options.items()]
        return shown

    def agent_args(self, model: str = "test-agent") -> list[str]:
        """The agent at this endpoint, without retries (a fault ends the scenario at once)."""
        return self.args("agent", model=model, max_retries=0)

    def judge_args(self, model: str = "test-judge") -> list[str]:
        return self.args("judge", model=model)

    def reset(self) -> None:
        """Forget earlier requests (before another run against this endpoint)."""
        with self._lock:
            self.log.clear()
            self._attempts.clear()

    def requests(self, task_id: str, role: str = "agent") -> list[Request]:
        with self._lock:
            return [r for r in self.log if r.task_id == task_id and r.role == role]

    def _counts(self, role: str) -> Counter[str]:
        with self._lock:
            return Counter(r.task_id for r in self.log if r.role == role)

    @property
    def agent_requests(self) -> Counter[str]:
        """Agent requests per task id so far."""
        return self._counts("agent")

    @property
    def judge_requests(self) -> Counter[str]:
        """Judge requests per task id so far."""
        return self._counts("judge")

    # -- the responder --

    def __call__(self, body: Mapping[str, Any]) -> Reply:
        role, task_id = self._identify(body)
        seed = body.get("seed")
        with self._lock:
            key = (role, task_id, seed)
            request = Request(
                role=role,
                task_id=task_id,
                seed=seed,
                attempt=self._attempts[key],
                body=body,
                at=time.monotonic(),
            )
            self._attempts[key] += 1
            self.log.append(request)
        fault = self.faults.get(task_id, self.default_fault)
        reply = fault(request) if fault is not None else None
        if reply is not None:
            return reply
        script = {"agent": self._agent, "user": self._customer, "judge": self._judge}[role]
        return script(request)

    def _identify(self, body: Mapping[str, Any]) -> tuple[str, str]:
        messages: Sequence[Mapping[str, Any]] = body["messages"]
        if "tools" in body:
            first_user = next(m["content"] for m in messages if m["role"] == "user")
            return "agent", self._openings[first_user]
        system = messages[0]["content"]
        if system == self._judge_prompt:
            # the conversation is in the prompt: the longest opening found names the task
            content = str(messages[-1]["content"])
            found = [opening for opening in self._openings if opening in content]
            return "judge", self._openings[max(found, key=len)]
        task_id = self._user_prompts.get(system)
        if task_id is None:
            raise AssertionError(f"neither an agent, a customer nor a judge request: {body!r}")
        return "user", task_id

    def _agent(self, request: Request) -> Reply:
        behaviour = self.agent.get(request.task_id, self.default_agent)
        if behaviour is not None:
            return behaviour(request.seed) if callable(behaviour) else behaviour
        messages = request.body["messages"]
        task = self.tasks[request.task_id]
        calls = [c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        if task.actions and not any(is_gold_call(call) for call in calls):
            return Completion(
                tool_calls=tuple(
                    ReplyToolCall(
                        name=action.name,
                        arguments=json.dumps(action.plain_arguments()),
                        id=f"gold-{index}",
                    )
                    for index, action in enumerate(task.actions)
                )
            )
        last = messages[-1]
        if last["role"] == "user" and "###STOP###" in (last.get("content") or ""):
            return END
        return Completion(content=REPORT)

    def _customer(self, request: Request) -> Reply:
        messages = request.body["messages"]
        if not any(m["role"] == "assistant" for m in messages):
            return Completion(content=ScriptedCustomer(self.tasks[request.task_id]).opening())
        if "anything else" in str(messages[-1].get("content") or "").lower():
            return Completion(content=CUSTOMER_DONE)
        return Completion(content=CUSTOMER_YES)

    def _judge(self, request: Request) -> Reply:
        task = self.tasks[request.task_id]
        fails = self.judge_fails.get(task.id, set())
        if self.upstream is not None:
            results = [
                {
                    "expectedOutcome": assertion,
                    "reasoning": "not said" if index in fails else "said",
                    "metExpectation": index not in fails,
                }
                for index, assertion in enumerate(task.nl_assertions, start=1)
            ]
            return Completion(content=json.dumps({"results": results}))
        verdicts = [
            {
                "index": index,
                "passed": index not in fails,
                "reason": "not said" if index in fails else "said",
            }
            for index in range(1, len(task.nl_assertions) + 1)
        ]
        reply = {
            "score": 0.2 if fails else 0.9,
            "reason": "scripted",
            "nl_assertion_verdicts": verdicts,
        }
        wrap = self.judge_wraps.get(task.id)
        text = json.dumps(reply)
        return Completion(content=wrap(text) if wrap is not None else text)
