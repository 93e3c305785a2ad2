"""A judge that does not answer in the reply format (issue 18, item 2), through the plugin.

One loopback server plays agent and judge; the agent ends at once, so the four seed-database
tasks below pass whenever their judge answers. The judge of 24 and 62 answers prose to every
request, the judge of 67 prose once (then JSON), the judge of 68 JSON inside a code fence:

    task  replies                 outcome
    24    prose, prose            ERROR (infra error of the judge role)
    62    prose, prose            ERROR (infra error of the judge role)
    67    prose, JSON             passed
    68    fenced JSON             passed (read at once)

5 of the run's 7 judge replies cannot be read: the run summary says the judge does not follow
the reply format. Resume with a judge that answers JSON re-judges 24 and 62 from their saved
transcripts without running their conversations again (67's retried reply still counts: 1 of
5).
"""

from __future__ import annotations

import pytest

from tau2_retail.testing.loopback_server import Completion
from tau2_retail.testing.scripted_endpoint import Fault, Request, always, once

from .conftest import Bench, ScriptedEndpoint

TASKS = ("24", "62", "67", "68")
PROSE = Completion(content="The agent handled the request well and met every assertion.")
NOT_FOLLOWED = (
    "JUDGE DOES NOT FOLLOW THE REPLY FORMAT: 5 of 7 judge replies could not be read (each "
    "asked again once; still unreadable, an infra error of the judge role); check that the "
    "judge model answers with the JSON object its prompt asks for"
)


def _scripted(endpoint: ScriptedEndpoint) -> None:
    faults: dict[str, Fault] = {
        "24": always(PROSE, role="judge"),
        "62": always(PROSE, role="judge"),
        "67": once(PROSE, role="judge"),
    }
    endpoint.faults.update(faults)
    endpoint.judge_wraps["68"] = lambda text: f"Here is my evaluation:\n```json\n{text}\n```"


def _conversation_requests(endpoint: ScriptedEndpoint, task: str) -> list[Request]:
    return endpoint.requests(task, "agent") + endpoint.requests(task, "user")


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_prose_judge_is_an_infra_error_of_the_judge_not_the_agents_failure(
    bench: Bench, endpoint: ScriptedEndpoint, workers: str
) -> None:
    _scripted(endpoint)
    args = (
        f"--tau2-tasks={','.join(TASKS)}",
        *endpoint.agent_args(),
        *endpoint.judge_args(),
        "--tau2-judge-max-retries=0",
    )
    run = bench.run("-n", workers, "-rA", "--tau2-run-id=prose", *args)
    assert run.outcomes() == {
        "tau2_retail__24": "error",
        "tau2_retail__62": "error",
        "tau2_retail__67": "passed",
        "tau2_retail__68": "passed",
    }, run.output
    assert run.ret == 1
    run.stdout.fnmatch_lines(
        [
            "*infra_error: judge: unreadable reply, also when asked again: no JSON object in "
            "the reply: The agent handled the request well*--tau2-resume prose*",
        ]
    )
    assert NOT_FOLLOWED in run.stdout.lines
    assert {task: len(endpoint.requests(task, "judge")) for task in TASKS} == {
        "24": 2,
        "62": 2,
        "67": 2,
        "68": 1,
    }

    summary = bench.summary("prose")
    assert summary["judge_replies"] == {"total": 7, "unreadable": 5, "follows_format": False}
    assert summary["counts"]["infra_errors"] == 2
    rate = summary["success_rate"]
    assert (rate["passed"], rate["total"], rate["rate"]) == (2, 2, 1.0)  # not the agent's
    assert NOT_FOLLOWED in (bench.run_dir("prose") / "all_summary.txt").read_text().splitlines()
    for task in ("24", "62"):
        metrics = bench.metrics("prose", f"tau2_retail__{task}")
        assert (metrics["infra_role"], metrics["needs_judging"]) == ("judge", True)
        assert metrics["token_usage"]["judge"]["n_calls"] == 2  # its tokens still count
        judged = bench.read_json("prose", f"tau2_retail__{task}/judge_result.json")
        assert judged["unreadable_replies"] == [PROSE.content] * 2
    assert bench.metrics("prose", "tau2_retail__67")["judge_unreadable_replies"] == 1
    assert "judge_unreadable_replies" not in bench.metrics("prose", "tau2_retail__68")


def test_resume_re_judges_an_unreadable_judgement_without_running_the_conversation(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    _scripted(endpoint)
    args = (f"--tau2-tasks={','.join(TASKS)}", *endpoint.agent_args(), *endpoint.judge_args())
    first = bench.run("-n", "0", "-rA", "--tau2-run-id=resumed", *args)
    assert first.ret == 1, first.output
    conversations = {task: len(_conversation_requests(endpoint, task)) for task in TASKS}

    endpoint.faults.clear()
    resumed = bench.run("-n", "0", "-rA", "--tau2-resume=resumed", *args)
    # the two complete scenarios are not run again; the two infra errors are judged again
    assert resumed.outcomes() == {
        "tau2_retail__24": "passed",
        "tau2_retail__62": "passed",
    }, resumed.output
    assert resumed.ret == 0
    again = {task: len(_conversation_requests(endpoint, task)) for task in TASKS}
    assert again == conversations  # only the judge was asked again
    assert len(endpoint.requests("24", "judge")) == 3
    summary = bench.summary("resumed")
    assert summary["counts"]["infra_errors"] == 0
    assert summary["judge_replies"] == {"total": 5, "unreadable": 1, "follows_format": True}
    assert "JUDGE DOES NOT FOLLOW" not in resumed.stdout.str()
    assert (
        "Judge: 1 of 5 judge replies could not be read (each asked again once; still "
        "unreadable, an infra error of the judge role)"
    ) in resumed.stdout.lines
