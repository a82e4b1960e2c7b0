"""BEIR SciFact: load it into the project's plain IR dicts, download it, and reproduce the table.

SciFact (Wadden et al., "Fact or Fiction: Verifying Scientific Claims", EMNLP 2020) as packaged by
BEIR (Thakur et al., "BEIR: A Heterogeneous Benchmark for Zero-shot Evaluation of Information
Retrieval Models", NeurIPS 2021): 5,183 abstracts, 300 test claims, 339 relevant pairs.

Published nDCG@10 on the test split: BM25 0.665 (BEIR, Lucene multifield) / 0.679 (flat);
all-MiniLM-L6-v2 0.645 (MTEB). :func:`reproduce` runs our BM25 and dense retrievers through the
report's own pipeline and evaluates them with ranx. BEIR's evaluator drops a retrieved doc whose
id equals the query id; SciFact's test query ids and corpus ids do not overlap, so that rule
changes nothing here (it is applied anyway).
"""

from __future__ import annotations

import csv
import hashlib
import logging
import shutil
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import requests
from tenacity import (
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from rag.errors import DownloadError, GoldError
from rag.evaluation.stats import CI
from rag.ir import Qrels
from rag.jsonl import iter_jsonl
from rag.paths import resolve, shared_dir

logger = logging.getLogger(__name__)

#: The official BEIR archive and its md5, as published in BEIR's dataset table.
SCIFACT_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip"
SCIFACT_MD5 = "5f7d1de60b170fc8027bb7898e2efca1"

#: Published nDCG@10 on the SciFact test split: the one place these numbers live.
#: BM25: BEIR (Thakur et al. 2021) Lucene multifield 0.665, flat 0.679; all-MiniLM-L6-v2: MTEB.
PUBLISHED_NDCG10 = {"bm25_multifield": 0.665, "bm25_flat": 0.679, "minilm": 0.645}
_BM25_LABEL = (
    f"{PUBLISHED_NDCG10['bm25_multifield']} (multifield) / {PUBLISHED_NDCG10['bm25_flat']} (flat)"
)
_RESULTS = "embeddings-benchmark/results"

#: Published SciFact nDCG@10 (BEIR test split) in the public MTEB results, with the file each
#: comes from (docs/models.md gives the repository and model revisions). EmbeddingGemma has no
#: SciFact file there: its card reports MTEB v2 averages only.
PUBLISHED_MTEB: dict[str, dict[str, Any]] = {
    "minilm": {
        "model": "all-MiniLM-L6-v2",
        "ndcg@10": 0.6451,
        "source": f"{_RESULTS}: results/sentence-transformers__all-MiniLM-L6-v2/"
        "<revision>/SciFact.json (mteb 1.12.75)",
    },
    "e5-small": {
        "model": "multilingual-e5-small",
        "ndcg@10": 0.6759,
        "source": f"{_RESULTS}: results/intfloat__multilingual-e5-small/"
        "<revision>/SciFact.json (mteb 1.20.0; fp32 weights)",
    },
    "mpnet-base-v2": {
        "model": "all-mpnet-base-v2",
        "ndcg@10": 0.6557,
        "source": f"{_RESULTS}: results/sentence-transformers__all-mpnet-base-v2/"
        "<revision>/SciFact.json (mteb 1.12.75)",
    },
    "nomic-embed-v1.5": {
        "model": "nomic-embed-text-v1.5",
        "ndcg@10": 0.7028,
        "source": f"{_RESULTS}: results/nomic-ai__nomic-embed-text-v1.5/external/SciFact.json "
        "(from the model card, 768-d; the card's run is not recorded, up to 8,192 tokens)",
    },
}

#: How the report labels them, by the system (or retriever row) that reproduces each.
PUBLISHED_LABELS = {
    "bm25": _BM25_LABEL,
    "bm25_porter": _BM25_LABEL,
    "dense": f"{PUBLISHED_NDCG10['minilm']} (all-MiniLM-L6-v2, MTEB)",
    "minilm": f"{PUBLISHED_NDCG10['minilm']} (all-MiniLM-L6-v2, MTEB)",
    **{
        name: f"{p['ndcg@10']:.3f} ({p['model']}, MTEB)"
        for name, p in PUBLISHED_MTEB.items()
        if name != "minilm"
    },
}

Corpus = dict[str, dict[str, str]]
Queries = dict[str, str]


def default_dir() -> Path:
    """The offline copy: ``<shared>/datasets/scifact``."""
    return shared_dir() / "datasets" / "scifact"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [obj for _, obj in iter_jsonl(path, GoldError)]


def load_qrels(path: Path) -> Qrels:
    """Read a BEIR qrels TSV (``query-id  corpus-id  score`` with a header)."""
    qrels: dict[str, dict[str, int]] = {}
    try:
        with path.open(encoding="utf-8", newline="") as f:
            reader = csv.reader(f, delimiter="\t")
            header = next(reader, None)
            if header is None or header[:2] != ["query-id", "corpus-id"]:
                raise GoldError(
                    f"{path}: expected a 'query-id corpus-id score' header, got {header}"
                )
            for n, row in enumerate(reader, start=2):
                if not row:
                    continue
                if len(row) != 3:
                    raise GoldError(f"{path}:{n}: expected 3 tab-separated fields, got {row}")
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    except OSError as e:
        raise GoldError(f"cannot read qrels {path}: {e}") from e
    except ValueError as e:
        raise GoldError(f"{path}: a relevance grade is not an integer ({e})") from e
    return qrels


def load_scifact(
    root: str | Path | None = None, split: str = "test"
) -> tuple[Corpus, Queries, Qrels]:
    """Load SciFact as ``(corpus {doc_id: {title, text}}, queries {qid: text}, qrels)``.

    Only the queries of ``split`` (those with qrels) are returned. ``root`` defaults to the shared
    offline copy; pass the folder :func:`download_scifact` produced on a machine with internet.
    """
    d = resolve(root) if root is not None else default_dir()
    qrels_path = d / "qrels" / f"{split}.tsv"
    if not qrels_path.exists():
        raise GoldError(
            f"no SciFact split {split!r} at {qrels_path}; splits are 'train' and 'test'"
        )
    corpus = {
        str(r["_id"]): {"title": r.get("title", ""), "text": r.get("text", "")}
        for r in _read_jsonl(d / "corpus.jsonl")
    }
    qrels = load_qrels(qrels_path)
    all_q = {str(r["_id"]): r["text"] for r in _read_jsonl(d / "queries.jsonl")}
    missing = sorted(set(qrels) - set(all_q))
    if missing:
        raise GoldError(f"{qrels_path}: query ids {missing[:5]} have no text in queries.jsonl")
    unknown = sorted({doc for rel in qrels.values() for doc in rel} - set(corpus))
    if unknown:
        raise GoldError(f"{qrels_path}: doc ids {unknown[:5]} are not in corpus.jsonl")
    queries = {q: all_q[q] for q in qrels}
    logger.info("SciFact %s: %d docs, %d queries", split, len(corpus), len(queries))
    return corpus, queries, qrels


# -- download ----------------------------------------------------------------------------------


class _Retryable(DownloadError):
    """A transient failure (connection error, 429, 5xx) worth another attempt."""


def _fetch(url: str, dest: Path, timeout: float) -> None:
    try:
        with requests.get(url, stream=True, timeout=timeout) as r:
            if r.status_code == 429 or r.status_code >= 500:
                raise _Retryable(f"GET {url}: HTTP {r.status_code}")
            if r.status_code != 200:
                raise DownloadError(f"GET {url}: HTTP {r.status_code}; check the URL")
            expected = r.headers.get("Content-Length")
            n = 0
            with dest.open("wb") as f:
                for part in r.iter_content(1 << 16):
                    f.write(part)
                    n += len(part)
    except requests.RequestException as e:
        raise _Retryable(f"GET {url}: {e}") from e
    if expected is not None and n != int(expected):
        raise _Retryable(f"GET {url}: got {n} of {expected} bytes (connection cut short)")


def download_scifact(
    dest: str | Path,
    *,
    url: str = SCIFACT_URL,
    md5: str | None = SCIFACT_MD5,
    attempts: int = 4,
    timeout: float = 60.0,
) -> Path:
    """Download and unpack the BEIR SciFact archive; returns the folder holding corpus.jsonl.

    The archive is verified against ``md5`` (None skips the check) before it is unpacked; a
    transient failure (connection error, 429/5xx, truncated body) is retried with exponential
    backoff. An existing complete folder is returned as is.
    """
    dest = Path(dest)
    out = dest / "scifact"
    if (out / "corpus.jsonl").exists() and (out / "qrels").is_dir():
        return out
    dest.mkdir(parents=True, exist_ok=True)
    get = retry(
        retry=retry_if_exception_type(_Retryable),
        stop=stop_after_attempt(attempts),
        wait=wait_exponential(multiplier=0.2, max=10),
        reraise=True,
    )(_fetch)
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        zpath = Path(tmp) / "scifact.zip"
        try:
            get(url, zpath, timeout)
        except _Retryable as e:
            raise DownloadError(f"{e} (after {attempts} attempts); try again later") from e
        if md5 is not None:
            got = hashlib.md5(zpath.read_bytes()).hexdigest()
            if got != md5:
                raise DownloadError(
                    f"{url}: md5 {got} != expected {md5}; the archive is corrupt or changed"
                )
        unpacked = Path(tmp) / "unpacked"
        try:
            with zipfile.ZipFile(zpath) as zf:
                for name in zf.namelist():
                    target = (unpacked / name).resolve()
                    if not target.is_relative_to(unpacked.resolve()):
                        raise DownloadError(f"{url}: archive member {name!r} escapes the folder")
                zf.extractall(unpacked)
        except zipfile.BadZipFile as e:
            raise DownloadError(f"{url}: not a zip archive ({e})") from e
        found = sorted(p.parent for p in unpacked.rglob("corpus.jsonl"))
        if not found:
            raise DownloadError(f"{url}: archive has no corpus.jsonl")
        if out.exists():
            shutil.rmtree(out)
        shutil.move(str(found[0]), out)
    logger.info("SciFact unpacked to %s", out)
    return out


# -- reproduction ------------------------------------------------------------------------------


def drop_self_hits(run: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """BEIR's evaluation rule: ignore a retrieved doc whose id equals the query id."""
    return {q: {d: s for d, s in docs.items() if d != q} for q, docs in run.items()}


def reproduce(
    embedders: tuple[str, ...] = ("minilm",),
    root: str | Path | None = None,
    *,
    bm25: bool = True,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Reproduce the SciFact test table through the report's own pipeline.

    The same :func:`rag.index.build.index_documents`, retrievers, :func:`run_queries` and
    :func:`rag.evaluation.metrics.evaluate_run` as notebook 04, so the command and the report
    cannot disagree. Systems: ``bm25`` (project tokenizer), ``bm25_porter`` (Porter stemming) and
    one dense run per embedder name.

    Returns ``{"ndcg@10": {system: CI}, "published": PUBLISHED_NDCG10, "seconds": {...},
    "n_queries", "n_docs"}``, each :class:`~rag.evaluation.stats.CI` rounded to 4 decimals.
    """
    from rag.evaluation.metrics import evaluate_run
    from rag.index.build import index_documents
    from rag.retrieval.retrievers import BM25Retriever, DenseRetriever, Retriever, run_queries

    corpus, queries, qrels = load_scifact(root)
    names = (["bm25", "bm25_porter"] if bm25 else []) + list(embedders)
    results: dict[str, CI] = {}
    seconds: dict[str, float] = {}
    for name in names:
        t0 = time.perf_counter()
        if name.startswith("bm25"):
            params = {"tokenizer": {"stemmer": "porter"}} if name == "bm25_porter" else {}
            ix = index_documents(corpus, "scifact", embedder=None, bm25=params)
            retriever: Retriever = BM25Retriever(ix.bm25, ix.store)
        else:
            ix = index_documents(corpus, "scifact", embedder=name, show_progress=show_progress)
            retriever = DenseRetriever(ix.embedder, ix.dense, ix.store)
        runs = run_queries(retriever, queries, 100, show_progress=show_progress)
        seconds[name] = round(time.perf_counter() - t0, 2)
        ev = evaluate_run(qrels, drop_self_hits(runs), ("ndcg@10",))
        results[name] = ev.aggregate["ndcg@10"].rounded(4)
        logger.info("SciFact %s nDCG@10 = %s (%.1fs)", name, results[name], seconds[name])
    return {
        "ndcg@10": results,
        "published": PUBLISHED_NDCG10,
        "seconds": seconds,
        "n_queries": len(queries),
        "n_docs": len(corpus),
    }


def published_label(system: str) -> str:
    """The published nDCG@10 a system of ours reproduces, as the report prints it ('' if none)."""
    return PUBLISHED_LABELS.get(system, "")


def print_table(res: dict[str, Any]) -> None:
    """Print the reproduction next to the published numbers."""
    print(f"{'system':<14}{'nDCG@10':>9}  {'95% CI':<17}published")
    for name, ci in res["ndcg@10"].items():
        print(
            f"{name:<14}{ci.estimate:>9.4f}  [{ci.low:.3f}, {ci.high:.3f}]   "
            f"{published_label(name) or '-'}"
        )


def subset(
    corpus: Corpus, queries: Queries, qrels: Qrels, *, max_queries: int = 0, max_docs: int = 0
) -> tuple[Corpus, Queries, Qrels]:
    """A deterministic slice of SciFact for quick runs (the smoke profile).

    The first ``max_queries`` test queries by id (0: all) keep their qrels; the corpus keeps every
    document relevant to them plus the first documents by id up to ``max_docs`` (0: all), so each
    kept query stays answerable and the distractors are not chosen by looking at any run.
    """
    qids = sorted(queries, key=lambda q: (len(q), q))[: max_queries or None]
    q = {i: queries[i] for i in qids}
    r = {i: dict(qrels[i]) for i in qids if i in qrels}
    if not max_docs:
        return corpus, q, r
    keep = {d for rel in r.values() for d in rel}
    for d in sorted(corpus):
        if len(keep) >= max_docs:
            break
        keep.add(d)
    return {d: corpus[d] for d in sorted(keep)}, q, r
