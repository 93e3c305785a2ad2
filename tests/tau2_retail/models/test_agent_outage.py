"""An outage of a code agent's backend inside an agent framework's exceptions: class chains
shaped like pydantic-ai's and langchain-openai's (neither is installed here)."""

from __future__ import annotations

import openai
import pytest

from tau2_retail.errors import AgentInfraError
from tau2_retail.models.agent_outage import backend_outage
from tau2_retail.models.sdk_transport import LIBRARY

_REQUEST = LIBRARY.Request("POST", "http://127.0.0.1:8080/v1/chat/completions")


def _status(status: int) -> openai.APIStatusError:
    response = LIBRARY.Response(status, request=_REQUEST)
    kinds: dict[int, type[openai.APIStatusError]] = {
        400: openai.BadRequestError,
        401: openai.AuthenticationError,
        404: openai.NotFoundError,
        429: openai.RateLimitError,
        500: openai.InternalServerError,
        503: openai.InternalServerError,
    }
    return kinds[status](f"Error code: {status}", response=response, body=None)


class AgentRunError(RuntimeError):
    """pydantic-ai's base of its run errors (``ModelAPIError`` and ``UsageLimitExceeded``)."""


class ModelConnectionError(AgentRunError):
    pass


class OpenAIConnectionError(openai.APIConnectionError):
    """langchain-openai's: a subclass of the client's own class."""


def _raised_from(wrapper: BaseException, cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as error:
            raise wrapper from error
    except BaseException as raised:
        return raised


def test_a_connection_error_wrapped_by_a_framework_is_an_outage() -> None:
    error = _raised_from(
        ModelConnectionError("Connection error."), openai.APIConnectionError(request=_REQUEST)
    )
    assert backend_outage(error) == "openai.APIConnectionError: Connection error."


@pytest.mark.parametrize("status", [429, 500, 503])
def test_a_retryable_status_wrapped_by_a_framework_is_an_outage(status: int) -> None:
    cause = _status(status)
    found = backend_outage(_raised_from(AgentRunError(f"status_code: {status}"), cause))
    assert found == f"openai.{type(cause).__name__}: Error code: {status}"


def test_a_subclass_of_the_clients_error_is_an_outage() -> None:
    found = backend_outage(OpenAIConnectionError(request=_REQUEST))
    assert found is not None
    assert found.endswith("OpenAIConnectionError: Connection error.")
    assert backend_outage(openai.APITimeoutError(request=_REQUEST)) is not None


def test_the_teams_own_agent_infra_error_is_found_inside_a_wrapper() -> None:
    error = _raised_from(RuntimeError("tool failed"), AgentInfraError("our gateway is down"))
    assert backend_outage(error) == "our gateway is down"


def test_a_group_is_an_outage_when_every_member_is_one() -> None:
    down = openai.APIConnectionError(request=_REQUEST)
    assert backend_outage(ExceptionGroup("all fallbacks failed", [down, _status(503)]))
    assert backend_outage(ExceptionGroup("mixed", [down, ValueError("bug")])) is None


@pytest.mark.parametrize("status", [400, 401, 404])
def test_a_status_that_waiting_does_not_heal_is_the_agents_failure(status: int) -> None:
    assert backend_outage(_raised_from(AgentRunError("rejected"), _status(status))) is None


def test_an_error_raised_while_handling_an_outage_is_the_agents_own() -> None:
    def fallback() -> None:
        try:
            raise openai.APIConnectionError(request=_REQUEST)
        except openai.APIConnectionError:
            raise KeyError("fallback bug")  # noqa: B904 - the implicit context, on purpose

    with pytest.raises(KeyError) as raised:
        fallback()
    assert raised.value.__context__ is not None
    assert backend_outage(raised.value) is None


def test_anything_else_is_not_an_outage() -> None:
    assert backend_outage(ValueError("bad prompt")) is None
    assert backend_outage(KeyboardInterrupt()) is None
    loop = RuntimeError("loop")
    loop.__cause__ = loop
    assert backend_outage(loop) is None
