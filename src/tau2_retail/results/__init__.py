"""What a run writes and reads back: atomic writes, per-scenario artifacts (``write_outcome``
goes with the engine's harness; ``folder_writer`` puts them on disk from a helper process when
many scenarios are in flight), run summaries. No printing: the commands in ``cli`` print."""
