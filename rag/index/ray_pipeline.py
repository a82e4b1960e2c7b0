"""The folder pipeline as one streaming Ray Data job: parse tasks → chunk actor → embed actors.

One row per PDF flows through three stages, each calling the serial path's own function:

1. **parse** (tasks): the file's sha256, then :func:`rag.corpus.parse.load_parsed`, which reads or
   writes the parse cache; a PDF that does not parse comes back as a row with its status.
2. **chunk** (an actor that loads the tokenizer once): :func:`rag.text.chunk_cache.chunk_corpus`
   of the one paper (cached per paper) and :func:`rag.text.hygiene.split_body`, which marks the
   chunks the index keeps and repairs their texts. Both are per paper, so a paper's chunks and
   kept texts are the serial path's.
3. **embed** (actors that load the embedder once): the kept texts the embedding cache does not
   hold yet go through :func:`rag.index.embed_cache.embed_texts` (unique, longest first, in
   blocks, normalised) with the cache off; the row carries the new vectors back.

The driver checks and commits each row's vectors to the embedding cache
(:class:`~rag.index.embed_cache.VectorCache`) as the stream yields it (so a killed job keeps every
paper it received, and a paper whose vectors are not finite or not unit length fails its row),
orders the papers as the folder does, and writes the corpus chunk set under the fingerprint
:func:`chunk_corpus` would use, so the index build (:func:`rag.index.build.index_corpus`) and a
later serial run find everything cached. An exception in a stage is caught per row: the paper is
a failed row with its stage, never a failed job.

Backpressure: Ray Data's streaming executor runs the stages side by side and holds back upstream
tasks while downstream queues are full; the job caps the object store memory the pipeline may
hold (:data:`OBJECT_STORE_BUDGET`) and the tasks in flight per actor, so parsing cannot run far
ahead of embedding. Workers get ``$RAG_CACHE_DIR`` from the driver through the job's runtime
environment, so on one machine, or a cluster whose cache folder is shared storage, every stage
writes the driver's cache; a worker without it re-does work, never wrong work (the caches are
content-addressed).

Vectors: a paper's texts are embedded in their own blocks, where the serial path sorts the whole
corpus's texts into blocks; a model whose output depended on batch padding would give vectors
equal only up to float rounding. ``outputs/bench/pipeline.json`` compares the two for MiniLM (fp32):
identical.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag import paths
from rag.errors import IndexBuildError
from rag.index.embed_cache import VectorCache, cache_path, embed_texts, text_key
from rag.index.ray_embed import EmbedderSpec, actor_embedder, init_ray, machine_plan

if TYPE_CHECKING:
    from rag.corpus.parse import ParseSettings
    from rag.index.embed import Embedder
    from rag.text.chunk import ChunkSettings
    from rag.types import ParsedPaper

logger = logging.getLogger(__name__)

#: Logical CPUs per parse task, chunk actor and embed actor: on 2 CPUs two parses, the chunker
#: and one embedder are all placed (the embedder's torch threads come from ``machine_plan``)
PARSE_CPUS, CHUNK_CPUS, EMBED_CPUS = 0.5, 0.25, 0.5
#: Object store bytes the streaming executor may hold for the pipeline's rows (backpressure)
OBJECT_STORE_BUDGET = 256 * 2**20
#: Rows queued on one actor at a time
TASKS_PER_ACTOR = 2


def _row(paper_id: str, order: int, **kw: Any) -> dict[str, Any]:
    """A pipeline row with every column present (Ray Data infers one schema per block)."""
    base = {
        "paper_id": paper_id,
        "order": order,
        "stage": "",
        "status": "ok",
        "error": "",
        "parsed": "",
        "chunks": "",
        "kept": "",
        "kept_texts": "",
        "new": "",
        "vecs": b"",
        "parse_s": 0.0,
        "chunk_s": 0.0,
        "embed_s": 0.0,
        "embedded": 0,
        "cached": 0,
    }
    base.update(kw)
    return base


def parse_row(row: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """Stage 1: the parsed paper as JSON, or a failed row naming the parse status."""
    from rag.corpus.parse import ParseSettings, load_parsed
    from rag.filehash import sha256_file

    t0 = time.perf_counter()
    path = Path(row["path"])
    try:
        parsed = load_parsed(path, sha256_file(path), ParseSettings(**settings))
    except OSError as e:  # unreadable file: load_parsed itself never raises for a bad PDF
        return _row(row["paper_id"], row["order"], stage="parse", status="error", error=str(e))
    out = _row(row["paper_id"], row["order"], parse_s=time.perf_counter() - t0)
    if not parsed.ok:
        out.update(stage="parse", status=parsed.status, error=parsed.error or "")
    else:
        out["parsed"] = json.dumps(parsed.to_dict(), ensure_ascii=False)
    return out


class ChunkStage:
    """Stage 2: one paper's chunks (cached per paper) and which of them the index keeps."""

    def __init__(self, chunking: ChunkSettings) -> None:
        from rag.text.chunk import require_settings
        from rag.text.tokenize import default_tokenizer

        self.settings = require_settings(chunking, "ChunkStage")
        self.tokenizer = default_tokenizer()

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        from rag.text.chunk_cache import chunk_corpus
        from rag.text.hygiene import split_body
        from rag.types import ParsedPaper

        if row["stage"]:
            return row
        t0 = time.perf_counter()
        try:
            parsed = ParsedPaper.from_dict(json.loads(row["parsed"]))
            chunks = chunk_corpus([parsed], self.settings, tokenizer=self.tokenizer)
            kept, _ = split_body(chunks, enabled=self.settings.index_hygiene)
        except Exception as e:  # noqa: BLE001 - one paper's failure is its row, not the job's
            return {**row, "stage": "chunk", "status": "error", "error": f"{type(e).__name__}: {e}"}
        keep = {c.chunk_id for c in kept}
        return {
            **row,
            "chunks": json.dumps([c.to_dict() for c in chunks], ensure_ascii=False),
            "kept": json.dumps([i for i, c in enumerate(chunks) if c.chunk_id in keep]),
            "kept_texts": json.dumps([c.text for c in kept], ensure_ascii=False),
            "chunk_s": time.perf_counter() - t0,
        }


