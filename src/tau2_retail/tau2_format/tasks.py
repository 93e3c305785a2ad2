"""The tasks a ``results.json`` embeds: upstream's own bytes, cut from the pinned ``tasks.json``.

The leaderboard's verifier compares every embedded base task with upstream's (a hash of the
parsed task), and ``evaluate-trajs`` grades with the embedded ones, so they must be upstream's
exactly. They are read at export time from the verified data folder (never committed) and each
task's object is copied as the very text of the file: no parse-and-rewrite can change a
number's spelling or a key's order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from tau2_retail.data.files import read_verified
from tau2_retail.errors import DataError

__all__ = ["TASKS_FILE", "task_texts"]

TASKS_FILE: Final = "tasks.json"
_DECODER: Final = json.JSONDecoder()
_BLANK: Final = re.compile(r"[ \t\r\n]*")


def _skip(text: str, position: int) -> int:
    """The position after the blanks at ``position``."""
    blanks = _BLANK.match(text, position)
    return blanks.end() if blanks else position


def _spans(text: str, label: str) -> dict[str, str]:
    """Each task's id and the exact text of its object in the top-level list ``text``."""
    position = _skip(text, 0)
    if not text.startswith("[", position):
        raise DataError(f"{label}: expected a list of tasks")
    position += 1
    spans: dict[str, str] = {}
    while True:
        position = _skip(text, position)
        if text.startswith("]", position):
            return spans
        try:
            task, end = _DECODER.raw_decode(text, position)
        except ValueError as error:
            raise DataError(f"{label}: not valid JSON ({error})") from None
        if not isinstance(task, dict) or not isinstance(task.get("id"), str):
            raise DataError(f"{label}: an entry without a string 'id' at offset {position}")
        spans[task["id"]] = text[position:end]
        position = _skip(text, end)
        if text.startswith(",", position):
            position += 1


def task_texts(data_dir: Path, task_ids: Iterable[str]) -> list[str]:
    """The JSON text of each of ``task_ids``'s tasks, in ``tasks.json``'s order, verified.

    ``DataError`` when an id is not in the file.
    """
    label = str(Path(data_dir) / TASKS_FILE)
    spans = _spans(read_verified(Path(data_dir), TASKS_FILE).decode("utf-8"), label)
    wanted = set(task_ids)
    missing = sorted(wanted - spans.keys())
    if missing:
        raise DataError(f"{label}: no task {', '.join(missing)}")
    return [text for task_id, text in spans.items() if task_id in wanted]
