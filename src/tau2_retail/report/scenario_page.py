"""What the run report shows of one scenario (see :mod:`tau2_retail.report.page`).

From a scenario's artifact folder: the conversation (``transcript.json``) in a compact form,
the database difference (``db_diff.json``) record by record and field by field, the reference
and recorded write actions (``reference_answer.json``, ``final_agent_response.json``) paired by
the ACTION_MATCH rule, and the NL assertions with the judge's verdicts (``judge_result.json``,
else the unjudged assertions of ``scenario_config/scenario.json``). A file that is missing or
unreadable does not stop the report: it is named in the scenario's ``problems``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tau2_retail import codec
from tau2_retail.engine.metrics import LatencyStats, ScenarioMetrics
from tau2_retail.engine.scoring import action_match
from tau2_retail.models.messages import Usage
from tau2_retail.results.artifacts import CONFIG_DIR, JUDGE_FILE
from tau2_retail.results.long_text import cut_long_text
from tau2_retail.tools.dispatch import Action

__all__ = ["StringTable", "action_pairs", "record_differences", "scenario_detail"]

# Texts at least this long are stored once in the shared string table (tool results repeat
# across trials and tasks); shorter ones stay inline, where a reference would cost as much.
_INTERN_MIN_CHARS = 120


class StringTable:
    """The page's shared string table: long texts stored once, referenced by their index."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self._index: dict[str, int] = {}

    def ref(self, text: str | None) -> str | int | None:
        """``text`` itself when short (or None), else its index in :attr:`values`."""
        if text is None or len(text) < _INTERN_MIN_CHARS:
            return text
        text = cut_long_text(text)  # transcript.json holds the whole of a huge one
        index = self._index.get(text)
        if index is None:
            index = self._index[text] = len(self.values)
            self.values.append(text)
        return index


def _optional_json(folder: Path | None, name: str, problems: list[str]) -> Any:
    """A scenario file's JSON, or None (the problem noted) when it is missing or unreadable."""
    if folder is None:
        return None
    path = folder / name
    if not path.is_file():
        problems.append(f"{name}: missing")
        return None
    try:
        return json.loads(path.read_bytes())
    except OSError as error:
        problems.append(f"{name}: cannot read ({error})")
    except ValueError as error:
        problems.append(f"{name}: not valid JSON ({error})")
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _messages(transcript: Any, strings: StringTable, problems: list[str]) -> list[dict[str, Any]]:
    """The transcript's messages in the page's compact form.

    ``r`` role, ``c`` content (text or string-table index), ``t`` seconds since the first
    message, ``k`` tool calls ``[id, name, arguments]``, ``i`` tool-call id, ``n`` tool name,
    ``e`` 1 for a failed tool call.
    """
    raw = transcript.get("messages") if isinstance(transcript, dict) else None
    if not isinstance(raw, list):
        problems.append("transcript.json: no 'messages' list")
        return []
    stamps = [_number(m.get("timestamp")) for m in raw if isinstance(m, dict)]
    start = min((s for s in stamps if s is not None), default=None)
    out: list[dict[str, Any]] = []
    for message in raw:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        entry: dict[str, Any] = {
            "r": str(message.get("role", "?")),
            "c": strings.ref(content if isinstance(content, str) else None),
        }
        stamp = _number(message.get("timestamp"))
        if stamp is not None and start is not None:
            entry["t"] = round(stamp - start, 3)
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            entry["k"] = [
                [str(c.get("id", "")), str(c.get("name", "")), strings.ref(_text(c, "arguments"))]
                for c in calls
                if isinstance(c, dict)
            ]
        if message.get("tool_call_id") is not None:
            entry["i"] = str(message["tool_call_id"])
        if message.get("name") is not None:
            entry["n"] = str(message["name"])
        if message.get("error"):
            entry["e"] = 1
        out.append(entry)
    return out


def _text(mapping: Mapping[str, Any], key: str) -> str:
    value = mapping.get(key)
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _actions(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [
        {"name": str(a.get("name", "")), "arguments": a.get("arguments")}
        for a in value
        if isinstance(a, dict)
    ]


def action_pairs(
    reference: Sequence[Mapping[str, Any]], recorded: Sequence[Mapping[str, Any]]
) -> list[int]:
    """For each reference action, the index of the recorded action matching it, or -1.

    The ACTION_MATCH rule (same name, same arguments, numbers with a tolerance), greedily and
    each recorded action used once, as the signal counts it.
    """
    unused = list(range(len(recorded)))
    pairs: list[int] = []
    for wanted in reference:
        want = Action(name=str(wanted["name"]), arguments=_as_dict(wanted["arguments"]))
        match = -1
        for position, index in enumerate(unused):
            got = recorded[index]
            candidate = Action(name=str(got["name"]), arguments=_as_dict(got["arguments"]))
            if action_match([want], [candidate]):
                match = index
                del unused[position]
                break
        pairs.append(match)
    return pairs


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"": value}


_ABSENT = object()


def _shown(value: Any) -> str | None:
    return None if value is _ABSENT else json.dumps(value, ensure_ascii=False)


def record_differences(expected: Any, actual: Any, path: str = "") -> list[list[str | None]]:
    """The leaves where two records differ: ``[path, expected JSON, actual JSON]`` each.

    Objects are compared key by key and lists index by index (a longer list shows its extra
    entries against an absent one); an absent side is ``None``. Paths read like
    ``items[2].options.color``; the empty path stands for the whole record.
    """
    out: list[list[str | None]] = []
    _walk(expected, actual, path, out)
    return out


