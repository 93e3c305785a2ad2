"""An outage of a code agent's own backend, found in what its code raised.

An agent given as code marks an outage by raising ``AgentInfraError``. An agent framework calls
its model itself and raises its own classes, never that one: pydantic-ai raises
``ModelConnectionError``, ``ModelServerError`` or ``ModelRateLimitError`` *from* the ``openai``
client's error (``raise ... from error``), langchain-openai raises subclasses of the client's
classes (``OpenAIConnectionError`` is an ``openai.APIConnectionError``), and a fallback over
several models raises an exception group of them (pydantic-ai's ``FallbackExceptionGroup``).
The team's own ``AgentInfraError``, raised where the framework calls it (a tool, a model
wrapper), comes back wrapped in the same ways. Read as the agent's failure, an endpoint down
for an hour scored every scenario of that hour as failed (found running pydantic-ai and
LangGraph agents against a loopback server that dropped every connection).

So an exception is an outage when it, or an exception it was raised from (``__cause__``, the
explicit chain only: an error raised while handling another is not that error), is

- an ``AgentInfraError``;
- the ``openai`` client's ``APIConnectionError`` (``APITimeoutError`` included): the backend
  did not answer;
- the client's ``APIStatusError`` with a status the endpoint path retries
  (:data:`~tau2_retail.models.attempt_failure.RETRYABLE_STATUSES`: 429 and the 5xx of an
  overloaded or failing server);

or an exception group whose every member is one. Any other error status (a 400 about the
request the framework built, a 401 for a wrong key, a 404 for a wrong model name) stays the
agent's failure: its code or configuration made the request, and waiting does not heal it.
"""

from __future__ import annotations

import sys
from typing import Final

from tau2_retail.errors import AgentInfraError

__all__ = ["backend_outage"]

# a cause chain longer than this is not a framework's wrapping (nor worth walking)
_MAX_CHAIN: Final = 20


def backend_outage(error: BaseException) -> str | None:
    """What makes ``error`` an outage of the agent's backend (one line: the ``AgentInfraError``'s
    text, or the client error's class and text), or None when it is not one."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and len(seen) < _MAX_CHAIN:
        seen.add(id(current))
        found = _outage_itself(current)
        if found is not None:
            return found
        current = current.__cause__
    return None


def _outage_itself(error: BaseException) -> str | None:
    if isinstance(error, AgentInfraError):
        return _text(error)
    if isinstance(error, BaseExceptionGroup):
        found = [backend_outage(member) for member in error.exceptions]
        if found and all(text is not None for text in found):
            return found[0]
        return None
    # the agent's code raised a client error only if it imported the client: no import here
    # (the plugin imports ``openai`` only for a session with an endpoint)
    if "openai" not in sys.modules:
        return None
    import openai

    from tau2_retail.models.attempt_failure import RETRYABLE_STATUSES

    if isinstance(error, openai.APIConnectionError) or (
        isinstance(error, openai.APIStatusError) and error.status_code in RETRYABLE_STATUSES
    ):
        return f"{type(error).__module__}.{type(error).__qualname__}: {_text(error)}"
    return None


def _text(error: BaseException) -> str:
    try:
        return str(error)
    except BaseException:  # an exception whose __str__ raises: the agent's, say so
        return "<unprintable>"
