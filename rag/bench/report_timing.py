"""How long the README's report command takes from a fresh clone: cold (empty cache) and warm.

``make bench-report`` clones the current HEAD into a temporary folder beside the shared data (so
``../shared`` resolves, and ``RAG_SHARED_DIR`` is set as well), points ``RAG_CACHE_DIR`` at an empty
temporary folder, then times ``make setup`` (the install) and ``make report`` (every notebook on
the default profile) three times with the same clone, venv and cache: cold; warm (the same
command: notebooks whose inputs are unchanged are kept, like make); and warm with ``--force``
(every notebook executed again on the warm cache). The runner's
``run.json`` gives each notebook's wall time; every ``*_s`` / ``*_seconds`` number a notebook
records in its ``metrics.json`` is kept under ``stages``, and each executed notebook's slowest
code cells (papermill's per-cell durations) under ``cells``. Output:
``outputs/bench/report_timing.json`` = ``{"cold": {"total_s", "install_s", "report_s",
"notebooks", "cells", "reused", "stages", "status"}, "warm": {...}, "warm_forced": {...},
"machine": {...}, "commit": ...}``.

A benchmark, not a test: a cold run executes every notebook from an empty cache; run it on a
quiet machine, since the wall times measure whatever else runs too.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag import paths
from rag.errors import ConfigError

log = logging.getLogger(__name__)

#: Commands timed in each phase (run in the clone's root).
INSTALL_CMD = ("make", "setup")
REPORT_CMD = ("make", "report")
#: The timed runs, in order.
PHASES = ("cold", "warm", "warm_forced")
#: The CPU flags recorded with a timing (the SIMD the embedder and llama.cpp pick kernels by).
SIMD_FLAGS = frozenset(
    {"avx", "avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "avx_vnni"}
)
#: Metric keys recorded as stage timings.
TIME_SUFFIXES = ("_s", "_seconds")


def stage_timings(metrics: Any, prefix: str = "") -> dict[str, float]:
    """Every number under a key ending in ``_s``/``_seconds`` in a metrics.json, by dotted path."""
    out: dict[str, float] = {}
    if isinstance(metrics, dict):
        for k, v in metrics.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict):
                out.update(stage_timings(v, path))
            elif (
                isinstance(v, int | float)
                and not isinstance(v, bool)
                and str(k).endswith(TIME_SUFFIXES)
            ):
                out[path] = round(float(v), 3)
    return out


#: Cells shorter than this are left out of ``cells`` (kernel start and plotting noise).
MIN_CELL_S = 2.0


def cell_timings(notebook: Path, min_s: float = MIN_CELL_S) -> list[dict[str, Any]]:
    """Wall seconds of each code cell of an executed notebook (papermill's per-cell
    ``duration``), slowest first, with the cell's first line to name it; cells under ``min_s``
    are left out. A notebook without papermill metadata gives ``[]``."""
    if not notebook.exists():
        return []
    cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
    out = []
    for i, c in enumerate(cells):
        dur = (c.get("metadata", {}).get("papermill") or {}).get("duration")
        if c.get("cell_type") != "code" or not isinstance(dur, int | float) or dur < min_s:
            continue
        src = "".join(c.get("source", ""))
        first = next((ln.strip() for ln in src.splitlines() if ln.strip()), "")
        out.append({"cell": i, "s": round(float(dur), 2), "code": first[:100]})
    return sorted(out, key=lambda r: -r["s"])


def collect(out_dir: Path) -> dict[str, Any]:
    """Per-notebook wall times (``run.json``) and stage timings (``*/metrics.json``) of a run.

    Raises:
        ConfigError: the run wrote no ``run.json`` (the report command failed before the runner).
    """
    run_json = out_dir / "run.json"
    if not run_json.exists():
        raise ConfigError(f"no run.json in {out_dir}: the report command did not run")
    run = json.loads(run_json.read_text(encoding="utf-8"))
    notebooks = {r["name"]: r.get("wall_s", 0.0) for r in run.get("notebooks", [])}
    # a kept notebook's wall_s is that of the run that produced it, not of this one
    reused = [r["name"] for r in run.get("notebooks", []) if r.get("reused")]
    status = {r["name"]: r.get("status", "?") for r in run.get("notebooks", [])}
    stages: dict[str, float] = {}
    for name in notebooks:
        m = out_dir / name / "metrics.json"
        if m.exists():
            stages.update(stage_timings(json.loads(m.read_text(encoding="utf-8")), name))
    # a kept notebook's cells are those of the run that produced it: only executed ones count
    cells = {n: cell_timings(out_dir / f"{n}.ipynb") for n in notebooks if n not in reused}
    return {
        "notebooks": notebooks,
        "cells": {n: c for n, c in cells.items() if c},
        "notebooks_s": round(sum(notebooks.values()), 2),
        "status": status,
        "reused": reused,
        "stages": stages,
        "commit": run.get("git_commit"),
    }


def timed(cmd: Sequence[str], cwd: Path, env: dict[str, str], log_path: Path) -> float:
    """Run ``cmd`` in ``cwd`` (output to ``log_path``); return its wall time.

    Raises:
        ConfigError: the command failed (the message names it and the log).
    """
    t0 = time.perf_counter()
    with log_path.open("ab") as fh:
        rc = subprocess.run(
            list(cmd), cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT
        ).returncode
    wall = round(time.perf_counter() - t0, 2)
    if rc != 0:
        raise ConfigError(
            f"{' '.join(cmd)} failed with exit code {rc} after {wall}s; see {log_path}"
        )
    return wall


def phase(
    clone: Path,
    env: dict[str, str],
    *,
    profile: str = "default",
    install_cmd: Sequence[str] = INSTALL_CMD,
    report_cmd: Sequence[str] = REPORT_CMD,
) -> dict[str, Any]:
    """Time the install and the report command once in ``clone``; collect the run's timings."""
    log_path = clone / "bench-report.log"
    install_s = timed(install_cmd, clone, env, log_path)
    report_s = timed(report_cmd, clone, env, log_path)
    res = {"total_s": round(install_s + report_s, 2), "install_s": install_s, "report_s": report_s}
    res.update(collect(clone / "outputs" / profile))
    return res


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        mem_gb = None
    from rag.index.embed import cpu_flags, default_passage_backend

    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        # what decides speed and which floating point the models compute in: bf16 passages and
        # llama.cpp's bf16 kernels need avx512_bf16 / amx_bf16; elsewhere they run on AVX2
        "cpu_simd": sorted(cpu_flags() & SIMD_FLAGS),
        "passage_backend": default_passage_backend(),
        "memory_gb": mem_gb,
        "platform": f"{platform.system()} {platform.machine()}",
        "python": platform.python_version(),
        "loadavg_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def bench_report(
    out: str | Path = "outputs/bench/report_timing.json",
    *,
    profile: str = "default",
    keep: bool = False,
    install_cmd: Sequence[str] = INSTALL_CMD,
    report_cmd: Sequence[str] = REPORT_CMD,
    phases: Sequence[str] = PHASES,
) -> dict[str, Any]:
    """Clone HEAD beside the shared folder, run the report cold then warm, write the timings.

    ``phases``: which of ``cold``, ``warm``, ``warm_forced`` to run, in that order (cold first
    whenever it is named; a warm phase without cold times a warm run of an empty cache).
    """
    unknown = [p for p in phases if p not in PHASES]
    if unknown or not phases:
        raise ConfigError(f"unknown bench-report phase(s) {unknown or phases!r}: use {PHASES}")
    root, shared = paths.project_root(), paths.shared_dir()
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()
    # the clone sits beside the shared folder, so its ../shared is the real one
    clone = Path(tempfile.mkdtemp(prefix="bench-report-", dir=shared.parent))
    cache = Path(tempfile.mkdtemp(prefix="bench-report-cache-"))
    res: dict[str, Any] = {"commit": commit, "profile": profile, "machine": machine()}
    dest = paths.resolve(out)
    dest.parent.mkdir(parents=True, exist_ok=True)

    def write() -> None:
        # after every phase, so an interrupted bench keeps the phases it finished
        dest.write_text(json.dumps(res, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    try:
        subprocess.run(["git", "clone", "--quiet", str(root), str(clone)], check=True)
        env = {**os.environ, paths.SHARED_ENV: str(shared), paths.CACHE_ENV: str(cache)}
        env.pop("VIRTUAL_ENV", None)  # the clone builds and uses its own .venv
        if profile != "default":
            env["PROFILE"] = profile
        # warm: the README command again (unchanged notebooks are kept, like make); warm_forced:
        # every notebook executed again on the warm cache (what a changed notebook costs)
        commands = {
            "cold": report_cmd,
            "warm": report_cmd,
            "warm_forced": (*report_cmd, "REPORT_ARGS=--force"),
        }
        for label in [p for p in PHASES if p in phases]:
            cmd = commands[label]
            log.info("bench-report: %s run in %s", label, clone)
            res[label] = phase(clone, env, profile=profile, install_cmd=install_cmd, report_cmd=cmd)
            log.info("bench-report: %s took %.0fs", label, res[label]["total_s"])
            write()
        res["machine"]["loadavg_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    finally:
        if not keep:
            shutil.rmtree(clone, ignore_errors=True)
            shutil.rmtree(cache, ignore_errors=True)
    write()
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="outputs/bench/report_timing.json")
    ap.add_argument("--profile", default="default")
    ap.add_argument("--keep", action="store_true", help="keep the clone and its cache")
    ap.add_argument(
        "--phases", default=",".join(PHASES), help=f"comma-separated subset of {PHASES}"
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    phases = tuple(p.strip() for p in args.phases.split(",") if p.strip())
    res = bench_report(args.out, profile=args.profile, keep=args.keep, phases=phases)
    for label in [p for p in PHASES if p in res]:
        print(f"{label}: {res[label]['total_s']:.0f}s (install {res[label]['install_s']:.0f}s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
