"""Profiles: ours (``default``) and upstream tau2-bench's (``tau2``).

Each is a :class:`Profile` (the text it shows the models, see ``profile``) holding a
:class:`ProfilePolicy` (every decision it makes, see ``policy``); :func:`policy_for` finds the
policy of a profile a run records (``mixed``: a run of several profiles; any other name is an
error). Nothing outside this package asks which profile it is or reads a flag of it: the
policy's methods answer (the headline, the signals it scores, how its reward is recorded).
"""

from __future__ import annotations

from tau2_retail.engine.profile_names import (
    MIXED,
    PROFILE_NAMES,
    RUN_PROFILE_NAMES,
    ProfileName,
    RunProfile,
    ScenarioProfile,
)
from tau2_retail.engine.profiles.policy import (
    SCORED_ENDINGS,
    UPSTREAM_PROFILE,
    ProfilePolicy,
    ScenarioFacts,
    Score,
    parse_profile_name,
    policy_for,
    upstream_reward,
)
from tau2_retail.engine.profiles.profile import Profile, load_profile

__all__ = [
    "MIXED",
    "PROFILE_NAMES",
    "RUN_PROFILE_NAMES",
    "SCORED_ENDINGS",
    "UPSTREAM_PROFILE",
    "Profile",
    "ProfileName",
    "ProfilePolicy",
    "RunProfile",
    "ScenarioFacts",
    "ScenarioProfile",
    "Score",
    "load_profile",
    "parse_profile_name",
    "policy_for",
    "upstream_reward",
]
