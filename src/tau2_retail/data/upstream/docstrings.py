"""Upstream's docstring convention: Google style, read as the ``docstring_parser`` package does.

Upstream's ``Tool`` turns a function's docstring into the tool's description (short
description, then a blank line and the long description when there is one) and each parameter's
description. This module reproduces that reading for the parts a schema uses: the text is
cleaned as PEP 257 says (``inspect.cleandoc``), the description ends at the first section
title (``Args:``, ``Returns:``, ...) alone on its line; the short description is the first line,
the long one the rest, stripped. In a parameter section every line at the section's own indent
starts an entry ``name: description``; continuation lines are dedented and joined with newlines.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

__all__ = ["Docstring", "parse_google_docstring"]

_SECTION_TITLES = (
    "Arguments",
    "Args",
    "Parameters",
    "Params",
    "Raises",
    "Exceptions",
    "Except",
    "Attributes",
    "Example",
    "Examples",
    "Returns",
    "Yields",
)
_PARAMETER_SECTIONS = frozenset({"Arguments", "Args", "Parameters", "Params"})
_TITLE = re.compile(
    "^(" + "|".join(f"({title})" for title in _SECTION_TITLES) + "):[ \t\r\f\v]*$", re.M
)
_TYPED_NAME = re.compile(r"\s*(.+?)\s*\(\s*(.*[^\s]+)\s*\)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Docstring:
    """The parts of a docstring that reach a tool schema."""

    short_description: str | None
    long_description: str | None
    params: dict[str, str]

    @property
    def description(self) -> str | None:
        """Upstream's tool description: short, or short + blank line + long."""
        if not self.short_description:
            return None
        if not self.long_description:
            return self.short_description
        return f"{self.short_description}\n\n{self.long_description}"


def _parameter_description(text: str) -> str:
    description = text.split(":", 1)[1] if ":" in text else ""
    if description:
        description = description[1:] if description[0] == " " else description
        if "\n" in description:
            first, rest = description.split("\n", 1)
            description = first + "\n" + inspect.cleandoc(rest)
        description = description.strip("\n")
    return description


def _parameter_name(text: str) -> str:
    before = text.split(":", 1)[0]
    typed = _TYPED_NAME.match(before)
    return typed.group(1) if typed else before


def parse_google_docstring(text: str | None) -> Docstring:
    """The description and parameter descriptions of a Google-style docstring."""
    if not text:
        return Docstring(short_description=None, long_description=None, params={})
    text = inspect.cleandoc(text)
    first_title = _TITLE.search(text)
    description = text[: first_title.start()] if first_title else text
    sections = text[first_title.start() :] if first_title else ""
    short, _, rest = description.partition("\n")
    long_description = rest.strip() or None
    params: dict[str, str] = {}
    titles = list(_TITLE.finditer(sections))
    for index, title in enumerate(titles):
        if title.group(1) not in _PARAMETER_SECTIONS:
            continue
        end = titles[index + 1].start() if index + 1 < len(titles) else len(sections)
        chunk = sections[title.end() : end].strip("\n")
        indent = re.match(r"^\s+", chunk)
        if indent is None:
            continue
        starts = list(re.finditer("^" + indent.group() + r"(?=\S)", chunk, flags=re.M))
        for position, start in enumerate(starts):
            stop = starts[position + 1].start() if position + 1 < len(starts) else len(chunk)
            entry = chunk[start.end() : stop].strip("\n")
            if ":" in entry:
                params[_parameter_name(entry)] = _parameter_description(entry)
    return Docstring(
        short_description=short or None, long_description=long_description, params=params
    )
