"""Tests of the run report in a real browser (playwright driving the system chromium)."""
