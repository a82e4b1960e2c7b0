"""``rag sweep``: papermill batch re-runs over a parameter grid, in parallel and resumable.

Layout of one sweep (``outputs/sweeps/<name>/``)::

    index.html, figures/     the summary page (rag.report.sweep_page)
    results.csv              one row per cell x metric (rag.report.sweep_results)
    paired.csv               each cell against the base cell, paired over the same questions
    sweep.json               the spec, the engine, every cell's manifest
    <cell>/manifest.json     parameters, notebook hashes, code version, status, error, wall time
    <cell>/NN_name.ipynb     the executed notebook (+ .html, .code.html, logs/, NN_name/)

A cell's pages lead up to the sweep's ``index.html`` and name no neighbour notebook (a cell folder
holds only its own): :func:`relink_pages` gives every cell page of a sweep that bar, also pages
rendered before it existed, and each run ends with it.

Every cell is executed exactly like the report (:func:`rag.report.runner.execute_and_render`), in a
process of its own (a fresh pool worker per cell, or a Ray task with ``max_calls=1``) with a kernel
of its own (:class:`rag.report.kernels.IsolatedKernelManager`). A cell's manifest is written when
it starts (``running``) and when it ends (``ok``/``failed``); a restart skips every cell whose
manifest says ``ok`` under the same key (parameters, notebook content, code version), so a killed
sweep resumes where it stopped and a change to ``rag/`` re-runs everything. A failing cell keeps its
rendered notebook with the error cell; the others go on, and the sweep ends with a
:class:`~rag.errors.NotebookError` naming the failed cells.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from rag import paths
from rag.atomic import write_atomic
from rag.errors import ConfigError, NotebookError
from rag.index.ray_embed import start_ray
from rag.report import profiles, publish, render, runner, sweep_config, sweep_page, sweep_results
from rag.report.fingerprint import code_version  # the report runner keys its notebooks on it too
from rag.shard import SHARDS_ENV, process_env

log = logging.getLogger(__name__)

ENGINES = ("local", "ray")
#: Thread-count variables set for each cell's kernel to (CPU cores // workers), unless already set.
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
MANIFEST = "manifest.json"


def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _params_hash(params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    """Write atomically, so a kill mid-write never leaves a half manifest."""
    write_atomic(path, json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")


def share_cores(threads: int, *, beside_others: bool) -> dict[str, str]:
    """Thread settings for a cell's kernels; :func:`run_cell` sets them for its notebooks through
    :func:`rag.shard.process_env`, where variables the user set win.

    Thread counts of ``threads`` each (no oversubscription by torch/BLAS) and, when the cell runs
    ``beside_others``, OpenMP's passive wait policy: torch's and llama.cpp's libgomp threads spin
    while they wait, and a spinning thread starves the process that shares its core. On an idle
    machine passive is the slower one (``outputs/bench/openmp.json``), so it is set only here.
    """
    env = dict.fromkeys(THREAD_ENV, str(threads))
    if beside_others:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
        # the cell already shares the cores with other cells: no pinned shards of its own
        env[SHARDS_ENV] = "1"
    return env


def read_manifest(cell_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((cell_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def run_cell(task: dict[str, Any]) -> dict[str, Any]:
    """Execute one cell's notebooks in order (in the calling process); return its manifest.

    ``task`` is plain data (it crosses process and Ray boundaries): ``name``, ``values``,
    ``key``, ``out_dir`` (absolute) and ``notebooks`` (``[{stem, path, parameters}]``).
    """
    from rag.report.kernels import IsolatedKernelManager

    out = Path(task["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "name": task["name"],
        "values": task["values"],
        "key": task["key"],
        "status": "running",
        "error": None,
        "pid": os.getpid(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "notebooks": [],
    }
    _write_json(out / MANIFEST, manifest)
    threads = task.get("threads")
    cores = share_cores(threads, beside_others=task.get("workers", 1) > 1) if threads else {}
    kernel = runner.ensure_kernel()
    scrubbed = publish.ScrubReport()
    t0 = time.perf_counter()
    with process_env(cores, keep_set=True):
        for nb in task["notebooks"]:
            rec = runner.NotebookRun(name=nb["stem"], parameters=nb["parameters"])
            runner.execute_and_render(
                Path(nb["path"]),
                out / f"{nb['stem']}.ipynb",
                rec,
                kernel,
                strict=task.get("strict", False),
                scrubbed=scrubbed,
                sweep_cell=True,
                kernel_manager_class=IsolatedKernelManager,
            )
            manifest["notebooks"].append(asdict(rec))
            if rec.status != "ok":
                manifest["error"] = rec.error
                break
    manifest["status"] = "failed" if manifest["error"] else "ok"
    manifest["wall_s"] = round(time.perf_counter() - t0, 2)
    manifest["scrubbed"] = scrubbed.to_dict()
    _write_json(out / MANIFEST, manifest)
    return manifest


def relink_pages(out_root: Path) -> list[Path]:
    """Give every cell page under a sweep folder (``<cell>/NN_name.html``, ``.code.html``) the
    sweep cell's navigation bar (:func:`rag.report.render.relink_sweep_cell`); returns the pages
    that changed."""
    pages = sorted(out_root.glob("*/[0-9][0-9]_*.html"))
    return [p for p in pages if render.relink_sweep_cell(p)]


def _tasks(
    spec: sweep_config.SweepSpec, name: str, out_root: Path, output_root: str, strict: bool
) -> list[dict[str, Any]]:
    cells = sweep_config.expand(spec, name, output_root)
    nb_paths = {nb.stem: nb for nb in profiles.notebook_paths()}
    version = code_version()
    tasks = []
    for cell in cells:
        nbs = [
            {"stem": stem, "path": str(nb_paths[stem]), "parameters": params}
            for stem, params in cell.parameters.items()
        ]
        key = {
            "parameters": _params_hash(cell.parameters),
            "notebooks": {n["stem"]: _file_hash(Path(n["path"])) for n in nbs},
            "code_version": version,
        }
        tasks.append(
            {
                "name": cell.name,
                "values": cell.values,
                "key": key,
                "out_dir": str(out_root / cell.name),
                "notebooks": nbs,
                "strict": strict,
            }
        )
    return tasks


def _local(tasks: list[dict[str, Any]], workers: int) -> Iterator[dict[str, Any]]:
    """A process pool with a fresh worker per cell (spawned: no inherited kernel state)."""
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, max_tasks_per_child=1) as pool:
        futures = {pool.submit(run_cell, t): t for t in tasks}
        for fut in as_completed(futures):
            yield _result(futures[fut], fut.result)


def _ray(
    tasks: list[dict[str, Any]], workers: int, address: str | None
) -> Iterator[dict[str, Any]]:
    """Ray tasks, at most ``workers`` in flight; ``max_calls=1`` gives each cell a fresh worker."""
    import ray

    started = not ray.is_initialized()
    if started:
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            kw["address"] = address
        else:  # a local Ray sized for the sweep, with a small object store (results are tiny)
            kw.update(num_cpus=workers, object_store_memory=100 * 1024**2)
        start_ray(kw)
    remote = ray.remote(num_cpus=1, max_calls=1, max_retries=0)(run_cell)
    try:
        pending: dict[Any, dict[str, Any]] = {}
        queue = list(tasks)
        while queue or pending:
            while queue and len(pending) < workers:
                t = queue.pop(0)
                pending[remote.remote(t)] = t
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                t = pending.pop(ref)
                yield _result(t, lambda r=ref: ray.get(r))
    finally:
        if started:
            ray.shutdown()


def _result(task: dict[str, Any], get: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The cell's manifest; a worker that died (not a notebook error) is recorded as failed."""
    try:
        return get()
    except Exception as e:  # noqa: BLE001 - a crashed worker fails its cell, not the sweep
        manifest = read_manifest(Path(task["out_dir"])) or {"name": task["name"]}
        manifest.update(
            values=task["values"], key=task["key"], status="failed", error=f"worker died: {e!r}"
        )
        _write_json(Path(task["out_dir"]) / MANIFEST, manifest)
        return manifest


