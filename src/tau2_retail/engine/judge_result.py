"""The judge's records: its verdict on one assertion and its result for one scenario, as
``judge_result.json`` holds them (spec: conversation_and_scoring.md §5, §6)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Final

from pydantic import Field

from tau2_retail.codec import FORMAT_VERSION, Omitted
from tau2_retail.models.messages import Usage

__all__ = ["JudgeInput", "JudgeResult", "Verdict"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The judge's verdict on one assertion; ``index`` is 1-based."""

    index: int
    assertion: str
    passed: bool
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeInput:
    """The exact prompt the judge was given."""

    system_prompt: str
    user_content: str


_NOT_WRITTEN: Final = Field(exclude=True)
_NO_INPUT: Final = JudgeInput(system_prompt="", user_content="")


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeResult:
    """What the judge said about one scenario, with the exact prompt it was given.

    ``verdicts`` holds exactly one verdict per assertion, in order. ``error`` is set (and every
    verdict failed) when the endpoint refused the prompt or the reply could not be read.
    ``usage`` counts the judge's tokens over its ``requests`` (a reply that cannot be read is
    asked again, in the default profile). ``unreadable_replies`` holds the
    replies that could not be read (kept whole); ``unreadable`` is set when the last one could
    not be read either: the verdicts are then the judge's failure, not the agent's (the scenario
    is an infra error of the judge role).
    """

    # the keys of judge_result.json (spec §6), in order; error and the rest only when set
    format_version: int = FORMAT_VERSION
    score: float
    reason: str
    judge_input: JudgeInput = field(init=False, default=_NO_INPUT)
    verdicts: Annotated[tuple[Verdict, ...], Field(serialization_alias="nl_assertion_verdicts")]
    #: how many assertions were judged met
    pass_count: Annotated[int, Field(serialization_alias="nl_assertion_pass_count")] = field(
        init=False, default=0
    )
    #: how many assertions were judged
    total: Annotated[int, Field(serialization_alias="nl_assertion_total")] = field(
        init=False, default=0
    )
    #: ``pass_count / total`` (0.0 when there is nothing to judge)
    pass_rate: Annotated[float, Field(serialization_alias="nl_assertion_pass_rate")] = field(
        init=False, default=0.0
    )
    error: Annotated[str | None, Omitted] = None
    raw_reply: Annotated[str | None, Omitted] = None
    unreadable_replies: Annotated[tuple[str, ...], Omitted] = ()
    unreadable: Annotated[bool, Omitted] = False
    # not written
    system_prompt: Annotated[str, _NOT_WRITTEN]
    user_content: Annotated[str, _NOT_WRITTEN]
    usage: Annotated[Usage, _NOT_WRITTEN] = field(default_factory=Usage)
    attempts: Annotated[int, _NOT_WRITTEN] = 0
    wait_seconds: Annotated[float, _NOT_WRITTEN] = 0.0
    requests: Annotated[int, _NOT_WRITTEN] = 1

    def __post_init__(self) -> None:
        judge_input = JudgeInput(system_prompt=self.system_prompt, user_content=self.user_content)
        passed = sum(verdict.passed for verdict in self.verdicts)
        total = len(self.verdicts)
        object.__setattr__(self, "judge_input", judge_input)
        object.__setattr__(self, "pass_count", passed)
        object.__setattr__(self, "total", total)
        object.__setattr__(self, "pass_rate", passed / total if total else 0.0)
