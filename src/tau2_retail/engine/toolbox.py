"""The toolbox a loop-style agent gets: the scenario's tools bound to its database.

The conversation owns what a call does (run it through the dispatcher, record it as an
assistant tool call and its result, count steps and errors, honour the limits); this module
gives the agent its three views of it: ``call``, the OpenAI ``schemas`` and plain Python
``functions`` built from those schemas (signature, annotations and a Google-style docstring,
which is what frameworks such as the OpenAI Agents SDK or pydantic-ai build tools from). With
``record_usage`` the agent tells the tokens its own model requests spent, which the suite
never sees: checked here, counted by the conversation.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from tau2_retail.models.messages import MAX_TOKEN_COUNT, Usage

__all__ = ["ScenarioToolbox", "tool_function"]

_JSON_TYPES: Final[Mapping[str, Any]] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict[str, Any],
}


def _annotation(schema: Mapping[str, Any]) -> Any:
    kind = schema.get("type")
    if kind == "array":
        return list[_annotation(schema.get("items") or {})]  # type: ignore[misc]
    return _JSON_TYPES.get(str(kind), Any)


def tool_function(schema: Mapping[str, Any], call: Callable[[str, dict[str, Any]], str]) -> Any:
    """A plain function with the signature and docstring of the OpenAI tool ``schema`` that
    runs ``call(name, arguments)``; optional arguments passed as None are left out (as a
    model that omits them)."""
    function = schema["function"]
    name = str(function["name"])
    parameters = function.get("parameters") or {}
    properties: Mapping[str, Mapping[str, Any]] = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())
    ordered = sorted(properties, key=lambda key: key not in required)  # required first
    signature_parameters = []
    annotations: dict[str, Any] = {}
    for key in ordered:
        annotation = _annotation(properties[key])
        if key not in required:
            annotation = annotation | None
        annotations[key] = annotation
        signature_parameters.append(
            inspect.Parameter(
                key,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=inspect.Parameter.empty if key in required else None,
                annotation=annotation,
            )
        )
    annotations["return"] = str
    signature = inspect.Signature(signature_parameters, return_annotation=str)

    def tool(*args: Any, **kwargs: Any) -> str:
        bound = signature.bind(*args, **kwargs)
        arguments = {
            key: value
            for key, value in bound.arguments.items()
            if value is not None or key in required
        }
        return call(name, arguments)

    lines = [str(function.get("description") or name).strip()]
    if ordered:
        lines += ["", "Args:"]
        lines += [
            f"    {key}: {str(properties[key].get('description') or key).strip()}"
            for key in ordered
        ]
    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = "\n".join(lines)
    tool.__annotations__ = annotations
    tool.__signature__ = signature  # type: ignore[attr-defined]
    tool.__module__ = __name__
    return tool


def _count(name: str, value: object) -> int:
    """A count ``record_usage`` was given: an ``int`` >= 0 (a bool is not one), at most
    :data:`~tau2_retail.models.messages.MAX_TOKEN_COUNT` (a larger one is recorded as that)."""
    if isinstance(value, bool) or not isinstance(value, int):
        got = f"{type(value).__name__} {value!r}"
        raise TypeError(f"toolbox.record_usage(): {name} must be an int, got {got}")
    if value < 0:
        raise ValueError(f"toolbox.record_usage(): {name} must be >= 0, got {value}")
    return min(value, MAX_TOKEN_COUNT)


def _usage_of(
    *, input_tokens: object, output_tokens: object, requests: object, cached_tokens: object
) -> Usage:
    """The :class:`Usage` of one ``record_usage`` call, its counts checked (``TypeError``,
    ``ValueError``: the agent's error, raised in its own code)."""
    prompt = _count("input_tokens", input_tokens)
    cached_prompt = _count("cached_tokens", cached_tokens)
    if cached_prompt > prompt:
        raise ValueError(
            f"toolbox.record_usage(): cached_tokens ({cached_prompt}) is part of "
            f"input_tokens ({prompt}), so it cannot be larger"
        )
    return Usage(
        n_calls=_count("requests", requests),
        prompt=prompt,
        completion=_count("output_tokens", output_tokens),
        cached_prompt=cached_prompt,
    )


class ScenarioToolbox:
    """The :class:`~tau2_retail.models.agent.Toolbox` of one scenario.

    ``run(name, arguments_json, call_id)`` executes and records one call (the conversation's);
    ``ended()`` says whether an ending tool has succeeded; ``record(usage)`` counts the tokens
    the agent recorded.
    """

    def __init__(
        self,
        *,
        schemas: Sequence[Mapping[str, Any]],
        run: Callable[[str, str, str | None], str],
        ended: Callable[[], bool],
        record: Callable[[Usage], None],
    ) -> None:
        self._schemas = [copy.deepcopy(dict(schema)) for schema in schemas]
        self._run = run
        self._ended = ended
        self._record = record
        self._functions: dict[str, Callable[..., str]] | None = None

    @property
    def schemas(self) -> list[dict[str, Any]]:
        """The profile's tools in OpenAI format (a fresh copy: the agent may change it)."""
        return copy.deepcopy(self._schemas)

    @property
    def functions(self) -> Mapping[str, Callable[..., str]]:
        """Tool name -> a plain function with the tool's signature and docstring."""
        if self._functions is None:
            self._functions = {
                str(schema["function"]["name"]): tool_function(schema, self.call)
                for schema in self._schemas
            }
        return self._functions

    @property
    def ended(self) -> bool:
        return self._ended()

    def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        call_id: str | None = None,
    ) -> str:
        """Run tool ``name`` with ``arguments`` (a dict, or the raw JSON text a model would
        send) and return the text a model would get. ``call_id``: the id your model gave the
        call, recorded in the transcript (default ``toolbox_<n>``)."""
        raw = arguments if isinstance(arguments, str) else json.dumps(dict(arguments or {}))
        return self._run(str(name), raw, call_id)

    def record_usage(
        self, *, input_tokens: int, output_tokens: int, requests: int = 1, cached_tokens: int = 0
    ) -> None:
        """Count tokens your own model requests spent: ``requests`` requests (0: more tokens
        of requests already counted) of ``input_tokens`` in, ``cached_tokens`` of them
        read from the provider's prompt cache, and ``output_tokens`` out. They add to the
        agent role's ``token_usage`` and, with the agent's ``model`` in ``--tau2-prices``, to
        its cost. Each count is an ``int`` >= 0 (else ``TypeError`` or ``ValueError``)."""
        self._record(
            _usage_of(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                requests=requests,
                cached_tokens=cached_tokens,
            )
        )

    def __repr__(self) -> str:
        return f"<ScenarioToolbox {len(self._schemas)} tools>"
