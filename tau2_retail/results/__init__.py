"""What a run writes and reads back: atomic writes, per-scenario artifacts (``write_outcome``
goes with the engine's harness), run summaries. No printing: the commands in ``cli`` print."""
