"""Benchmarks for the event bus (run `python bench/drain.py`; never imported by the product)."""
