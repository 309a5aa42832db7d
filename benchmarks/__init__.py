"""Benchmarks: recall quality (LoCoMo) and speed, size and scale; each a script with a ``--quick`` mode."""
