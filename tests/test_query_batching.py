"""experiments/query_batching: how it groups questions into unpadded batches and counts the rows a
batch leaves byte-identical (the experiment itself loads MiniLM and the default profile and is not
run here)."""

from __future__ import annotations

import numpy as np

from experiments.query_batching import run as qb


def test_groups_are_equal_lengths_of_two_or_more_in_length_order():
    assert qb.by_length([5, 3, 5, 4, 3, 5]) == {3: [1, 4], 5: [0, 2, 5]}
    assert qb.by_length([1, 2, 3]) == {}


def test_same_rows_counts_exact_bytes_and_reports_the_largest_difference():
    alone = [np.asarray([0.1, 0.2], np.float32), np.asarray([0.3, 0.4], np.float32)]
    batch = np.stack(alone)
    assert qb.same_rows(batch, alone) == (2, 0.0)
    batch[1, 0] = np.nextafter(batch[1, 0], np.float32(1))
    same, diff = qb.same_rows(batch, alone)
    assert same == 1 and 0 < diff < 1e-7


def test_cpu_ms_is_the_calling_threads_cpu_not_the_wall_clock():
    import time

    assert qb.cpu_ms(lambda: time.sleep(0.02), 3) < 5
    busy = qb.cpu_ms(lambda: sum(i * i for i in range(200_000)), 3)
    assert busy > 1
