"""How a setting is declared: one field of the settings model, and what is derived from it.

A setting is a field of a frozen dataclass declared with :func:`setting`, which carries in the
field's metadata everything the adapters need: the parser (with its bounds), the raw default,
the help, whether a ``TAU2_*`` environment variable sets it, whether ``python -m tau2_retail
run`` takes it (and in which group of its ``--help``), whether it belongs to the run's
identity (:class:`Identity`), and how the docs and the resolver treat it. A nested record
declared with :func:`group` repeats its fields under a prefix: the agent's, the user's and
the judge's settings are one declaration used three times (``--tau2-agent-model``,
``--tau2-user-model``, ...).

:func:`declarations` walks a model and yields each setting flattened as a :class:`Setting`
(its name, such as ``agent_temperature``, its attribute path, its type and its declaration);
the pytest options, the command's flags, the recorded JSON (through the one codec, over the
field's type), the worker's plan, the resume comparison and the docs table all come from it.
Adding a setting is adding one field.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any, TypeVar

from tau2_retail import codec

__all__ = [
    "RUN_TABLE",
    "Identity",
    "Setting",
    "at",
    "build",
    "declarations",
    "group",
    "named",
    "replaced",
    "setting",
]

RUN_TABLE = "Run settings"
"""The docs table of the settings outside a group."""

_KEY = "tau2_setting"
T = TypeVar("T")

Help = str | Callable[[str, str], str]
"""A help text; in a group it is formatted with ``{who}`` (the role), or is a function of
``(who, default)`` where the text depends on the group's default."""


class Identity(StrEnum):
    """How a resumed run treats a setting of the run's identity (others may change freely).

    Who plays each role (the model and its endpoint as its requests carry them, or the agent's
    code) is compared through the role's recorded player (:mod:`.resume`), so the settings of
    a role and of the endpoints carry no flag.
    """

    #: a resume refuses a different value
    KEPT = "kept"
    #: a resume refuses a different value, and adopts the stored one when it is not given
    ADOPTED = "adopted"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Group:
    who: str
    run: str | None
    table: str
    defaults: Mapping[str, str]


def setting(
    parse: Callable[[str], Any],
    *,
    help: Help,
    default: str = "",
    env: bool = False,
    name: str | None = None,
    run: str | None = None,
    identity: Identity | None = None,
    empty: Any = None,
    refuse_blank: str = "",
    path: bool = False,
    default_note: Callable[[], str] | None = None,
    secret: bool = False,
) -> Any:
    """A field declaring one setting.

    - ``parse``: raw text to the typed value, or :class:`~.parsers.InvalidValue`.
    - ``default``: the raw default text (an empty default gives ``empty``).
    - ``env``: a ``TAU2_<NAME>`` environment variable sets it (a deployment detail).
    - ``name``: the option's name where it differs from the attribute (``agent_code`` is
      ``--tau2-agent``); the name is also the ini key, the variable and the recorded key.
    - ``run``: also a flag of ``python -m tau2_retail run``, in this group of its ``--help``.
    - ``identity``: a resumed run refuses a change (:class:`Identity`).
    - ``refuse_blank``: an empty value on the command line (an unset CI variable,
      ``--tau2-baseline=$BASELINE``) is refused, saying what omitting the option means (the
      task ids: ``all``); else it is taken as unset, which for these would mean "all" or no gate.
    - ``path``: a relative value in a configuration file is relative to that file's folder.
    - ``default_note``: where the default really is, found when ``--help`` is shown.
    - ``secret``: its value may hold a credential: left out of the settings' ``repr`` (the
      ``tau2_settings`` fixture printed, pytest's ``--debug`` log).
    """
    declared = Setting(
        name=name or "",
        parse=parse,
        default=default,
        help=help if isinstance(help, str) else "",
        help_of=None if isinstance(help, str) else help,
        env=env,
        run_group=run,
        identity=identity,
        empty=empty,
        refuse_blank=refuse_blank,
        path=path,
        default_note=default_note,
    )
    return dataclasses.field(metadata={_KEY: declared}, repr=not secret)


