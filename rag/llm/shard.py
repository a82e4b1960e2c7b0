"""Local-model calls on both cores: fixed shards, one pinned thread and one model per shard.

Why: llama.cpp barely uses a second thread on a model as small as SmolLM2-135M. Measured on
the 2-core AMD EPYC of this lab (``python -m rag.bench.llm shards`` ->
``outputs/bench/llm_shards.json``, 8 distinct ~1,500-token prompts, 64 forced answer tokens,
bf16 weights, idle machine): one instance with 2 threads 36.3 s, with 1 thread 35.5 s; two
single-thread instances in two threads pinned to their own core 26.5 s (1.37x), unpinned
30.1 s (1.21x). All four wrote the same answers. (Two unpinned single-thread *processes* did
far worse: each call ~3x slower.)

How: :func:`sharded_map` deals the items out round-robin (item ``i`` to shard ``i % n``), runs
each shard in order in its own thread, pinned (``os.sched_setaffinity`` on the calling thread)
to its own slice of the CPUs this process may use, and marks the thread with its shard number
(:func:`current_slot`). :class:`rag.llm.local.LocalBackend` keeps one model per slot, so a
shard always talks to the same model instance. Same items, same shards, same order per
instance: the answers are the same on every run (each instance's prompt-prefix reuse sees the
same sequence of prompts), and a question sent to several answerers in turn lands on the same
instance each time, so the prefix evaluated for the first answerer is reused by the next.

Latency per call is wall time while the other shard runs too (~1.4x a call alone); throughput is
what improves.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")
R = TypeVar("R")

_STATE = threading.local()


def current_slot() -> int:
    """The shard number of the calling thread (0 outside :func:`sharded_map`)."""
    return getattr(_STATE, "slot", 0)


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
        _STATE.slot = slot
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
