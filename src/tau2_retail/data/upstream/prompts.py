"""Upstream's prompts and conversation constants, derived from the pinned sources' syntax trees.

- agent: the text agent's ``system_prompt`` property (its template formatted with the policy);
  whether that agent class has a stop rule of its own (upstream's text agent has none).
- user simulator: the guidelines with the persona placeholder resolved as for a text run
  without a persona configuration (upstream then inserts nothing), formatted into the
  simulator's template with the task's scenario rendered by the ``__str__`` methods of the
  task data model.
- judge: the NL-assertion evaluator's system prompt and user-prompt f-strings, and the keys it
  reads from the reply.
- orchestrator: the fixed first agent message and the names of its endings.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tau2_retail.data.upstream.source import Source, string_literal
from tau2_retail.data.upstream.strings import Evaluator, render_str_method

__all__ = [
    "JudgeReplyKeys",
    "JudgeTemplate",
    "derive_agent_prompt",
    "derive_agent_stop_rule",
    "derive_endings",
    "derive_first_agent_message",
    "derive_judge",
    "derive_user_prompt",
    "render_scenario",
]

_AGENT_CLASS = "LLMAgent"
_USER_CLASS = "UserSimulator"
_JUDGE_CLASS = "NLAssertionsEvaluator"
_JUDGE_METHOD = "evaluate_nl_assertions"
_FIRST_MESSAGE = "DEFAULT_FIRST_AGENT_MESSAGE"
_ENDINGS_ENUM = "TerminationReason"
_PERSONA_FOR_TEXT_RUNS = ""
"""What upstream inserts for the persona placeholder when no persona configuration adds
guidelines (text runs): nothing."""


def _returned(source: Source, function: ast.FunctionDef, where: str) -> ast.expr:
    for node in function.body:
        if isinstance(node, ast.Return) and node.value is not None:
            return node.value
    raise source.missing(f"a return statement in {where}")


def derive_agent_prompt(agent: Source, *, policy: str) -> str:
    """The agent's system prompt: upstream's template with its instruction and ``policy``."""
    where = f"{_AGENT_CLASS}.system_prompt"
    prompt = agent.method(_AGENT_CLASS, "system_prompt")
    evaluator = Evaluator(source=agent, where=where, fields={"domain_policy": policy})
    return evaluator.text(_returned(agent, prompt, where))


def derive_agent_stop_rule(agent: Source) -> bool:
    """Whether upstream's text agent can end the conversation itself (its own ``is_stop``).

    Upstream's text agent inherits the participant default (never stops); only its solo agent
    defines a stop token. A pin whose text agent defines ``is_stop`` is a behaviour this
    release does not know, so it is refused rather than guessed.
    """
    if agent.has_method(_AGENT_CLASS, "is_stop"):
        raise agent.missing(
            f"{_AGENT_CLASS} without an is_stop of its own (this release reproduces a text "
            "agent that never ends the conversation itself)"
        )
    return False


def derive_first_agent_message(orchestrator: Source) -> str:
    value = orchestrator.module_assignment(_FIRST_MESSAGE)
    if isinstance(value, ast.Call):
        for keyword in value.keywords:
            if keyword.arg == "content":
                return orchestrator.string_constant(keyword.value, f"{_FIRST_MESSAGE} content")
    raise orchestrator.missing(f"{_FIRST_MESSAGE} = AssistantMessage(content=...)")


def derive_endings(orchestrator: Source) -> frozenset[str]:
    """The endings the orchestrator decides, by upstream's names (``user_stop``, ...)."""
    names = {
        node.attr.lower()
        for node in ast.walk(orchestrator.tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == _ENDINGS_ENUM
    }
    if not names:
        raise orchestrator.missing(f"{_ENDINGS_ENUM}.<ending> references")
    return frozenset(names)


def _optional(value: Mapping[str, Any], key: str) -> Any:
    return value.get(key)


def render_scenario(tasks: Source, user_scenario: Mapping[str, Any]) -> str:
    """``str(task.user_scenario)`` as upstream's data model renders it."""

    def instructions(value: Any) -> str:
        if isinstance(value, str):
            return value
        if not isinstance(value, Mapping):
            raise tasks.missing("structured or text user instructions")
        fields = {
            key: _optional(value, key)
            for key in ("domain", "reason_for_call", "known_info", "unknown_info")
        } | {"task_instructions": value.get("task_instructions")}
        return render_str_method(tasks, "StructuredUserInstructions", fields)

    return render_str_method(
        tasks,
        "UserScenario",
        {
            "persona": _optional(user_scenario, "persona"),
            "instructions": user_scenario.get("instructions"),
        },
        nested={"instructions": instructions},
    )


def derive_user_prompt(user: Source, *, guidelines: str, scenario: str) -> str:
    """The user simulator's system prompt for a text run: guidelines + the scenario."""
    where = f"{_USER_CLASS}.system_prompt"
    prompt = user.method(_USER_CLASS, "system_prompt")
    evaluator = Evaluator(
        source=user,
        where=where,
        fields={"instructions": scenario},
        names={"guidelines": guidelines, "persona_guidelines": _PERSONA_FOR_TEXT_RUNS},
    )
    with_persona = user.local_assignment(prompt, "guidelines_with_persona", where)
    evaluator.names["guidelines_with_persona"] = evaluator.text(with_persona)
    result = _returned(user, prompt, where)
    if isinstance(result, ast.Name):
        result = user.local_assignment(prompt, result.id, where)
    return evaluator.text(result)


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeReplyKeys:
    """The keys upstream's evaluator reads from the judge's JSON reply."""

    results: str
    assertion: str
    met: str
    reasoning: str


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeTemplate:
    """Upstream's NL-assertion judge: its system prompt, user prompt and reply keys."""

    source: Source
    system_prompt: str
    line: ast.JoinedStr
    line_separator: str
    line_variable: str
    user_prompt: ast.JoinedStr
    reply: JudgeReplyKeys

    def user_content(self, messages: Sequence[Mapping[str, Any]], assertions: list[str]) -> str:
        """The user prompt for ``messages`` (``{"role", "content"}`` each) and ``assertions``."""
        where = f"{_JUDGE_CLASS}.{_JUDGE_METHOD}"
        lines = []
        for message in messages:
            evaluator = Evaluator(
                source=self.source, where=where, names={self.line_variable: message}
            )
            lines.append(evaluator.text(self.line))
        evaluator = Evaluator(
            source=self.source,
            where=where,
            names={"trajectory_str": self.line_separator.join(lines), "nl_assertions": assertions},
        )
        return evaluator.text(self.user_prompt)


def _trajectory_line(judge: Source, value: ast.expr, where: str) -> tuple[str, ast.JoinedStr, str]:
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "join"
        and (separator := string_literal(value.func.value)) is not None
        and len(value.args) == 1
        and isinstance(value.args[0], ast.ListComp)
        and isinstance(value.args[0].elt, ast.JoinedStr)
        and len(value.args[0].generators) == 1
        and isinstance(value.args[0].generators[0].target, ast.Name)
    ):
        comprehension = value.args[0]
        target = comprehension.generators[0].target
        assert isinstance(target, ast.Name)  # checked above; narrows for mypy
        assert isinstance(comprehension.elt, ast.JoinedStr)
        return separator, comprehension.elt, target.id
    raise judge.missing(f'trajectory_str = "<sep>".join([f"..." for message in ...]) in {where}')