def _walk(expected: Any, actual: Any, path: str, out: list[list[str | None]]) -> None:
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in [*expected, *(k for k in actual if k not in expected)]:
            child = f"{path}.{key}" if path else str(key)
            _walk(expected.get(key, _ABSENT), actual.get(key, _ABSENT), child, out)
    elif isinstance(expected, list) and isinstance(actual, list):
        for index in range(max(len(expected), len(actual))):
            _walk(
                expected[index] if index < len(expected) else _ABSENT,
                actual[index] if index < len(actual) else _ABSENT,
                f"{path}[{index}]",
                out,
            )
    elif type(expected) is not type(actual) or expected != actual:
        out.append([path, _shown(expected), _shown(actual)])


def _db_records(diff: Any, problems: list[str]) -> list[dict[str, Any]]:
    """``db_diff.json`` as records: table, key, kind (changed/missing/unexpected), fields."""
    if diff is None:
        return []
    if not isinstance(diff, dict):
        problems.append("db_diff.json: expected a JSON object")
        return []
    records = []
    for table, entries in diff.items():
        if not isinstance(entries, dict):
            continue
        for key, pair in entries.items():
            if not isinstance(pair, dict):
                continue
            expected, actual = pair.get("expected"), pair.get("actual")
            if expected is None and actual is not None:
                kind, fields = "unexpected", [["", None, _shown(actual)]]
            elif actual is None and expected is not None:
                kind, fields = "missing", [["", _shown(expected), None]]
            else:
                kind, fields = "changed", record_differences(expected, actual)
            records.append({"table": str(table), "key": str(key), "kind": kind, "fields": fields})
    return records


def _assertions(judge: Any, scenario: Any) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The NL assertions with the judge's verdicts (or unjudged), and the judge's summary."""
    if isinstance(judge, dict):
        verdicts = judge.get("nl_assertion_verdicts")
        # the judge's replies could not be read: its verdicts are no judgement of the agent
        unjudged = judge.get("unreadable") is True
        items = []
        for verdict in verdicts if isinstance(verdicts, list) else []:
            if isinstance(verdict, dict):
                items.append(
                    {
                        "index": verdict.get("index"),
                        "text": str(verdict.get("assertion", "")),
                        "passed": None if unjudged else verdict.get("passed") is True,
                        "reason": str(verdict.get("reason", "")),
                    }
                )
        summary = {
            "score": _number(judge.get("score")),
            "reason": str(judge.get("reason", "")),
            "error": judge.get("error") if isinstance(judge.get("error"), str) else None,
        }
        return items, summary
    texts = scenario.get("nl_assertions") if isinstance(scenario, dict) else None
    if not isinstance(texts, list):
        return [], None
    return [
        {"index": n, "text": str(text), "passed": None, "reason": ""}
        for n, text in enumerate(texts, start=1)
    ], None


def _json_if_present(folder: Path | None, name: str, problems: list[str]) -> Any:
    """A file a scenario folder may lack (the judge's verdict, the scenario's configuration):
    read as :func:`_optional_json` does when it is there, else None with no problem noted."""
    if folder is None or not (folder / name).is_file():
        return None
    return _optional_json(folder, name, problems)


def scenario_detail(
    folder: Path | None,
    metrics: ScenarioMetrics | None,
    run_dir: Path,
    strings: StringTable,
    *,
    scenario_id: str,
) -> dict[str, Any]:
    """The page's data for one scenario: facts of ``metrics`` and the files in ``folder``.

    ``folder`` is the scenario's artifact folder inside ``run_dir`` (None when it has none);
    long texts go to ``strings``. Keys: ``id``, ``folder`` (relative to ``run_dir``),
    ``stop_detail``, ``usage``, ``latency``, ``hashes`` (expected, actual), ``messages`` (see
    ``_messages``), ``reference`` and ``recorded`` actions, ``pairs`` (see
    :func:`action_pairs`), ``db`` (records: ``table``, ``key``, ``kind`` changed / missing /
    unexpected, ``fields`` from :func:`record_differences`), ``assertions`` (``index``,
    ``text``, ``passed`` true / false / None when not judged, ``reason``), ``judge``
    (``score``, ``reason``, ``error``; None when no judge ran) and ``problems`` (files missing
    or unreadable).
    """
    problems: list[str] = []
    if folder is None:
        problems.append("no artifact folder with a metrics.json for this scenario")
    transcript = _optional_json(folder, "transcript.json", problems)
    diff = _optional_json(folder, "db_diff.json", problems)
    reference = _optional_json(folder, "reference_answer.json", problems)
    recorded = _optional_json(folder, "final_agent_response.json", problems)
    judge = _json_if_present(folder, JUDGE_FILE, problems)
    scenario = _json_if_present(folder, f"{CONFIG_DIR}/scenario.json", problems)
    reference_actions = _actions(reference.get("actions") if isinstance(reference, dict) else None)
    recorded_actions = _actions(
        recorded[0].get("actions")
        if isinstance(recorded, list) and recorded and isinstance(recorded[0], dict)
        else None
    )
    assertions, judge_summary = _assertions(judge, scenario)
    return {
        "id": scenario_id,
        "folder": folder.relative_to(run_dir).as_posix() if folder is not None else None,
        "stop_detail": metrics.stop_detail if metrics else "",
        "usage": codec.encode(metrics.token_usage, dict[str, Usage]) if metrics else {},
        "latency": codec.encode(metrics.latency_stats, dict[str, LatencyStats]) if metrics else {},
        "hashes": (
            [metrics.db_state_expected_hash, metrics.db_state_actual_hash]
            if metrics
            else [None, None]
        ),
        "messages": _messages(transcript, strings, problems) if transcript is not None else [],
        "reference": reference_actions,
        "recorded": recorded_actions,
        "pairs": action_pairs(reference_actions, recorded_actions),
        "db": _db_records(diff, problems),
        "assertions": assertions,
        "judge": judge_summary,
        "problems": problems,
    }
