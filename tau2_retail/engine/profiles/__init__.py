"""Profiles: ours (``default``) and upstream tau2-bench's (``tau2``), see ``profile``."""

from __future__ import annotations

from tau2_retail.engine.profiles.profile import (
    PROFILE_NAMES,
    SCORED_ENDINGS,
    Profile,
    ProfileName,
    load_profile,
    parse_profile_name,
    request_config,
    upstream_reward,
)

__all__ = [
    "PROFILE_NAMES",
    "SCORED_ENDINGS",
    "Profile",
    "ProfileName",
    "load_profile",
    "parse_profile_name",
    "request_config",
    "upstream_reward",
]