def _reply_keys(judge: Source, method: ast.FunctionDef, where: str) -> JudgeReplyKeys:
    for node in ast.walk(method):
        if not (isinstance(node, ast.ListComp) and isinstance(node.elt, ast.Call)):
            continue
        keys = {}
        for keyword in node.elt.keywords:
            item = keyword.value
            if (
                keyword.arg
                and isinstance(item, ast.Subscript)
                and (key := string_literal(item.slice)) is not None
            ):
                keys[keyword.arg] = key
        iterated = node.generators[0].iter if node.generators else None
        results = None
        if (
            isinstance(iterated, ast.Call)
            and isinstance(iterated.func, ast.Attribute)
            and iterated.func.attr == "get"
            and iterated.args
        ):
            results = string_literal(iterated.args[0])
        if results and {"nl_assertion", "met", "justification"} <= keys.keys():
            return JudgeReplyKeys(
                results=results,
                assertion=keys["nl_assertion"],
                met=keys["met"],
                reasoning=keys["justification"],
            )
    raise judge.missing(
        "[NLAssertionCheck(nl_assertion=result[...], met=result[...], justification=result[...])"
        f' for result in result_data.get("...", [])] in {where}'
    )


def derive_judge(judge: Source) -> JudgeTemplate:
    where = f"{_JUDGE_CLASS}.{_JUDGE_METHOD}"
    method = judge.method(_JUDGE_CLASS, _JUDGE_METHOD)
    system_prompt = judge.string_constant(
        judge.local_assignment(method, "system_prompt", where), f"system_prompt in {where}"
    )
    user_prompt = judge.local_assignment(method, "user_prompt", where)
    if not isinstance(user_prompt, ast.JoinedStr):
        raise judge.missing(f"the user_prompt f-string in {where}")
    separator, line, variable = _trajectory_line(
        judge, judge.local_assignment(method, "trajectory_str", where), where
    )
    return JudgeTemplate(
        source=judge,
        system_prompt=system_prompt,
        line=line,
        line_separator=separator,
        line_variable=variable,
        user_prompt=user_prompt,
        reply=_reply_keys(judge, method, where),
    )
