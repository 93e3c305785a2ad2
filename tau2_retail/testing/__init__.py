"""Helpers shared by the suite's own tests and the benchmarks (never imported by the engine):
the loopback OpenAI-compatible server and the test harness."""
