"""A resumed run against the run it continues: what it adopts, and what must not differ.

The run's identity is declared on the settings (:class:`~.declare.Identity`): a setting
marked ``ADOPTED`` (the scenario set and how it runs: trials, seed, tasks, profile, ...) is
taken from the stored run when this session does not give it, and any identity setting given
with another value is a difference. Who plays each role is compared as its recorded player:
the model and its endpoint as its requests carry them, or the agent's code (source, and the
name, version and model an import string had at start-up: another model is another agent).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tau2_retail.models.choice import ROLES
from tau2_retail.results.records import ModelRecord, RunConfiguration
from tau2_retail.settings.declare import Identity, Setting, declarations, replaced
from tau2_retail.settings.schema import Tau2Settings

__all__ = ["Difference", "adopt_stored", "resume_differences"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Difference:
    """One value a resume would change: ``agent_model: stored 'a', now 'b'``."""

    key: str
    stored: Any
    now: Any

    def __str__(self) -> str:
        return f"{self.key}: stored {self.stored!r}, now {self.now!r}"


def adopt_stored(
    settings: Tau2Settings, stored: RunConfiguration, *, where: str
) -> tuple[Tau2Settings, dict[str, Any]]:
    """``settings`` with the stored value of each adopted identity setting this session did
    not give, and those values by name (typed). ``ArtifactError`` naming ``where`` for a stored
    value that is not one."""
    adopted: dict[Setting, Any] = {}
    for setting in declarations(type(settings)):
        if setting.identity is not Identity.ADOPTED or setting.name not in stored.settings:
            continue
        if settings.sources.get(setting.name) != "default":
            continue
        value = setting.decode(stored.settings[setting.name], where)
        if setting.value_of(settings) != value:
            adopted[setting] = value
    return replaced(settings, adopted), {s.name: value for s, value in adopted.items()}


def resume_differences(
    stored: RunConfiguration,
    *,
    now: RunConfiguration,
    model: type[Tau2Settings] = Tau2Settings,
) -> list[Difference]:
    """What differs between the stored run and this session, by key (both record the endpoints
    as their requests carry them)."""
    found = [
        Difference(key=s.name, stored=stored.settings[s.name], now=now.settings.get(s.name))
        for s in declarations(model)
        if s.identity is not None
        and s.name in stored.settings
        and stored.settings[s.name] != now.settings.get(s.name)
    ]
    for role in ROLES:
        before = _player(_record(stored, role))
        current = _player(_record(now, role))
        found += [
            Difference(key=f"{role}_{key}", stored=before.get(key), now=current.get(key))
            for key in before.keys() | current.keys()
            if before.get(key) != current.get(key)
        ]
    return sorted(found, key=lambda difference: difference.key)


def _record(configuration: RunConfiguration, role: str) -> ModelRecord | None:
    record: ModelRecord | None = getattr(configuration, role)
    return record


def _player(record: ModelRecord | None) -> Mapping[str, Any]:
    """Who played a role, as compared: the model and each endpoint field, or the agent's code
    (its source; and the name, version and model of an import string, known at start-up)."""
    if record is None:
        return {"model": None}
    if record.code:
        player = {"code": record.code.get("source")}
        if record.code.get("kind") != "fixture":  # a fixture's agent is seen only later
            for key in ("name", "version", "model"):
                player[f"code_{key}"] = record.code.get(key)
        return player
    return {"model": record.model, **dict(record.endpoint or {})}
