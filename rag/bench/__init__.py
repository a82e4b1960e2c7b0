"""Benchmarks (speed, not tests): each writes its numbers; none runs in the default test tier.

``rag bench`` runs the per-stage ones (:mod:`rag.bench.run`); the heavier ones have make targets.
Settled A/B measurements are listed with their JSON in docs/decisions.md, and research questions
live in ``experiments/`` (not installed; nothing here imports them).
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
