"""The breaker tells "down" from "busy" (issue 21, item 4): all 114 conversations start at once
(``-n 0 --tau2-concurrency 114``) against a flaky server, a burst of broken connections, a
healthy server with a listen backlog of 5, and a server that is really down.

Before, the breaker opened on K = 5 consecutive failed attempts counted across all the
conversations of a process: a burst of refused connections at the start of a run looked like
"down", and 24 to 66 of the 114 scenarios became infra errors. Now it opens only after K
failures over ``--tau2-breaker-window-seconds`` (10 s) without a single success.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tau2_retail.data.tasks import Task, load_user_guidelines
from tau2_retail.testing.bench import Bench
from tau2_retail.testing.loopback_server import Drop, HttpError, LoopbackOpenAIServer, Reply
from tau2_retail.testing.scripted_endpoint import Request, ScriptedEndpoint, always, once

ALL = ("-n", "0", "--tau2-concurrency=114")
FLAKY_RATE = 0.2
DEFAULT_ATTEMPTS = 5  # the first attempt and the 4 default retries


def _draw(request: Request) -> float:
    """A number in [0, 1) fixed by the request (same run, same faults)."""
    key = json.dumps(
        [request.task_id, request.seed, request.attempt, len(request.body["messages"])]
    )
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64


class Flaky:
    """A random 5xx for a fifth of the agent's requests (random, but fixed by the request)."""

    def __init__(self) -> None:
        self.injected = 0

    def __call__(self, request: Request) -> Reply | None:
        if request.role != "agent" or _draw(request) >= FLAKY_RATE:
            return None
        self.injected += 1
        return HttpError.server_error((500, 502, 503, 504)[request.attempt % 4])


def _counts(bench: Bench, run_id: str) -> dict[str, int]:
    return dict(bench.summary(run_id)["counts"])


def _scored_all(bench: Bench, run_id: str) -> None:
    assert _counts(bench, run_id) == {
        "expected": 114,
        "reported": 114,
        "scored": 114,
        "succeeded": 114,
        "failed": 0,
        "infra_errors": 0,
        "lost": 0,
    }


def test_a_fifth_of_the_requests_failing_at_random_still_scores_every_scenario(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    flaky = Flaky()
    endpoint.default_fault = flaky
    run = bench.run(*ALL, "--tau2-run-id=flaky", *endpoint.args("agent"))
    agent_requests = sum(endpoint.agent_requests.values())
    assert flaky.injected >= 0.15 * agent_requests, (flaky.injected, agent_requests)
    # A request fails for good only when all its 5 attempts draw a fault: 0.2**5 per request,
    # about 0.1 of the 342 requests. The breaker never opens (successes come all the time).
    details = [row["detail"] for row in bench.summary("flaky")["infra_errors"]]
    assert all(f"after {DEFAULT_ATTEMPTS} attempt(s)" in detail for detail in details), details
    assert len(details) <= 2, details
    assert _counts(bench, "flaky")["scored"] == 114 - len(details), run.output


def test_a_burst_of_broken_connections_at_the_start_is_busy_not_down(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    """Every conversation's first request loses its connection at once, before any reply
    (what a full accept queue does): 114 consecutive failures, then every retry succeeds."""
    endpoint.default_fault = once(Drop())
    run = bench.run(*ALL, "--tau2-run-id=burst", *endpoint.args("agent"))
    assert run.returncode == 0, run.output
    _scored_all(bench, "burst")
    for task in endpoint.tasks:  # each first request was sent again once, then went on
        first, again = endpoint.requests(task)[:2]
        assert (first.attempt, again.attempt) == (0, 1)
        assert first.body["messages"] == again.body["messages"]


@pytest.fixture
def small_backlog(tasks: Mapping[str, Task], data_dir: Path) -> Iterator[ScriptedEndpoint]:
    """The scripted endpoint on a server whose listen backlog is 5."""
    scripted = ScriptedEndpoint(tasks, load_user_guidelines(data_dir))
    scripted.server = LoopbackOpenAIServer(responder=scripted, backlog=5)
    with scripted.server:
        yield scripted


def test_114_conversations_at_once_against_a_listen_backlog_of_5_all_score(
    bench: Bench, small_backlog: ScriptedEndpoint
) -> None:
    run = bench.run(
        *ALL, "--tau2-run-id=backlog", *small_backlog.args("agent"), *small_backlog.args("user")
    )
    assert run.returncode == 0, run.output
    _scored_all(bench, "backlog")


def test_a_server_that_is_really_down_still_ends_every_scenario_as_an_infra_error(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    endpoint.default_fault = always(HttpError.server_error(503))
    run = bench.run(*ALL, "--tau2-run-id=down", *endpoint.args("agent"))
    assert run.returncode == 1, run.output
    assert set(run.outcomes().values()) == {"error"}
    summary = bench.summary("down")
    assert summary["counts"]["infra_errors"] == 114
    details = [row["detail"] for row in summary["infra_errors"]]
    assert all(detail.startswith("agent: ") for detail in details)
    down = [detail for detail in details if "is down since" in detail]
    # the breaker opened within the first request's retries: the scenarios still retrying
    # then ended at once, and nothing later was sent
    assert down, details
    assert all(
        "is down since" in detail or f"after {DEFAULT_ATTEMPTS} attempt(s)" in detail
        for detail in details
    )
    assert sum(endpoint.agent_requests.values()) <= 114 * DEFAULT_ATTEMPTS
