"""Benchmark suites read as they are: Harbor, Terminal-Bench and SWE-bench (issue 27)."""
