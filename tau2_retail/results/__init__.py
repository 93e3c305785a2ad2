"""What a run writes and reads back: atomic writes, per-scenario artifacts, run summaries."""
