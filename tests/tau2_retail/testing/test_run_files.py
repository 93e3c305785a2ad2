"""The run-directory readers and the response cache's hand-editor (``testing/run_files.py``)."""

from __future__ import annotations

import gc
import json
import sqlite3
import warnings
from contextlib import closing
from pathlib import Path

from tau2_retail.testing.run_files import edit_cache_replies


def test_edit_cache_replies_edits_every_reply_and_closes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE responses (digest TEXT PRIMARY KEY, reply TEXT)")
        db.executemany(
            "INSERT INTO responses VALUES (?, ?)",
            [("a", '{"content": "hi"}'), ("b", '{"content": "ho"}')],
        )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        edit_cache_replies(path, lambda reply: reply.update(content="edited"))
        gc.collect()

    # from Python 3.13 on, a connection collected unclosed warns: under pytest's "error" filter
    # that failed whichever test happened to collect it
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
    with closing(sqlite3.connect(path)) as db:
        replies = [json.loads(text) for (text,) in db.execute("SELECT reply FROM responses")]
    assert replies == [{"content": "edited"}, {"content": "edited"}]
