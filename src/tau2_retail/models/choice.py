"""Who plays a role (agent, user, judge): a built-in model by name, or a model at an endpoint.

One rule for the pytest options and the command line: ``choose_model`` checks a name against
the built-in models of the role (``tau2_retail.models.builtin``) and pairs any other name with
its endpoint configuration.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Final

from pydantic import Field

from tau2_retail.errors import ConfigError
from tau2_retail.models.base_url import shown_environment_url
from tau2_retail.models.builtin import BUILTINS_BY_ROLE, is_builtin
from tau2_retail.models.config import EndpointConfig

__all__ = ["ROLES", "ModelChoice", "choose_model"]

ROLES: Final = ("agent", "user", "judge")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelChoice:
    """The model of one role: ``endpoint`` is None exactly for a built-in model."""

    name: Annotated[str, Field(serialization_alias="model")]
    endpoint: EndpointConfig | None

    @property
    def is_builtin(self) -> bool:
        return is_builtin(self.name)

    def describe(self) -> str:
        if self.endpoint is None or self.is_builtin:
            return self.name
        where = (
            self.endpoint.base_url
            or shown_environment_url(os.environ)
            or "the openai default base URL"
        )
        return f"{self.name} at {where}"


def choose_model(role: str, name: str, endpoint: Callable[[str], EndpointConfig]) -> ModelChoice:
    """The choice for ``role``: a built-in name it accepts, else ``endpoint(name)``.

    Raises ``ConfigError`` for a built-in name the role does not have (the judge has none),
    naming the accepted ones; ``endpoint`` is called only for a non-built-in name, so its own
    ``ConfigError`` surfaces unchanged.
    """
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
    if is_builtin(name):
        allowed = BUILTINS_BY_ROLE.get(role, ())
        if name not in allowed:
            accepted = ", ".join(allowed) if allowed else "none (the judge must be an endpoint)"
            raise ConfigError(
                f"{name!r} is not a built-in {role} model; accepted built-ins: {accepted}"
            )
        return ModelChoice(name=name, endpoint=None)
    return ModelChoice(name=name, endpoint=endpoint(name))
