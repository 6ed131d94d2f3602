"""The pieces of scripts/bench_untuned.py (the script keeps its command line and entry point)."""
