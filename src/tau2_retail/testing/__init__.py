"""Helpers shared by the suite's own tests and the benchmarks; no other layer imports them.

- ``loopback_server``: a real OpenAI-compatible HTTP server on 127.0.0.1 with scripted replies
  and faults;
- ``scripted_endpoint``: its responder playing agent, customer and judge for every task;
- ``bench``: a project holding the benchmark module, run by ``python -m pytest`` (hermetic
  environment, scaled time limit) or in-process through pytester; ``read_only`` makes a
  folder unwritable for its runs;
- ``run_files``: readers of a run directory (and a hand-editor of the response cache);
  ``timeouts``: ``TAU2_TEST_TIMEOUT_SCALE``;
- ``unparsed_replies``: real servers' error replies saying the model's output could not be
  parsed, one per known form;
- ``fake_models``: chat models made of a function (a scripted agent, a fixed judge);
- ``child``: a Python child process that says when it is ready (to be killed mid-work);
- ``upstream_checkout``: a fake tau2-bench checkout made from a data folder;
- ``unavailable``: a missing resource skips a test locally and fails it in CI."""