def group(
    *, who: str, table: str, run: str | None = None, defaults: Mapping[str, str] | None = None
) -> Any:
    """A field holding a record of settings, repeated under the field's name as a prefix.

    ``who`` fills ``{who}`` in its fields' help; ``table`` is its table on the configuration
    page; ``run`` the group of ``python -m tau2_retail run --help`` of all its fields (None:
    not flags of the command); ``defaults`` overrides fields' raw defaults by attribute name.
    """
    return dataclasses.field(
        metadata={_KEY: _Group(who=who, run=run, table=table, defaults=dict(defaults or {}))}
    )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """One setting as :func:`declarations` yields it, flattened: what every adapter reads.

    :func:`setting` stores its declaration in the same record, before the walk sets the name,
    the attribute path, the type and what a group adds.
    """

    #: ``agent_temperature``: the option without ``--tau2-``, the ini key without ``tau2_``,
    #: the recorded key
    name: str
    parse: Callable[[str], Any]
    default: str
    help: str
    #: the attribute path in the model: ``("agent", "temperature")``
    attr_path: tuple[str, ...] = ()
    #: the field's type: the recorded JSON is the codec's form of it
    annotation: Any = None
    #: the declared help as a function of a group's ``(who, default)``
    help_of: Callable[[str, str], str] | None = None
    env: bool = False
    #: the value of an unset setting whose default is empty
    empty: Any = None
    refuse_blank: str = ""
    path: bool = False
    default_note: Callable[[], str] | None = None
    #: the group of ``python -m tau2_retail run --help``, None when the command lacks it
    run_group: str | None = None
    identity: Identity | None = None
    #: the table of the configuration page
    table: str = RUN_TABLE

    @property
    def flag(self) -> str:
        return "--tau2-" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        return "tau2_" + self.name

    @property
    def cli(self) -> bool:
        """Also a flag of ``python -m tau2_retail run``: a setting of one scenario."""
        return self.run_group is not None

    @property
    def cli_flag(self) -> str:
        """The flag of ``python -m tau2_retail run``: the option without ``tau2-``."""
        return "--" + self.name.replace("_", "-")

    @property
    def env_var(self) -> str | None:
        return "TAU2_" + self.name.upper() if self.env else None

    @property
    def metavar(self) -> str:
        return self.name.split("_")[-1].upper()

    @property
    def kind(self) -> type:
        """What a TOML value of the setting may also be: ``bool``, ``int``, ``float`` or ``str``."""
        members = typing.get_args(self.annotation) or (self.annotation,)
        plain = [member for member in members if member is not type(None)]
        if len(plain) == 1 and plain[0] in (bool, int, float):
            return typing.cast(type, plain[0])
        return str

    def value_of(self, model: object) -> Any:
        """The setting's value in ``model`` (attribute access along its path)."""
        return functools.reduce(getattr, self.attr_path, model)

    def encode(self, value: Any) -> Any:
        """``value`` as plain JSON, by the codec over the field's type."""
        return codec.encode(value, self.annotation)

    def decode(self, plain: Any, where: str) -> Any:
        """A recorded value as typed; ``ArtifactError`` naming ``where`` and the setting when
        it is not one."""
        # read as the value of its key, so that an error names the setting
        recorded: Any = dict.__class_getitem__((str, self.annotation))
        return codec.decode_value(recorded, {self.name: plain}, where)[self.name]


_FOUND: dict[type, tuple[Setting, ...]] = {}


def declarations(model: type) -> tuple[Setting, ...]:
    """Every setting of ``model``, flattened, in field order (``pytest --help``'s order)."""
    found = _FOUND.get(model)
    if found is None:
        found = _FOUND[model] = tuple(_walk(model))
    return found


def _walk(model: type) -> list[Setting]:
    found: list[Setting] = []
    hints = typing.get_type_hints(model, include_extras=True)
    for field in dataclasses.fields(model):
        meta = field.metadata.get(_KEY)
        if isinstance(meta, Setting):
            if meta.help_of is not None:
                raise TypeError(f"{model.__name__}.{field.name}: a help function needs a group")
            found.append(_placed(meta, (field.name,), hints[field.name]))
        elif isinstance(meta, _Group):
            found.extend(_members(meta, field.name, hints[field.name]))
    return found


def _members(meta: _Group, prefix: str, record: type) -> list[Setting]:
    hints = typing.get_type_hints(record, include_extras=True)
    members = []
    for field in dataclasses.fields(record):
        declared = field.metadata.get(_KEY)
        if not isinstance(declared, Setting):
            raise TypeError(f"{record.__name__}.{field.name}: a group holds settings only")
        default = meta.defaults.get(field.name, declared.default)
        shown = (
            declared.help.format(who=meta.who)
            if declared.help_of is None
            else declared.help_of(meta.who, default)
        )
        placed = _placed(declared, (prefix, field.name), hints[field.name])
        members.append(
            dataclasses.replace(
                placed,
                default=default,
                help=shown,
                help_of=None,
                run_group=meta.run,
                table=meta.table,
            )
        )
    return members


def _placed(declared: Setting, attr_path: tuple[str, ...], annotation: Any) -> Setting:
    name = declared.name or "_".join(attr_path)
    return dataclasses.replace(declared, name=name, attr_path=attr_path, annotation=annotation)


def named(model: type) -> Mapping[str, Setting]:
    """The settings of ``model`` by name."""
    return {setting.name: setting for setting in declarations(model)}


def at(model: type, *attr_path: str) -> Setting:
    """The setting of ``model`` at an attribute path: ``at(Tau2Settings, "agent", "model")``."""
    for setting in declarations(model):
        if setting.attr_path == attr_path:
            return setting
    raise KeyError(f"{model.__name__} declares no setting at {'.'.join(attr_path)}")


def _split(
    values: Iterable[tuple[tuple[str, ...], Any]],
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Values by attribute path as the model's own fields and each group's fields."""
    flat: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for (first, *rest), value in values:
        if rest:
            nested.setdefault(first, {})[rest[0]] = value
        else:
            flat[first] = value
    return flat, nested


def build(model: type[T], values: Mapping[str, Any], **others: Any) -> T:
    """A ``model`` holding ``values`` (by setting name), with its other fields ``others``."""
    flat, nested = _split((s.attr_path, values[s.name]) for s in declarations(model))
    hints = typing.get_type_hints(model, include_extras=True)
    for name, members in nested.items():
        flat[name] = hints[name](**members)
    return model(**flat, **others)


def replaced(model: T, changes: Mapping[Setting, Any]) -> T:
    """A copy of ``model`` with the settings ``changes`` names set to their values."""
    flat, nested = _split((s.attr_path, value) for s, value in changes.items())
    for name, members in nested.items():
        flat[name] = dataclasses.replace(getattr(model, name), **members)
    return dataclasses.replace(model, **flat) if flat else model  # type: ignore[type-var]
