"""The run plan: decided once by the controller, read by every worker; ``run_args.json`` records
the request values sent; a run folder of a pre-release format is refused at resume."""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tau2_retail.plugins.process import new_run_id
from tau2_retail.testing.bench import Bench
from tau2_retail.testing.scripted_endpoint import ScriptedEndpoint

STORED = Path(__file__).parent / "stored_runs"
# run_args.json of a tau2-profile run written by 877ba10 (the code before the run plan), with
# its user at a closed loopback port; only the pytest path in argv and data_dir were blanked:
#   pytest --pyargs tests_tau2_retail -n 0 --tau2-output-dir=runs --tau2-run-id=old
#     --tau2-profile=tau2 --tau2-tasks=0 --tau2-user-model=sim
#     --tau2-user-base-url=http://127.0.0.1:9/v1 --tau2-user-api-key-env=none
#     --tau2-user-max-retries=0
OLD_TAU2_RUN = STORED / "tau2_profile_877ba10_run_args.json"
OLD_ARGS = (
    "--tau2-profile=tau2",
    "--tau2-tasks=0",
    "--tau2-user-model=sim",
    "--tau2-user-base-url=http://127.0.0.1:9/v1",
    "--tau2-user-api-key-env=none",
    "--tau2-user-max-retries=0",
)


def test_a_tau2_profile_run_records_the_request_values_it_sends(
    bench: Bench, endpoint: ScriptedEndpoint, xdist: tuple[str, ...]
) -> None:
    result = bench.run(
        *xdist,
        "--tau2-profile=tau2",
        "--tau2-tasks=0,10",
        "--tau2-run-id=sent",
        *endpoint.args("agent", model="plan-agent"),
        "--tau2-user-model=builtin:customer",
    )

    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.output
    bodies = [request.body for task in ("0", "10") for request in endpoint.requests(task)]
    assert bodies
    # what the workers' requests carried (upstream's defaults: nothing was configured) ...
    assert {(body["temperature"], body["tool_choice"]) for body in bodies} == {(0.0, "auto")}
    # ... is what the run records, in run_args.json and in summary.json
    for name in ("run_args.json", "summary.json"):
        recorded = bench.read_json("sent", name)["configuration"]["agent"]["endpoint"]
        assert recorded["temperature"] == 0.0
        assert recorded["extra_body"] == {"tool_choice": "auto"}
    # the settings stay as given: the configured temperature is unset
    assert (
        bench.read_json("sent", "run_args.json")["configuration"]["settings"]["agent_temperature"]
        is None
    )


def test_a_run_folder_of_a_pre_release_format_is_refused_at_resume(bench: Bench) -> None:
    """Issue 27 item 5: its run_args.json states no format version; resume names the file,
    what it found and what this version reads, and exits 4 (before, it resumed)."""
    run_dir = bench.output_dir / "old"
    run_dir.mkdir(parents=True)
    shutil.copyfile(OLD_TAU2_RUN, run_dir / "run_args.json")

    result = bench.run_inprocess("--co", "--tau2-resume=old", *OLD_ARGS)

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --tau2-resume old: */old/run_args.json: no format_version (a pre-release "
            "version of tau2_retail wrote it); this version reads format_version 1 only (re-run "
            "the scenarios, or read the folder with the version that wrote it)"
        ]
    )
    assert json.loads(OLD_TAU2_RUN.read_text(encoding="utf-8"))["argv"]  # left as it was


@pytest.mark.usefixtures("local_time_far_from_utc")
def test_a_new_run_id_is_the_start_in_utc_as_every_time_of_the_run():
    run_id = new_run_id()
    now = datetime.now(UTC)

    stamp, _, suffix = run_id.rpartition("-")
    started = datetime.strptime(stamp, "%Y%m%d-%H%M%S").replace(tzinfo=UTC)
    # the local time here is 3 h 30 off; a margin of minutes holds however the host's clock is
    # stepped between the two readings (CI saw it go back a second)
    assert abs(started - now) < timedelta(minutes=5), run_id
    assert re.fullmatch(r"[0-9a-f]{6}", suffix), run_id
