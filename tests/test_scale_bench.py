"""The scale benchmark's arithmetic (not its timings): exponent fit, recall, the rule's row."""

from __future__ import annotations

import numpy as np
import pytest

from rag.bench.scale import chosen_rows, fit_exponent, predict, recall_at_k
from rag.bench.scale_view import best_at_target, chosen_table, scale_summary


def test_fit_exponent_recovers_a_power_law():
    sizes = [10, 25, 50, 100]
    fit = fit_exponent(sizes, [0.02 * s**1.5 for s in sizes])
    assert fit["exponent"] == pytest.approx(1.5, abs=1e-3)
    assert predict(fit, 10_000) == pytest.approx(0.02 * 10_000**1.5, rel=1e-3)


def test_recall_at_k_by_hand():
    exact = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    found = np.array([[4, 3, 9, 9], [5, 6, 7, 8]])
    assert recall_at_k(found, exact) == pytest.approx((2 / 4 + 1) / 2)


def test_chosen_row_is_the_grid_point_the_rule_names():
    rows = [
        {"scale": 1, "n": 5000, "kind": "flat", "recall": 1.0, "p50_ms": 1, "p50_cpu_ms": 0.8,
         "memory_mb": 7.3, "build_s": 0.0, "bytes_per_vector": 1536},
        {"scale": 1, "n": 5000, "kind": "hnsw", "m": 16, "ef_construction": 40, "ef_search": 16,
         "recall": 0.9, "p50_ms": 0.1, "p50_cpu_ms": 0.1, "memory_mb": 8, "build_s": 1,
         "bytes_per_vector": 1680},
    ]  # fmt: skip
    got = chosen_rows(rows, 384)
    assert got[0]["kind"] == "flat" and got[0]["measured"] is True
    assert chosen_table({"chosen": got})["kind"].tolist() == ["flat"]
    best = best_at_target(__import__("pandas").DataFrame(rows))
    assert best["kind"].tolist() == ["flat"]  # HNSW at efSearch 16 misses recall 0.95
    s = scale_summary({"chosen": got, "dense": rows})
    assert s["largest"]["meets_targets"] is True and s["sizes"] == [5000]


def test_best_of_keeps_the_fastest_run_and_the_result(monkeypatch):
    from types import SimpleNamespace

    from rag.bench import scale

    now = [0.0]
    monkeypatch.setattr(scale, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    durations = iter([5.0, 1.0, 3.0])  # seconds each run takes on the module's clock
    calls = []

    def run():
        now[0] += next(durations)
        calls.append(1)
        return len(calls)

    seconds, result = scale._best_of(run, repeats=3)
    assert len(calls) == 3 and result == 3
    assert seconds == 1.0  # the undisturbed run, not the mean (3.0) nor the last (3.0)


def test_the_reading_fits_growth_against_papers_and_against_work():
    from rag.bench.scale_view import scale_reading, stages_table

    stage = {  # time grows with pages (exponent 1), papers grow slower than pages
        "papers": [4, 8, 16], "seconds": [1.0, 2.4, 6.0], "exponent": 1.26,
        "predicted_10k_papers_s": 1.0, "work": [40, 96, 240], "work_unit": "pages",
        "exponent_vs_work": 1.0,
    }  # fmt: skip
    dense = [
        {"scale": 1, "n": 5000, "kind": "flat", "recall": 1.0, "p50_ms": 1, "p50_cpu_ms": 0.8,
         "memory_mb": 7.3, "build_s": 0.0, "bytes_per_vector": 1536},
    ]  # fmt: skip
    res = {
        "chosen": chosen_rows(dense, 384),
        "dense": dense,
        "stages": {"stages": {"parse": stage}},
    }
    table = stages_table(res)
    assert table.loc[0, "exponent vs work"] == 1.0
    assert table.loc[0, "work measured"] == "[40, 96, 240] pages"
    text = scale_reading(res).data
    assert "parse 1.26; above 1.1: parse." in text
    assert "parse (pages) 1.00; all ≤ 1.1." in text
