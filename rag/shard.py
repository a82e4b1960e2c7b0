"""Both cores for work that one process does poorly on two threads: fixed, pinned shards.

Why: on 2 cores, small models barely use a second thread, while two single-thread workers, each
in a thread pinned to its own core, do clearly more. SmolLM2-135M on llama.cpp runs ~1.5x faster
as two pinned single-thread instances than as one 2-thread instance, with the same answers
(``outputs/bench/llm_shards.json``); fp32 MiniLM passages gain ~1.15x with identical vectors,
while bf16 passages already use both threads (``outputs/bench/passage_shards.json``). So only
fp32 passages (the judge's, and every passage on a CPU without bf16) are sharded. Two unpinned
single-thread *processes* do far worse. docs/decisions.md keeps the measured table.

How: :func:`sharded_map` deals the items out round-robin (item ``i`` to shard ``i % n``), runs
each shard in order in its own thread, pinned (``os.sched_setaffinity`` on the calling thread)
to its own slice of the CPUs this process may use, and marks the thread with its shard number
(:func:`current_slot`). :class:`rag.llm.local.LocalBackend` keeps one model per slot, so a
shard always talks to the same model instance. Same items, same shards, same order per
instance: the answers are the same on every run (each instance's prompt-prefix reuse sees the
same sequence of prompts), and a question sent to several answerers in turn lands on the same
instance each time, so the prefix evaluated for the first answerer is reused by the next.
:func:`rag.index.embed_cache.embed_texts` shards its blocks the same way, with PyTorch at one
thread per shard (:func:`torch_threads`), so each block is the batch it would be in order
(fp32 embedders only, see above).

Latency per call is wall time while the other shard runs too (~1.4x a call alone); throughput is
what improves.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TypeVar

from rag.errors import ConfigError

T = TypeVar("T")
R = TypeVar("R")

#: Environment variable: how many pinned shards the lab may use (default 2; 1 turns them off,
#: as ``rag sweep`` does for cells that already run side by side).
SHARDS_ENV = "RAG_SHARDS"


def default_shards() -> int:
    """``$RAG_SHARDS`` or 2.

    Raises:
        ConfigError: the variable is set to something other than a whole number >= 1.
    """
    raw = os.environ.get(SHARDS_ENV, "").strip()
    if not raw:
        return 2
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"${SHARDS_ENV}={raw!r}: expected a whole number >= 1, such as 1 or 2")
    return n


_STATE = threading.local()


def current_slot() -> int:
    """The shard number of the calling thread (0 outside :func:`sharded_map`)."""
    return getattr(_STATE, "slot", 0)


def in_shard() -> bool:
    """Whether the calling thread is one of :func:`sharded_map`'s pinned shard threads."""
    return getattr(_STATE, "sharded", False)


def usable_cpus() -> list[int]:
    """The CPUs this process may run on, sorted (all of ``os.cpu_count()`` where affinity is
    not supported)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def cpu_slices(n: int, cpus: Sequence[int] | None = None) -> list[list[int]]:
    """``n`` disjoint, contiguous slices of ``cpus`` (default: :func:`usable_cpus`), as even as
    possible; fewer CPUs than ``n`` gives fewer slices."""
    cpus = list(cpus if cpus is not None else usable_cpus())
    n = max(1, min(n, len(cpus)))
    size, extra = divmod(len(cpus), n)
    out, start = [], 0
    for i in range(n):
        stop = start + size + (1 if i < extra else 0)
        out.append(cpus[start:stop])
        start = stop
    return out


def sharded_map(
    fn: Callable[[T], R],
    items: Sequence[T],
    workers: int,
    *,
    desc: str = "",
    progress: bool = True,
) -> list[R]:
    """``[fn(x) for x in items]`` over ``workers`` fixed shards (see the module docstring).

    ``workers`` is capped by the CPUs this process may use and by ``len(items)``; with one
    worker it is the plain loop in the calling thread. Results keep the input order. If any call
    raises, the other shards stop at their next item and the first exception (by item order) is
    raised after every thread has ended.
    """
    slices = cpu_slices(min(workers, max(1, len(items))))
    from tqdm.auto import tqdm  # here: tqdm reads its TQDM_* settings when imported

    bar = tqdm(total=len(items), desc=desc, disable=not progress)
    if len(slices) == 1:
        out = []
        for x in items:
            out.append(fn(x))
            bar.update()
        bar.close()
        return out
    results: dict[int, R] = {}
    errors: dict[int, BaseException] = {}
    stop = threading.Event()
    lock = threading.Lock()

    def run(slot: int, cpus: list[int]) -> None:
        _STATE.slot, _STATE.sharded = slot, True
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, cpus)  # pid 0 = this thread (Linux)
        for i in range(slot, len(items), len(slices)):
            if stop.is_set():
                return
            try:
                r = fn(items[i])
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
                with lock:
                    errors[i] = e
                stop.set()
                return
            with lock:
                results[i] = r
                bar.update()

    threads = [
        threading.Thread(target=run, args=(s, c), name=f"shard-{s}", daemon=True)
        for s, c in enumerate(slices)
    ]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException:  # Ctrl-C: the shards stop after their current call (it is cached)
        stop.set()
        raise
    finally:
        bar.close()
    if errors:
        raise errors[min(errors)]
    return [results[i] for i in range(len(items))]


@contextmanager
def thread_count(get: Callable[[], int], put: Callable[[int], None], n: int) -> Iterator[None]:
    """A library's process-wide thread count (read by ``get``, set by ``put``) set to ``n``
    inside the block and restored after, even when the block raises."""
    before = get()
    put(n)
    try:
        yield
    finally:
        put(before)


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """PyTorch's intra-op thread count set to ``n`` inside the block, restored after (nothing
    when PyTorch is not imported: nothing here would use it)."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    with thread_count(torch.get_num_threads, torch.set_num_threads, n):
        yield


@contextmanager
def process_env(values: Mapping[str, str], *, keep_set: bool = False) -> Iterator[dict[str, str]]:
    """Set environment variables of this process inside the block; restore them after.

    The one function through which the lab writes ``os.environ``. Children started inside the
    block (notebook kernels, pool and Ray workers) inherit the variables; nothing outlives the
    block, so no later caller, and no later test, runs under another caller's settings.

    Args:
        values: variable name -> value.
        keep_set: a variable that is already set keeps its value (the user's setting wins).

    Yields:
        The values in force inside the block, for every name in ``values``.
    """
    before = {k: os.environ.get(k) for k in values}
    applied = {k: v for k, v in values.items() if not (keep_set and before[k] is not None)}
    os.environ.update(applied)
    try:
        yield {k: os.environ[k] for k in values}
    finally:
        for k in applied:
            old = before[k]
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old
