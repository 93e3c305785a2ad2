"""The names of the profiles: those a run is configured with, and those a run's files record.

A scenario's ``metrics.json`` names the profile that scored it (:data:`ProfileName`); a run's
``summary.json`` names its scenarios' profile, or ``mixed`` when they disagree
(:data:`RunProfile`). Both are checked where the files are read: any other name is an
:class:`~tau2_retail.errors.ArtifactError` naming the file and the names it reads.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Final

from pydantic import AfterValidator

__all__ = [
    "MIXED",
    "PROFILE_NAMES",
    "RUN_PROFILE_NAMES",
    "ProfileName",
    "RunProfile",
    "ScenarioProfile",
]


class ProfileName(StrEnum):
    DEFAULT = "default"
    TAU2 = "tau2"


PROFILE_NAMES: Final = tuple(name.value for name in ProfileName)

MIXED: Final = "mixed"
"""The profile of a run whose scenarios ran in different profiles (never configured)."""

RUN_PROFILE_NAMES: Final = (*PROFILE_NAMES, MIXED)


def _one_of(names: tuple[str, ...]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in names:
            known = ", ".join(repr(name) for name in names)
            raise ValueError(f"profile {value!r} is not known (this version reads {known})")
        return value

    return check


RunProfile = Annotated[str, AfterValidator(_one_of(RUN_PROFILE_NAMES))]
"""A profile name as a run's ``summary.json`` records it; reading any other is an error."""

ScenarioProfile = Annotated[str, AfterValidator(_one_of(PROFILE_NAMES))]
"""The profile a scenario's ``metrics.json`` names (a scenario is never ``mixed``)."""
