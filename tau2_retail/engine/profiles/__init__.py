"""Profiles: ours (``default``) and upstream tau2-bench's (``tau2``).

Each is a :class:`Profile` (the text it shows the models, see ``profile``) holding a
:class:`ProfilePolicy` (every decision it makes, see ``policy``); :func:`policy_for` finds the
policy of a profile a run records. Nothing outside this package asks which profile it is.
"""

from __future__ import annotations

from tau2_retail.engine.profiles.policy import (
    PROFILE_NAMES,
    SCORED_ENDINGS,
    UPSTREAM_PROFILE,
    ProfileName,
    ProfilePolicy,
    ScenarioFacts,
    Score,
    parse_profile_name,
    policy_for,
    upstream_reward,
)
from tau2_retail.engine.profiles.profile import Profile, load_profile

__all__ = [
    "PROFILE_NAMES",
    "SCORED_ENDINGS",
    "UPSTREAM_PROFILE",
    "Profile",
    "ProfileName",
    "ProfilePolicy",
    "ScenarioFacts",
    "Score",
    "load_profile",
    "parse_profile_name",
    "policy_for",
    "upstream_reward",
]
