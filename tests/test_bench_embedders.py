"""The embedder comparison's paired tests and its published-number table."""

from __future__ import annotations

import numpy as np

from rag.bench.embedders import hybrid_vs_dense, paired_vs_baseline, retest
from rag.evaluation.scifact import PUBLISHED_LABELS, PUBLISHED_MTEB


def test_each_embedder_is_paired_with_the_baseline_per_retriever_with_holm():
    rng = np.random.default_rng(0)
    qids = [f"q{i}" for i in range(40)]
    base = {q: float(v) for q, v in zip(qids, rng.random(40), strict=True)}
    better = {q: v + 0.3 for q, v in base.items()}
    same = dict(base)
    per_q = {
        "minilm": {"dense": base, "hybrid": base},
        "strong": {"dense": better, "hybrid": same},
    }
    rows = paired_vs_baseline(per_q, "minilm")
    by = {(r["embedder"], r["retriever"]): r for r in rows}
    assert set(by) == {("strong", "dense"), ("strong", "hybrid")}
    d = by[("strong", "dense")]
    assert abs(d["diff"] - 0.3) < 1e-9 and d["n"] == 40 and d["significant"]
    assert d["p_holm"] >= d["p"]  # Holm never lowers a p-value
    h = by[("strong", "hybrid")]
    assert h["diff"] == 0.0 and h["p"] == 1.0 and not h["significant"]


def test_pairs_use_only_the_questions_both_embedders_answered():
    base = {"a": 0.0, "b": 1.0, "c": 0.5, "d": 0.2}
    other = {"b": 1.0, "c": 0.5, "d": 0.2, "e": 0.0}
    (row,) = paired_vs_baseline({"minilm": {"dense": base}, "x": {"dense": other}}, "minilm")
    assert row["n"] == 3 and row["diff"] == 0.0


def test_hybrid_is_paired_with_the_same_embedders_dense_run_with_holm_over_embedders():
    rng = np.random.default_rng(1)
    qids = [f"q{i}" for i in range(40)]
    dense = {q: float(v) for q, v in zip(qids, rng.random(40), strict=True)}
    per_q = {
        "fused_helps": {"dense": dense, "hybrid": {q: v + 0.2 for q, v in dense.items()}},
        "fused_adds_nothing": {"dense": dense, "hybrid": dict(dense)},
        "dense_only": {"dense": dense},
    }
    by = {r["embedder"]: r for r in hybrid_vs_dense(per_q)}
    assert set(by) == {"fused_helps", "fused_adds_nothing"}  # no hybrid run, no row
    assert abs(by["fused_helps"]["diff"] - 0.2) < 1e-9 and by["fused_helps"]["significant"]
    assert by["fused_helps"]["p_holm"] >= by["fused_helps"]["p"]
    assert by["fused_adds_nothing"]["diff"] == 0.0 and not by["fused_adds_nothing"]["significant"]


def test_retest_redoes_both_families_from_the_stored_values_and_needs_them(tmp_path):
    import json

    import pytest

    base = {f"q{i}": i / 10 for i in range(10)}
    per_q = {"minilm": {"dense": base, "hybrid": base},
             "x": {"dense": base, "hybrid": {q: v + 0.1 for q, v in base.items()}}}  # fmt: skip
    out = tmp_path / "e.json"
    out.write_text(json.dumps({"embedders": {}, "_per_question": per_q, "paired_vs_minilm": []}))
    doc = retest(out)
    assert json.loads(out.read_text()) == doc
    assert {(r["embedder"], r["retriever"]) for r in doc["paired_vs_minilm"]} == {
        ("x", "dense"), ("x", "hybrid")}  # fmt: skip
    assert {r["embedder"] for r in doc["hybrid_vs_dense"]} == {"minilm", "x"}
    assert "own dense run" in doc["method"]
    out.write_text(json.dumps({"embedders": {}}))
    with pytest.raises(ValueError, match="no per-question values"):
        retest(out)


def test_published_numbers_name_their_source_file():
    for name, p in PUBLISHED_MTEB.items():
        assert 0.5 < p["ndcg@10"] < 0.8
        assert "embeddings-benchmark/results: results/" in p["source"]
        assert "SciFact.json" in p["source"]
        assert PUBLISHED_LABELS[name].startswith(f"{p['ndcg@10']:.3f}")


def test_a_part_run_alone_keeps_the_other_part_and_refuses_unknown_parts(tmp_path, monkeypatch):
    import json
    from types import SimpleNamespace

    import pytest

    from rag.bench import embedders as bench

    fp = {"value": "model-a"}
    monkeypatch.setattr(bench, "_Data", lambda: None)
    monkeypatch.setattr(
        "rag.index.embed.load_embedder", lambda name: SimpleNamespace(fingerprint=fp["value"])
    )
    monkeypatch.setattr(bench, "_scifact", lambda data, emb: {"dense": {"ndcg@10": {"mean": 0.7}}})
    per_q = {"dense": {"q1": 0.5}, "hybrid": {"q1": 0.6}}
    metrics = {"dense": {"ndcg@10": {"mean": 0.3}}, "hybrid": {"ndcg@10": {"mean": 0.4}}}
    monkeypatch.setattr(
        bench, "_corpus", lambda data, emb: ({"metrics": metrics, "costs": {"dim": 8}}, per_q)
    )
    out = tmp_path / "e.json"
    bench.run(["m"], out, ["scifact"])
    bench.run(["m"], out, ["corpus"])
    e = json.loads(out.read_text())["embedders"]["m"]
    assert e["scifact"]["dense"]["ndcg@10"]["mean"] == 0.7  # kept from the first run
    assert e["corpus_gold_chunk"] == metrics and e["costs"] == {"dim": 8}
    assert set(e["seconds"]) == {"scifact", "corpus"}
    assert set(e["cpu"]) == {"scifact", "corpus"} and "bf16" in e["cpu"]["corpus"]  # per part
    assert json.loads(out.read_text())["hybrid_vs_dense"] == []  # one question: no test
    fp["value"] = "model-b"  # another model under the same name: nothing of model-a is kept
    bench.run(["m"], out, ["scifact"])
    doc = json.loads(out.read_text())
    assert "corpus_gold_chunk" not in doc["embedders"]["m"] and "m" not in doc["_per_question"]
    with pytest.raises(ValueError, match="parts must be among"):
        bench.run(["m"], out, ["scifcat"])
