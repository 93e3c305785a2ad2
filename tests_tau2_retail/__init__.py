"""The benchmark: the 114 retail scenarios and the gold snapshots."""
