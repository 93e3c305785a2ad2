"""MkDocs hook: the configuration page's option tables, generated from the options table.

``docs/configuration.md`` holds the marker ``<!-- tau2:options-table -->``; at build time it
is replaced by tables rendered from the settings schema, ``tau2_retail.settings.OPTIONS`` (flag,
ini key, environment variable, default, help, and the flag of ``python -m tau2_retail run``),
so the page never drifts from the code.
``tests/test_docs.py`` renders the same tables and checks them against ``OPTIONS``.
"""

from __future__ import annotations

from typing import Any

MARKER = "<!-- tau2:options-table -->"
ROLES = ("agent", "user", "judge")


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


def options_markdown() -> str:
    """The option tables as Markdown: run settings, then one table per role."""
    from tau2_retail.settings import OPTIONS

    names = {setting.name for setting in OPTIONS}
    # a role's settings: the suffixes every role has (agent_notes is a run setting)
    suffixes = {
        name.removeprefix("agent_")
        for name in names
        if name.startswith("agent_") and all(f"{role}_{name[6:]}" in names for role in ROLES)
    }
    per_role = {
        role: [s for s in OPTIONS if s.name.removeprefix(role + "_") in suffixes] for role in ROLES
    }
    in_roles = {s.name for settings in per_role.values() for s in settings}
    lines = ["### Run settings", "", *_table([s for s in OPTIONS if s.name not in in_roles])]
    titles = {"agent": "The agent", "user": "The simulated user", "judge": "The judge"}
    for role in ROLES:
        lines += ["", f"### {titles[role]}", "", *_table(per_role[role])]
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, options_markdown())