class EmbedStage:
    """Stage 3: vectors for the kept texts the embedding cache does not hold yet."""

    def __init__(self, spec: EmbedderSpec, threads: int) -> None:
        self.embedder = actor_embedder(spec, threads)
        self.dim = int(self.embedder.dim)

    def _cached(self, keys: list[bytes]) -> set[bytes]:
        if not cache_path(self.embedder.fingerprint).exists():
            return set()  # a worker without the driver's cache folder embeds everything
        with VectorCache.open(self.embedder.fingerprint, self.dim) as vc:
            return set(vc.get(keys))

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        if row["stage"]:
            return row
        t0 = time.perf_counter()
        texts = json.loads(row["kept_texts"])  # as hygiene repaired them
        try:
            found = self._cached([text_key(t) for t in texts])
            todo = list(dict.fromkeys(t for t in texts if text_key(t) not in found))
            vecs = embed_texts(todo, todo, self.embedder, cache=False, show_progress=False)
        except Exception as e:  # noqa: BLE001 - one paper's failure is its row, not the job's
            return {**row, "stage": "embed", "status": "error", "error": f"{type(e).__name__}: {e}"}
        return {
            **row,
            "new": json.dumps(todo, ensure_ascii=False),
            "vecs": np.ascontiguousarray(vecs, dtype=np.float32).tobytes(),
            "embedded": len(todo),
            "cached": len(texts) - len(todo),
            "embed_s": time.perf_counter() - t0,
        }


def write_chunk_set(parsed: list[ParsedPaper], chunks: list[Any], settings: ChunkSettings) -> str:
    """Save the corpus chunk set where :func:`rag.text.chunk_cache.chunk_corpus` looks for it
    (same fingerprint, same metadata), unless it is there; returns the fingerprint."""
    from rag.text.chunk_cache import chunk_fingerprint, chunks_path, save_chunk_set

    fp = chunk_fingerprint(parsed, settings)
    if not chunks_path(fp).exists():
        save_chunk_set(chunks, fp, settings, n_papers=len(parsed))
    return fp


def input_rows(files: list[Path]) -> list[dict[str, Any]]:
    """The job's input: one row per PDF (id, position in the folder, absolute path)."""
    return [{"paper_id": p.stem, "order": i, "path": str(p.resolve())} for i, p in enumerate(files)]


