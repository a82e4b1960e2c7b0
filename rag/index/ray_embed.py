"""Passage embedding as a Ray Data job, writing into the same content-addressed cache as the serial
path (:mod:`rag.index.embed_cache`), so either engine can resume the other's work.

The texts not yet cached are ordered and cut into blocks exactly as :func:`embed_texts` does
(unique texts, longest first, ``block_size`` per block). Each block is one Ray Data row;
``map_batches`` runs an actor class that loads the embedder once per actor and encodes a block per
call, so every model call sees the same texts in the same order as the serial path and the vectors
are the same. The driver checks and commits each finished block through
:class:`~rag.index.embed_cache.VectorCache` as the stream yields it: a killed job keeps every
committed block, a re-run skips them (they are found in the cache), and a block of invalid vectors
is never committed.

``ray.init()`` starts a local Ray on this machine; ``address="auto"`` or ``"ray://host:10001"``
joins an existing cluster (``ray start --head`` on one node, ``ray start --address=...`` on the
others). Nothing else changes: actors are placed where CPUs are, the driver keeps the cache.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from rag import paths
from rag.errors import ConfigError, IndexBuildError
from rag.index.embed import Embedder, load_embedder, normalise
from rag.index.embed_cache import VectorCache, default_block, distinct_texts, longest_first
from rag.shard import process_env

logger = logging.getLogger(__name__)

EmbedderSpec = str | Callable[[], Embedder]


def _make(spec: EmbedderSpec) -> Embedder:
    return load_embedder(spec) if isinstance(spec, str) else spec()


def actor_embedder(spec: EmbedderSpec, threads: int) -> Embedder:
    """The embedder an actor loads once, with torch (when present) held to ``threads``."""
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:  # embedders without torch (tests) need no thread setting
        pass
    return _make(spec)


class EmbedActor:
    """A Ray Data actor: loads the embedder once, then encodes one block of texts per call."""

    def __init__(self, spec: EmbedderSpec, threads: int) -> None:
        self.embedder = actor_embedder(spec, threads)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, Any]:
        """Vectors per block; a block whose encoding raises comes back with no vectors and its
        error, so the driver still commits every block that finished (a raised error would let
        Ray drop finished blocks the driver had not read yet)."""
        keys_out, vecs_out, errors = [], [], []
        for keys, texts in zip(batch["keys"], batch["texts"], strict=True):
            keys_out.append(list(keys))
            try:
                vecs = np.asarray(self.embedder.encode_passages(list(texts)), dtype=np.float32)
            except Exception as e:  # noqa: BLE001 - reported by the driver after the commits
                vecs_out.append(np.zeros((0, int(getattr(self.embedder, "dim", 0) or 0)), "f4"))
                errors.append(f"{type(e).__name__}: {e}")
                continue
            vecs_out.append(normalise(vecs))
            errors.append("")
        return {"keys": keys_out, "vecs": vecs_out, "error": errors}


def machine_plan(total_cpus: float, threads_per_actor: int = 2) -> dict[str, int]:
    """Actors and threads for ``total_cpus``: one actor per ``threads_per_actor`` CPUs (at least
    one), each with that many torch threads. On 2 cores: one actor, two threads."""
    threads = max(1, min(threads_per_actor, int(total_cpus)))
    return {"concurrency": max(1, int(total_cpus) // threads), "threads": threads}


#: a local Ray on a loaded machine: a longer agent deadline, no usage-stats call home
RAY_LOCAL_ENV = {
    "RAY_agent_register_timeout_ms": "120000",
    "RAY_raylet_start_wait_time_s": "120",
    "RAY_USAGE_STATS_ENABLED": "0",
}
RAY_INIT_ATTEMPTS = 3


def init_ray(address: str | None = None, env_vars: dict[str, str] | None = None) -> float:
    """Start (or join, with ``address``) Ray once per process; returns the seconds it took.

    ``env_vars`` reach every worker of the job beside ``PYTHONPATH`` (the pipeline passes its
    cache folder, so workers write the driver's caches).

    Retried: on a busy machine the raylet can miss Ray's own 30 s start deadline ("The current
    node timed out during startup"); a second attempt usually succeeds.
    """
    import ray

    t0 = time.perf_counter()
    if ray.is_initialized():
        return 0.0
    env = {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in _pythonpath() if p),
                        **(env_vars or {})}}  # fmt: skip
    kw: dict[str, Any] = {"runtime_env": env, "log_to_driver": False}
    if address:
        kw["address"] = address
    else:
        kw.update(include_dashboard=False, object_store_memory=256 * 2**20)
    start_ray(kw)
    ray.data.DataContext.get_current().enable_progress_bars = False
    return time.perf_counter() - t0


def start_ray(kw: dict[str, Any]) -> None:
    """``ray.init(**kw)``, retried; a local Ray (no ``address``) gets :data:`RAY_LOCAL_ENV` while
    it starts.

    The one place Ray is started, for the embedding job and for ``rag sweep --engine ray``: on a
    busy machine the raylet can miss Ray's own 30 s start deadline ("The current node timed out
    during startup"), and a second attempt usually succeeds.
    """
    import ray
    from tenacity import Retrying, before_sleep_log, stop_after_attempt, wait_fixed

    local_env = RAY_LOCAL_ENV if "address" not in kw else {}
    with process_env(local_env, keep_set=True):  # Ray's processes read them when they start
        for attempt in Retrying(
            stop=stop_after_attempt(RAY_INIT_ATTEMPTS),
            wait=wait_fixed(2),
            before_sleep=before_sleep_log(logger, logging.WARNING),
            reraise=True,
        ):
            with attempt:
                try:
                    ray.init(**kw)
                except Exception:
                    ray.shutdown()
                    raise


def _pythonpath() -> list[str]:
    # workers import the project (and test helpers) the way the driver does
    return [str(paths.resolve(".")), os.environ.get("PYTHONPATH", "")]


def ray_embed_texts(
    ids: list[str],
    texts: list[str],
    embedder: EmbedderSpec,
    *,
    address: str | None = None,
    block_size: int | None = None,
    concurrency: int | None = None,
    threads_per_actor: int = 2,
    show_progress: bool = True,
    stats: dict[str, Any] | None = None,
) -> np.ndarray:
    """Embed passages through Ray Data, reusing and filling the embedding cache.

    Args:
        ids, texts: as :func:`rag.index.embed_cache.embed_texts`.
        embedder: a name for :func:`load_embedder` or a zero-argument factory (importable by the
            workers); each actor builds its own, the driver one for the fingerprint.
        address: a Ray cluster to join (None: start a local Ray).
        block_size: texts per block = per model call and commit (default as the serial path).
        concurrency: actors (default :func:`machine_plan` of the cluster's CPUs).
        stats: filled with timings (``ray_init_s``, ``embedded``, ``cached``, ``blocks``).
    """
    import ray

    keys, first = distinct_texts(ids, texts, "ray_embed_texts")
    stats = stats if stats is not None else {}
    local = _make(embedder)
    dim = int(local.dim)
    out = np.zeros((len(texts), dim), dtype=np.float32)
    if not texts:
        return out
    block = block_size or default_block(local)
    # one job per cache at a time: a second run waits, then finds the first one's vectors
    with VectorCache.open(local.fingerprint, dim, name=local.name) as vc, vc.lock():
        found = vc.get(list(first))
        todo = longest_first(first, found, texts)
        stats.update(cached=len(found), embedded=len(todo), blocks=-(-len(todo) // block))
        logger.info(
            "ray_embed_texts: %d unique, %d cached, %d to embed", len(first), len(found), len(todo)
        )
        if todo:
            stats["ray_init_s"] = round(init_ray(address), 2)
            plan = machine_plan(ray.cluster_resources().get("CPU", 1), threads_per_actor)
            if concurrency is not None:
                if concurrency < 1:
                    raise ConfigError(
                        f"ray_embed_texts: concurrency must be >= 1, got {concurrency}"
                    )
                plan["concurrency"] = concurrency
            stats.update(plan)
            rows = [
                {
                    "keys": todo[s : s + block],
                    "texts": [texts[first[k]] for k in todo[s : s + block]],
                }
                for s in range(0, len(todo), block)
            ]
            ds = ray.data.from_items(rows, override_num_blocks=len(rows)).map_batches(
                EmbedActor,
                fn_constructor_args=(embedder, plan["threads"]),
                batch_size=1,
                concurrency=plan["concurrency"],
                num_cpus=plan["threads"],
            )
            bar = tqdm(total=len(todo), desc=f"ray embed {local.name}", unit="text",
                       disable=not show_progress)  # fmt: skip
            failed: list[str] = []
            with bar:
                for batch in ds.iter_batches(batch_size=1, batch_format="numpy"):
                    if str(batch["error"][0]):
                        failed.append(str(batch["error"][0]))
                        continue
                    part, vecs = list(batch["keys"][0]), np.stack(batch["vecs"][0])
                    if vecs.shape != (len(part), dim):
                        raise IndexBuildError(
                            f"ray_embed_texts: embedder returned {vecs.shape} for {len(part)} texts"
                        )
                    try:  # checked, then committed: a killed job keeps every block it put
                        vc.put(part, vecs)
                    except IndexBuildError as e:  # invalid vectors: reported with the others
                        failed.append(str(e))
                        continue
                    found.update(zip(part, vecs.astype(np.float32), strict=True))
                    bar.update(len(part))
            if failed:
                raise IndexBuildError(
                    f"ray_embed_texts: {len(failed)} of {len(rows)} block(s) failed, the others "
                    f"committed to the cache (a re-run embeds only what is missing): {failed[0]}"
                )
    for i, k in enumerate(keys):
        out[i] = found[k]
    return out
