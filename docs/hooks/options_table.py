"""MkDocs hook: the configuration page's option tables, generated from the settings.

``docs/configuration.md`` holds the marker ``<!-- tau2:options-table -->``; at build time it
is replaced by tables rendered from the settings' declarations, ``tau2_retail.settings.OPTIONS``
(flag, ini key, environment variable, default, help, and the flag of ``python -m tau2_retail
run``), one table per declared table (the run's settings, then each role's), so the page never
drifts from the code. ``tests/test_docs.py`` renders the same tables and checks them against
``OPTIONS``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MARKER = "<!-- tau2:options-table -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(setting: Any) -> str:
    env = f"`{setting.env_var}`" if setting.env_var else ""
    if getattr(setting, "default_note", None):
        # found where the run happens (e.g. the data cache): --help prints it there
        default = "see `--help`"
    else:
        default = f"`{setting.default}`" if setting.default else "unset"
    run = f"`{setting.cli_flag}`" if setting.cli else ""
    return (
        f"| `{setting.flag}` | `{setting.dest}` | {env} | {default} | {_cell(setting.help)} "
        f"| {run} |"
    )


def _table(settings: list[Any]) -> list[str]:
    return [
        "| option | ini key | env | default | meaning | `run` flag |",
        "| --- | --- | --- | --- | --- | --- |",
        *(_row(setting) for setting in settings),
    ]


def options_markdown(settings: Sequence[Any] | None = None) -> str:
    """The option tables as Markdown: each declared table in order (run settings, then one
    table per role) of ``settings`` (default: every setting)."""
    if settings is None:
        from tau2_retail.settings import OPTIONS

        settings = OPTIONS
    tables: dict[str, list[Any]] = {}
    for setting in settings:
        tables.setdefault(setting.table, []).append(setting)
    lines: list[str] = []
    for title, rows in tables.items():
        lines += ["", f"### {title}", "", *_table(rows)]
    return "\n".join(lines[1:]) + "\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, options_markdown())
