"""One codec for every record the suite writes or reads: the run files, ``metrics.json``,
transcripts, judge results and cache entries.

The records stay frozen dataclasses; pydantic's ``TypeAdapter`` reads and writes them all with
one set of rules, so no record carries a hand-written ``to_json``/``from_json``:

- keys are the field names (or their ``serialization_alias``), in field order; a derived key
  (a rate, ``retries``) is a ``field(init=False)`` set in ``__post_init__``: written, and
  recomputed when read; ``Field(exclude=True)`` keeps a field out of the file;
- a field marked :data:`Omitted` is left out while it is unset (None, False, 0, empty) and
  reads as its default when absent; every other field is always written;
- reading is strict JSON: no NaN or infinity, no string for a number, no number for a flag,
  unknown keys ignored (derived values such as ``retries`` read back as recomputed);
- a failure is an :class:`~tau2_retail.errors.ArtifactError` naming the file and the field.

Every JSON artifact states its format, :data:`FORMAT_VERSION`, as its first key
``format_version`` (a record declares it as its first field, and :func:`decode` checks it; a
file written as plain JSON gets it from :func:`versioned`, and its reader checks it with
:func:`format_problem`). A file of
another version, or of none (a pre-release version wrote it), is an
:class:`~tau2_retail.errors.ArtifactFormatError` naming the file, the version found and the one
read: nothing reads it as if it were this format.

The text form (indent, key order, final newline) is :func:`tau2_retail.results.atomic.dumps_json`;
:func:`encode` gives the JSON value it formats, so artifacts stay byte-compatible. A record
whose file has another shape than its fields keeps one hook pair (``model_serializer`` and
``model_validator``): ``RunSummary`` only. ``tools`` (standard library only) keeps its own two
``to_json``.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping, Sized
from pathlib import Path
from typing import Annotated, Any, Final, TypeAlias, TypeVar

from pydantic import ConfigDict, Field, PlainSerializer, Strict, TypeAdapter, ValidationError

from tau2_retail.errors import ArtifactError, ArtifactFormatError

__all__ = [
    "FORMAT_KEY",
    "FORMAT_VERSION",
    "Items",
    "Omitted",
    "decode",
    "decode_value",
    "encode",
    "format_problem",
    "read",
    "rounded",
    "versioned",
]

FORMAT_VERSION: Final = 1
"""The format of the JSON artifacts this version writes and the only one it reads."""
FORMAT_KEY: Final = "format_version"

T = TypeVar("T")

Items: TypeAlias = Annotated[tuple[T, ...], Strict(False)]
"""``Items[X]``: a tuple field of a record whose ``model_validator(mode="before")`` reshapes
the file: the reshaped value is read as Python, where a strict tuple refuses a JSON list."""


def _is_empty(value: object) -> bool:
    if value is None or value is False:
        return True
    if isinstance(value, int) and not isinstance(value, bool):
        return value == 0
    return isinstance(value, Sized) and not isinstance(value, str) and len(value) == 0


Omitted: Final = Field(exclude_if=_is_empty)
"""``Annotated[T, Omitted]``: written only when set, that is not None, False, 0 or an empty
list or object (a string is left out only when None; a float is always written). Records of
runs without the feature keep their old shape."""


def rounded(ndigits: int) -> PlainSerializer:
    """``Annotated[float, rounded(n)]``: written rounded to ``n`` digits (None stays None)."""

    def serialize(value: float | None) -> float | None:
        return None if value is None else round(value, ndigits)

    return PlainSerializer(serialize)


_CONFIG: Final = ConfigDict(strict=True, allow_inf_nan=False)


def versioned(value: Mapping[str, Any]) -> dict[str, Any]:
    """``value`` (a file's JSON object) with ``format_version`` first."""
    return {FORMAT_KEY: FORMAT_VERSION, **value}


def _is_versioned(kind: Any) -> bool:
    """Whether ``kind`` is a record that states the format (a ``format_version`` field), or a
    list of such records (``all_metrics.json``)."""
    if typing.get_origin(kind) is list:
        return _is_versioned(typing.get_args(kind)[0])
    return dataclasses.is_dataclass(kind) and any(
        f.name == FORMAT_KEY for f in dataclasses.fields(kind)
    )


def _objects(parsed: Any) -> list[Mapping[str, Any]]:
    items = parsed if isinstance(parsed, list) else [parsed]
    return [item for item in items if isinstance(item, dict)]


def format_problem(data: Mapping[str, Any]) -> str | None:
    """What is wrong with the format version a file's JSON object states (None: it is ours)."""
    found = data.get(FORMAT_KEY)
    if found == FORMAT_VERSION and type(found) is int:
        return None
    stated = (
        f"format_version {found!r}"
        if FORMAT_KEY in data
        else "no format_version (a pre-release version of tau2_retail wrote it)"
    )
    return (
        f"{stated}; this version reads format_version {FORMAT_VERSION} only (re-run the "
        "scenarios, or read the folder with the version that wrote it)"
    )


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(kind: Any) -> TypeAdapter[Any]:
    # Built once per type, on first use (a few ms each): nothing is built at import.
    adapter = _ADAPTERS.get(kind)
    if adapter is None:
        if dataclasses.is_dataclass(kind):
            # a dataclass carries its configuration itself (pydantic refuses one given beside
            # it); the records nested in it inherit it
            if "__pydantic_config__" not in vars(kind):
                kind.__pydantic_config__ = _CONFIG  # type: ignore[union-attr]
            adapter = TypeAdapter(kind)
        else:
            adapter = TypeAdapter(kind, config=_CONFIG)
        _ADAPTERS[kind] = adapter
    return adapter


def encode(value: object, kind: Any = None) -> Any:
    """``value`` (a record, or a ``kind`` such as ``list[Record]``) as plain JSON values."""
    return _adapter(type(value) if kind is None else kind).dump_python(
        value, mode="json", by_alias=True
    )


def decode(kind: type[T], data: str | bytes, where: str) -> T:
    """A ``kind`` read from JSON text; :class:`ArtifactError` names ``where`` and the field."""
    objects = _objects(_parsed(data)) if _is_versioned(kind) else []
    # a file stating another version is refused before its fields are read ...
    _check_format([o for o in objects if FORMAT_KEY in o], where)
    try:
        value: T = _adapter(kind).validate_json(data)
    except ValidationError as error:
        raise ArtifactError(_message(error, where)) from None
    # ... one stating none once they read (a truncated file is named as truncated)
    _check_format(objects, where)
    return value


def _parsed(data: str | bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None  # the validation names what is wrong


def _check_format(objects: list[Mapping[str, Any]], where: str) -> None:
    for item in objects:
        problem = format_problem(item)
        if problem is not None:
            raise ArtifactFormatError(f"{where}: {problem}")


def decode_value(kind: type[T], value: object, where: str = "a JSON value") -> T:
    """A ``kind`` read from an already parsed JSON value, with the same rules as :func:`decode`."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ArtifactError(f"{where}: not a JSON value ({error})") from None
    return decode(kind, text, where)


def read(kind: type[T], path: Path) -> T:
    """A ``kind`` read from the file at ``path``; :class:`ArtifactError` naming the file when
    it cannot be read, is not JSON, or a field is missing or of the wrong type."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ArtifactError(f"cannot read {path}: {error}") from error
    return decode(kind, data, str(path))


_EXPECTED: Final = {
    "int_type": "an integer",
    "int_from_float": "an integer",
    "string_type": "a string",
    "bool_type": "true or false",
    "float_type": "a number",
    "finite_number": "a finite number",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a JSON object",
    "dataclass_type": "a JSON object",
    "enum": "one of the known values",
}


def _message(error: ValidationError, where: str) -> str:
    # a wrong value says more than a missing key (a truncated file lacks all the later ones)
    errors = error.errors(include_url=False)
    first = next((e for e in errors if e["type"] != "missing"), errors[0])
    kind = first["type"]
    if kind in ("json_invalid", "json_type"):
        return f"{where}: not valid JSON ({first['msg']})"
    loc = ".".join(str(part) for part in first["loc"])
    if kind in ("dict_type", "dataclass_type", "model_type"):
        place = f"{where}: {loc}" if loc else where
        return f"{place}: expected a JSON object, got {type(first['input']).__name__}"
    if kind == "value_error":  # a check of the record's own: its message says what is wrong
        return f"{where}: {loc!r}: {first.get('ctx', {}).get('error', first['msg'])}"
    if kind == "missing":
        problem = "is missing"
    else:
        expected = _EXPECTED.get(kind, first["msg"][0].lower() + first["msg"][1:])
        problem = f"must be {expected}, got {first['input']!r:.60}"
    # no advice here: re-running a scenario repairs a metrics.json, not a run_args.json, a
    # summary or an upstream file (each reader says what to do, where it has advice)
    return f"{where}: {loc!r} {problem} (a truncated or foreign file)"
