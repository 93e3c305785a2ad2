"""Worst-case judge-reply parsing time (issue 12, item 4): prints a table, asserts nothing.

python benchmarks/bench_judge_parse.py
"""

from __future__ import annotations

import contextlib
import time

from tau2_retail.engine.judge_reply import MAX_REPLY_CHARS, normalize_judgement

ASSERTIONS = ("a", "b", "c")
VALID = '{"score": 1, "reason": "r", "nl_assertion_verdicts": [{"index": 1, "passed": true}]}'
CASES = {
    "100 KB of '{'": "{" * MAX_REPLY_CHARS,
    "100 KB of '['": "[" * MAX_REPLY_CHARS,
    "100 KB of '{\"a\": '": ('{"a": ' * MAX_REPLY_CHARS)[:MAX_REPLY_CHARS],
    "100 KB of '{x}'": ("{x}" * MAX_REPLY_CHARS)[:MAX_REPLY_CHARS],
    "100 KB nested '{' then '}'": "{" * (MAX_REPLY_CHARS // 2) + "}" * (MAX_REPLY_CHARS // 2),
    "prose + object at the end": "x" * (MAX_REPLY_CHARS - len(VALID)) + VALID,
    "300 KB of '{' (over the cap)": "{" * 300_000,
    "a normal reply": VALID,
}


def main() -> None:
    print("| reply | chars | parse time (ms, best of 5) |\n| --- | ---: | ---: |")
    for name, text in CASES.items():
        best = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            with contextlib.suppress(ValueError):
                normalize_judgement(text, ASSERTIONS)
            best = min(best, time.perf_counter() - started)
        print(f"| {name} | {len(text):,} | {best * 1000:.2f} |")


if __name__ == "__main__":
    main()
