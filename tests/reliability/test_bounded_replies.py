"""Bounded replies end to end (issue 21, item 2): a 50 MB reply and a gzip bomb from the agent's
endpoint each end their scenario as an infra error (not retried, nothing of them written),
while the other scenarios of the run are scored."""

from __future__ import annotations

import zlib

from tau2_retail.testing.bench import Bench
from tau2_retail.testing.loopback_server import Completion, RawBody
from tau2_retail.testing.scripted_endpoint import ScriptedEndpoint, always
from tests.plugins.conftest import run_expecting

MiB = 1024 * 1024


def _bomb(inflated: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [compressor.compress(bytes(MiB)) for _ in range(inflated // MiB)]
    return b"".join(parts) + compressor.flush()


def test_an_oversize_reply_and_a_gzip_bomb_are_infra_errors(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    endpoint.faults["1"] = always(RawBody(body=b'{"choices": ["' + b"x" * (50 * MiB) + b'"]}'))
    endpoint.faults["5"] = always(
        RawBody(body=_bomb(1024 * MiB), headers={"Content-Encoding": "gzip"})
    )

    run = run_expecting(
        bench, "big", {"0": "passed", "1": "error", "5": "error"},
        "--tau2-max-reply-bytes=4194304", *endpoint.args("agent", max_retries=2),
    )  # fmt: skip
    assert "Traceback" not in run.output
    assert endpoint.agent_requests["1"] == 1  # not retried
    assert endpoint.agent_requests["5"] == 1
    summary = bench.summary("big")
    details = {row["scenario_id"]: row["detail"] for row in summary["infra_errors"]}
    assert "more than the 4194304 byte limit" in details["tau2_retail__1"]
    assert "inflates to more than the 4194304 byte limit" in details["tau2_retail__5"]
    assert summary["counts"]["scored"] == 1
    # nothing of the replies was kept: each scenario folder stays small
    for scenario in ("tau2_retail__1", "tau2_retail__5"):
        folder = bench.run_dir("big") / scenario
        assert sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) < MiB


def test_a_huge_allowed_reply_is_stored_once(bench: Bench, endpoint: ScriptedEndpoint) -> None:
    """A 5 MB reply under the 8 MiB limit: the transcript keeps it whole, every other artifact
    (metrics, conversation log, all_metrics, judge input, report) a marked cut."""
    size = 5 * MiB
    endpoint.agent["1"] = Completion(content="y" * size)
    endpoint.agent["2"] = Completion(content="z" * MiB)  # judged: the prompt holds it
    run = bench.run(
        "-n", "0", "--tau2-tasks=1,2", "--tau2-run-id=huge", *endpoint.args("agent"),
        *endpoint.args("judge"),
    )  # fmt: skip
    assert "Traceback" not in run.output
    run_dir = bench.run_dir("huge")
    sizes = {
        str(p.relative_to(run_dir)): p.stat().st_size for p in run_dir.rglob("*") if p.is_file()
    }
    assert sum(sizes.values()) < 2 * size, {k: v for k, v in sizes.items() if v > 100_000}
    transcript = bench.read_json("huge", "tau2_retail__1/transcript.json")
    assert "y" * size in [m.get("content") for m in transcript["messages"]]  # kept whole once
    marker = f"…[truncated: {size} characters, full text in transcript.json]"
    for name in ("tau2_retail__1/metrics.json", "tau2_retail__1/conversation_log.txt"):
        assert marker in (run_dir / name).read_text(encoding="utf-8"), name
    for name in ("all_metrics.json", "report.html"):
        assert "full text in transcript.json" in (run_dir / name).read_text(encoding="utf-8")
