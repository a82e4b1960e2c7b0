"""Benchmarks (speed, not tests): each writes its numbers; none runs in the default test tier."""
