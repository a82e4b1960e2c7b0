"""Benchmarks (speed, not tests): each writes its numbers; none runs in the default test tier.

``rag bench`` runs the per-stage ones (:mod:`rag.bench.run`); the heavier ones have make targets.
Settled A/B measurements are listed with their JSON in docs/decisions.md, and research questions
live in ``experiments/`` (not installed; nothing here imports them).

Modules:

- ``chunk``: chunkers
- ``corpus``: fetch, parse, chunk
- ``embedders``: embedders side by side, paired
- ``evaluation``: ranx scoring
- ``folder``: a folder of PDFs: titles, citations, growth, resume
- ``http_overhead``: HTTP vs in-process LLM calls
- ``hyde``: HyDE in shards
- ``hygiene``: index hygiene, paired
- ``index``: embedding, build, query
- ``judge_nli``: the entailment judge's candidates vs offline-v2, SciFact dev and corpus claims
- ``judges``: a judge vs offline-v2
- ``llm``: LLM engines
- ``offline_judge``: judge speed
- ``pipeline``: the folder pipeline, serial vs Ray
- ``ray_embedding``: Ray vs serial embedding
- ``refextract_compare``: refextract vs the reference splitter
- ``report_timing``: cold/warm ``make report``
- ``reproduce``: a run vs the published one
- ``rerank``: offline rerankers
- ``run``: ``rag bench``
- ``scale``: 1×–100×
- ``scale_1000``: 1,000×
- ``scale_view``: 03's view of scale.json
- ``serve``: service load
- ``verify``: verifying a fetched model on load, cold and warm
- ``sweep_speed``: sweep speed
- ``text_fixes``: TOC runs and hyphen joins in indexed chunks, paired
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_json(res: Any, out: str | Path) -> Path:
    """Write a benchmark's result as indented JSON to ``out`` (project-relative paths resolved)."""
    from rag import paths

    dest = paths.resolve(out)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    return dest