def _dataset(
    files: list[Path],
    chunking: ChunkSettings,
    parse: ParseSettings,
    spec: EmbedderSpec,
    plan: dict[str, int],
) -> Any:
    import ray

    items = input_rows(files)
    ds = ray.data.from_items(items, override_num_blocks=len(items))
    ds = ds.map(
        parse_row,
        fn_kwargs={"settings": parse.model_dump(mode="json")},
        num_cpus=PARSE_CPUS,
        concurrency=plan["parse_tasks"],
    )
    ds = ds.map(
        ChunkStage,
        fn_constructor_args=(chunking,),
        concurrency=1,
        num_cpus=CHUNK_CPUS,
    )
    return ds.map(
        EmbedStage,
        fn_constructor_args=(spec, plan["threads"]),
        concurrency=plan["embed_actors"],
        num_cpus=EMBED_CPUS,
    )


def collect(
    rows: Iterable[Mapping[str, Any]], chunking: ChunkSettings, embedder: Embedder
) -> tuple[list[ParsedPaper], dict[str, Any]]:
    """The driver's half: commit each row's new vectors to the embedding cache as it arrives,
    then order the papers as the folder does and write the corpus chunk set.

    Returns the parsed papers that got through every stage and the run's record: ``failed``
    rows, ``papers_indexed``, ``chunks``, ``passages`` (kept chunks through the embed stage),
    ``embedded`` and ``cached`` passages, and per-stage worker ``seconds``.
    """
    from rag.types import Chunk, ParsedPaper

    dim = int(embedder.dim)
    done: list[dict[str, Any]] = []
    with VectorCache.open(embedder.fingerprint, dim, name=embedder.name) as vc:
        for row in rows:
            row = dict(row)
            if not row["stage"] and row["embedded"]:
                vecs = np.frombuffer(row["vecs"], dtype=np.float32).reshape(-1, dim)
                new = json.loads(row["new"])
                try:  # checked, then committed: each paper's vectors survive a killed job
                    vc.put([text_key(t) for t in new], vecs)
                except IndexBuildError as e:  # invalid vectors: the paper fails, nothing cached
                    row.update(stage="embed", status="error", error=str(e))
            row["vecs"] = b""
            done.append(row)
    done.sort(key=lambda r: r["order"])
    good = [r for r in done if not r["stage"]]
    parsed = [ParsedPaper.from_dict(json.loads(r["parsed"])) for r in good]
    chunks = [Chunk(**c) for r in good for c in json.loads(r["chunks"])]
    if parsed:
        write_chunk_set(parsed, chunks, chunking)
    return parsed, {
        "failed": [{k: r[k] for k in ("paper_id", "stage", "status", "error")}
                   for r in done if r["stage"]],
        "papers_indexed": len(parsed),
        "chunks": len(chunks),
        "passages": sum(len(json.loads(r["kept"])) for r in good),
        "embedded": sum(int(r["embedded"]) for r in good),
        "cached": sum(int(r["cached"]) for r in good),
        "seconds": {s: sum(r[f"{s}_s"] for r in done) for s in ("parse", "chunk", "embed")},
    }  # fmt: skip


def ray_stages(
    files: list[Path],
    chunking: ChunkSettings,
    parse: ParseSettings,
    spec: EmbedderSpec,
    embedder: Embedder,
    *,
    address: str | None = None,
    show_progress: bool = False,
) -> tuple[list[ParsedPaper], dict[str, Any]]:
    """Run the three stages over ``files`` as one Ray Data job and :func:`collect` its rows;
    the record gains ``ray``: address, nodes, CPUs, the plan, init and stream seconds."""
    import ray

    init_s = init_ray(address, env_vars={paths.CACHE_ENV: str(paths.cache_dir())})
    t0 = time.perf_counter()
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = show_progress
    ctx.execution_options.resource_limits = ctx.execution_options.resource_limits.copy(
        object_store_memory=OBJECT_STORE_BUDGET
    )
    ctx.max_tasks_in_flight_per_actor = TASKS_PER_ACTOR
    cpus = ray.cluster_resources().get("CPU", 1)
    plan = {
        "parse_tasks": max(1, int((cpus - CHUNK_CPUS - EMBED_CPUS) / PARSE_CPUS)),
        "embed_actors": max(1, int(cpus) // 4),
        "threads": machine_plan(cpus)["threads"],
    }
    ds = _dataset(files, chunking, parse, spec, plan)
    parsed, record = collect(ds.iter_rows(), chunking, embedder)
    record["ray"] = {
        "address": address or "local",
        "nodes": sum(1 for n in ray.nodes() if n.get("Alive")),
        "cpus": cpus,
        "plan": plan,
        "init_s": round(init_s, 2),
        "stream_s": round(time.perf_counter() - t0, 3),
    }
    return parsed, record
