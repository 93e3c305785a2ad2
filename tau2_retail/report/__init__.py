"""The self-contained HTML run report, built from a run directory's artifacts."""