def _is_done(task: dict[str, Any]) -> bool:
    m = read_manifest(Path(task["out_dir"]))
    return bool(m and m.get("status") == "ok" and m.get("key") == task["key"])


def run_sweep(
    sweep: str | Path,
    *,
    engine: str = "local",
    workers: int | None = None,
    address: str | None = None,
    output_root: str = "outputs/sweeps",
    strict: bool = False,
) -> dict[str, Any]:
    """Run (or resume) a sweep; write results.csv, paired.csv, sweep.json and index.html.

    Args:
        sweep: a name under ``params/sweeps/`` or a path to a sweep YAML.
        engine: ``local`` (process pool) or ``ray`` (Ray tasks).
        workers: cells in flight (default: CPU count, at most the number of cells).
        address: a Ray cluster to join (``--engine ray`` only; default: start a local Ray).
        output_root: folder receiving ``<name>/`` (project-relative or absolute).

    Returns:
        ``{"name", "cells": [manifest...], "ran": [...], "skipped": [...], "failed": [...]}``.

    Raises:
        ConfigError: a bad sweep file, engine or worker count (before anything runs).
        NotebookError: one or more cells failed (after every other cell ran and the table and page
            were written); the message names them.
    """
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r} (engines: {', '.join(ENGINES)})")
    if address and engine != "ray":
        raise ConfigError("--address joins a Ray cluster: use it with --engine ray")
    path = sweep_config.sweep_path(sweep)
    spec = sweep_config.load_spec(path)
    name = path.stem
    out_root = paths.resolve(output_root) / name
    tasks = _tasks(spec, name, out_root, output_root, strict)
    base = sweep_config.base_cell(spec, sweep_config.expand(spec, name, output_root))
    workers = workers or min(os.cpu_count() or 1, len(tasks))
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    for t in tasks:
        t["threads"] = max(1, (os.cpu_count() or 1) // workers)
        t["workers"] = workers
    out_root.mkdir(parents=True, exist_ok=True)

    skipped = [t["name"] for t in tasks if _is_done(t)]
    todo = [t for t in tasks if t["name"] not in skipped]
    print(
        f"[sweep] {name}: {len(tasks)} cells, {len(skipped)} already done, {len(todo)} to run "
        f"({engine}, {workers} workers)",
        flush=True,
    )
    t0 = time.perf_counter()
    results: Iterable[dict[str, Any]] = []
    if todo:
        results = _local(todo, workers) if engine == "local" else _ray(todo, workers, address)
    for m in tqdm(results, total=len(todo), desc=f"sweep {name}", unit="cell"):
        print(f"[sweep] {m['name']}: {m['status']} in {m.get('wall_s', 0):.1f}s", flush=True)
    wall = round(time.perf_counter() - t0, 2)

    manifests = [read_manifest(Path(t["out_dir"])) or {"name": t["name"]} for t in tasks]
    failed = [m["name"] for m in manifests if m.get("status") != "ok"]
    summary = {
        "name": name,
        "spec": spec.model_dump(),
        "engine": engine,
        "workers": workers,
        "wall_s": wall,
        "base": base.name,
        "ran": [t["name"] for t in todo],
        "skipped": skipped,
        "failed": failed,
        "cells": manifests,
    }
    table = sweep_results.results_table(out_root, manifests, spec)
    table.to_csv(out_root / "results.csv", index=False, float_format="%.6g")
    paired = sweep_results.paired_vs_base(out_root, manifests, base.name, spec)
    paired.to_csv(out_root / "paired.csv", index=False, float_format="%.6g")
    _write_json(out_root / "sweep.json", summary)
    relink_pages(out_root)
    page = sweep_page.write_page(out_root, summary, table, paired, spec)
    for f in (page, out_root / "sweep.json"):
        publish.scrub_file(f, strict=strict)
    print(f"[sweep] {name}: {len(tasks) - len(failed)} ok, {len(failed)} failed in {wall:.1f}s; "
          f"{paths.display(page)}", flush=True)  # fmt: skip
    if failed:
        errors = "\n  ".join(
            f"{m['name']}: {m.get('error') or m.get('status', 'not run')}"
            for m in manifests
            if m["name"] in failed
        )
        raise NotebookError(
            f"sweep {name}: {len(failed)} of {len(tasks)} cells failed (rendered with their "
            f"error cell under {paths.display(out_root)}/):\n  {errors}"
        )
    return summary
