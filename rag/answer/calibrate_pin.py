"""A pinned support-threshold calibration: chosen once by ``make calibrate``, kept in ``data/``.

:func:`rag.answer.calibrate.held_out_threshold` retrieves ~100 held-out questions and judges the
spans of two contexts each (its share of a cold report is in docs/performance.md) to choose a
threshold that only changes when its inputs do. So, like the offline judges
(:mod:`rag.judge.pinned`), the calibration is pinned: ``python -m rag.report.calibrate`` (``make
calibrate``) runs notebook 05's calibration on a profile and writes the
:class:`~rag.answer.calibrate.Calibration` to ``data/calibration/support-threshold.json`` beside
every input it was chosen on (:func:`calibration_inputs`): the gold file's sha256, the held-out
questions, the paper titles, the chunk set, embedder and index settings, the judge, the retriever
and context settings, the grid and the code version. A run uses the pin only when it would
calibrate on exactly those inputs, and calibrates as before otherwise, saying which input differs.

The JSON keeps every number of the calibration (curve and per-question scores included) with
Python's shortest round-trip float ``repr``, so a loaded calibration equals the one written and
notebook 05 records the same ``metrics.json`` either way.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag import paths
from rag.answer.calibrate import (
    CALIBRATION_VERSION,
    EXCLUDE_DEPTH,
    GRID,
    Calibration,
    PinLookup,
)
from rag.answer.claims import CLAIMS_VERSION
from rag.answer.context import ContextSettings
from rag.atomic import write_atomic
from rag.errors import ConfigError
from rag.retrieval.retrievers import RetrievalSettings

logger = logging.getLogger(__name__)

#: Bump when the JSON layout changes.
PIN_FORMAT = "pinned-calibration-v1"
#: Where the pinned calibration lives, relative to the project root.
PIN_FILE = "data/calibration/support-threshold.json"


def pin_path(root: Path | None = None) -> Path:
    """``data/calibration/support-threshold.json`` under ``root`` (default: the project root)."""
    return (root or paths.project_root()) / PIN_FILE


@dataclass(frozen=True)
class IndexIdentity:
    """What fixes the hits a retriever returns over an index: the chunk set, the embedder, and the
    dense and BM25 index settings (each a ``model_dump``)."""

    chunks: str
    embedder: str
    dense: dict[str, Any]
    bm25: dict[str, Any]


def index_identity(index: Any) -> IndexIdentity:
    """The :class:`IndexIdentity` of a built :class:`rag.index.build.Indexed` (or itself)."""
    if isinstance(index, IndexIdentity):
        return index
    if index.embedder is None or index.dense is None:
        raise ConfigError(
            "the support threshold is calibrated on a dense + BM25 index; got BM25 only"
        )
    return IndexIdentity(
        chunks=index.chunk_fingerprint,
        embedder=index.embedder.fingerprint,
        dense=index.dense.settings.model_dump(mode="json"),
        bm25=index.bm25.settings.model_dump(mode="json"),
    )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _json_sha256(value: Any) -> str:
    return _sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8"))


def calibration_inputs(
    *,
    gold_path: str | Path,
    held_out: Mapping[str, tuple[str, str]],
    titles: Mapping[str, str],
    index: Any,
    judge: str,
    retriever: str,
    retrieval: RetrievalSettings,
    k: int,
    settings: ContextSettings,
    source: str,
) -> dict[str, Any]:
    """Everything a held-out calibration depends on, as JSON values (what a pin must match).

    Args:
        gold_path: the gold file (its sha256: it decides the slice, hence the held-out set).
        held_out: ``{qid: (question, paper_id)}`` from
            :func:`rag.answer.calibrate.held_out_questions`.
        titles: ``{paper_id: title}`` shown in the contexts.
        index: the built index (:class:`rag.index.build.Indexed`) or its :class:`IndexIdentity`.
        judge: the judge's ``name`` (a content key of its settings, embedder and fitted model).
        retriever: the retriever's name, built with ``retrieval``.
        k: hits per context.
        settings: how hits become contexts.
        source: where ``held_out`` came from (a key of :data:`rag.answer.calibrate.SOURCES`).
    """
    ident = index_identity(index)
    inputs = {
        "format": PIN_FORMAT,
        "code": {"calibration": CALIBRATION_VERSION, "claims": CLAIMS_VERSION},
        "grid": list(GRID),
        "exclude_depth": EXCLUDE_DEPTH,
        "gold_sha256": _sha256(Path(gold_path).read_bytes()),
        "held_out_source": source,
        "held_out_n": len(held_out),
        "held_out_sha256": _json_sha256(sorted((q, list(v)) for q, v in held_out.items())),
        "titles_sha256": _json_sha256(sorted(titles.items())),
        "chunks": ident.chunks,
        "embedder": ident.embedder,
        "dense_index": ident.dense,
        "bm25_index": ident.bm25,
        "judge": judge,
        "retriever": retriever,
        "retrieval_settings": retrieval.model_dump(mode="json"),
        "k": k,
        "context_settings": settings.model_dump(mode="json"),
    }
    return json.loads(json.dumps(inputs))  # tuples become lists, as a loaded pin holds them


def to_json(cal: Calibration, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON document of a calibration and the inputs it was chosen on."""
    return {"inputs": dict(inputs), **cal.to_metrics()}


def write(cal: Calibration, inputs: Mapping[str, Any], path: Path) -> Path:
    """Write ``cal`` as JSON to ``path`` atomically (temporary file, then rename)."""
    return write_atomic(path, json.dumps(to_json(cal, inputs), indent=1) + "\n")


def _from_json(doc: Mapping[str, Any]) -> Calibration:
    return Calibration(
        threshold=float(doc["threshold"]),
        balanced_accuracy=float(doc["balanced_accuracy"]),
        answered=float(doc["answered"]),
        declined=float(doc["declined"]),
        n=int(doc["n"]),
        curve=[{k: float(v) for k, v in row.items()} for row in doc["curve"]],
        scores={q: (float(a), float(b)) for q, (a, b) in doc["scores"].items()},
    )


def differing_inputs(want: Mapping[str, Any], have: Mapping[str, Any]) -> list[str]:
    """The input names whose values differ between ``want`` and ``have`` (sorted)."""
    return [k for k in sorted(set(want) | set(have)) if want.get(k) != have.get(k)]


def lookup(inputs: Mapping[str, Any], path: Path | None = None) -> PinLookup:
    """The calibration pinned at ``path`` (default :func:`pin_path`) if it was chosen on exactly
    ``inputs``, with a note saying so; else no calibration and a note saying why (no file, or the
    inputs that differ, also logged).

    Raises:
        ConfigError: the file exists but is not a pinned calibration (the message names it).
    """
    path = path or pin_path()
    where = paths.display(path)
    if not path.exists():
        return PinLookup(None, f"calibrated here (no pinned calibration at {where})")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        differ = differing_inputs(inputs, doc["inputs"])
        cal = None if differ else _from_json(doc)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise ConfigError(f"{where} is not a pinned calibration: {e!r}") from e
    if differ:
        logger.info("pinned calibration %s was chosen on other inputs (%s differ)", where, differ)
        return PinLookup(
            None, f"calibrated here ({where} was chosen on other inputs: {', '.join(differ)})"
        )
    return PinLookup(cal, f"pinned in {where}, chosen on the same inputs (`make calibrate`)")
