"""tau2_retail: the 114 retail scenarios of tau2-bench as a pytest benchmark.

One folder per concept, imports pointing down (``tests/test_layers.py`` holds the order)::

    tools/     the retail domain: store, 16 tools + end_conversation, schemas, dispatch
               (the checkout's top-level ``tools/``, installed as ``tau2_retail.tools``)
    data/      pinned upstream files, tasks, seed database, gold replay
    models/    chat messages, the ChatModel protocol, OpenAI client, built-in models
    engine/    prompts, conversation, judge, signals, one scenario end to end
    results/   atomic writes, artifacts, run summaries
    report/    the HTML report
    cli/       ``python -m tau2_retail``
    plugins/   the pytest plugin (top-level ``plugins/``, installed as ``tau2_retail.plugins``)
    testing/   loopback server and helpers for tests and benchmarks
"""
