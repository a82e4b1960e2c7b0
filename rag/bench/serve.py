"""Load benchmark of the service (speed, not a test): ``python -m rag.bench.serve``.

Starts a real ``rag serve`` on 127.0.0.1 (the profile's served index, from the cache), waits for
``/ready`` (timed: the index load), then drives ``/search`` (hybrid) and ``/ask`` (extractive)
with 1 and 8 concurrent clients, each a keep-alive HTTP client sending gold questions in turn.
Every cell is bounded in requests and seconds. It records requests/s, p50/p95/p99 latency,
errors, and the server's resident memory (VmRSS now, VmHWM peak), against the service's targets,
into ``outputs/bench/serve.json`` (``--out``; the server's log beside it). The rate limit is off
for the run (it would otherwise be the thing measured), and so is the access log.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from rag import paths

TARGETS = {
    "search_p50_ms_1_client": 15.0,
    "search_rps_8_clients": 100.0,
    "ask_p50_ms_1_client": 60.0,
    "rss_gb": 1.5,
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _proc_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _questions(n: int) -> list[str]:
    from rag.evaluation.gold import load_gold

    return [g.question for g in load_gold(paths.resolve("../shared/gold/dev.jsonl"))][:n]


def drive(
    url: str, path: str, bodies: list[dict[str, Any]], clients: int, max_requests: int,
    max_seconds: float,
) -> dict[str, Any]:  # fmt: skip
    """``clients`` threads POST ``bodies`` round-robin until ``max_requests`` or ``max_seconds``."""
    import httpx

    lock = threading.Lock()
    sent = 0
    latencies: list[float] = []
    errors: dict[str, int] = {}
    t_end = time.perf_counter() + max_seconds

    def worker(i: int) -> None:
        nonlocal sent
        with httpx.Client(base_url=url, timeout=60) as c:
            while True:
                with lock:
                    if sent >= max_requests or time.perf_counter() > t_end:
                        return
                    body = bodies[sent % len(bodies)]
                    sent += 1
                t0 = time.perf_counter()
                try:
                    r = c.post(path, json=body)
                    ok = r.status_code == 200
                    why = str(r.status_code)
                except httpx.HTTPError as e:
                    ok, why = False, type(e).__name__
                ms = (time.perf_counter() - t0) * 1000
                with lock:
                    if ok:
                        latencies.append(ms)
                    else:
                        errors[why] = errors.get(why, 0) + 1

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    lat = np.asarray(latencies) if latencies else np.asarray([float("nan")])
    return {
        "clients": clients, "requests": sent, "ok": len(latencies),
        "errors": sum(errors.values()), "error_kinds": errors, "wall_s": round(wall, 3),
        "rps": round(len(latencies) / wall, 2) if wall else None,
        "p50_ms": round(float(np.percentile(lat, 50)), 2),
        "p95_ms": round(float(np.percentile(lat, 95)), 2),
        "p99_ms": round(float(np.percentile(lat, 99)), 2),
        "mean_ms": round(float(lat.mean()), 2),
    }  # fmt: skip


def run(
    profile: str = "default",
    papers: list[str] | None = None,
    *,
    max_requests: int = 300,
    max_seconds: float = 30.0,
    out: str = "outputs/bench/serve.json",
) -> dict[str, Any]:
    """Start the server, measure, stop it (by its own pid), write ``out``; returns the record."""
    import httpx

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "rag.cli", "serve", "--port", str(port), "--profile", profile,
           "--rate-limit", "0", "--no-access-log", "--offline",
           "--log-level", "warning"]  # fmt: skip
    if papers:
        cmd += ["--papers", *papers]
    log = paths.resolve(out).with_suffix(".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip
    try:
        ready = None
        while time.perf_counter() - t0 < 1800:
            if proc.poll() is not None:
                raise RuntimeError(f"rag serve exited; see {paths.display(log)}")
            try:
                r = httpx.get(url + "/ready", timeout=5)
                if r.status_code == 200:
                    ready = r.json()
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        if ready is None:
            raise RuntimeError("rag serve was not ready within 30 min")
        ready_s = time.perf_counter() - t0
        qs = _questions(60)
        search = [{"query": q, "k": 5, "retriever": "hybrid"} for q in qs]
        ask = [{"question": q, "answerer": "extractive"} for q in qs]
        drive(url, "/search", search[:10], 1, 10, 30)  # warm-up, not recorded
        drive(url, "/ask", ask[:5], 1, 5, 30)
        cells = {}
        for name, path, bodies in (("search", "/search", search), ("ask", "/ask", ask)):
            for clients in (1, 8):
                cells[f"{name}_{clients}"] = drive(url, path, bodies, clients, max_requests,
                                                   max_seconds)  # fmt: skip
        rss_gb = _proc_kb(proc.pid, "VmRSS") / 1024**2
        hwm_gb = _proc_kb(proc.pid, "VmHWM") / 1024**2
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
    measured = {
        "search_p50_ms_1_client": cells["search_1"]["p50_ms"],
        "search_rps_8_clients": cells["search_8"]["rps"],
        "ask_p50_ms_1_client": cells["ask_1"]["p50_ms"],
        "rss_gb": round(hwm_gb, 3),
    }
    met = {
        k: (measured[k] >= v if k.endswith("clients") and "rps" in k else measured[k] <= v)
        for k, v in TARGETS.items()
    }
    record = {
        "corpus": {"profile": profile, "papers": papers or "profile", **ready},
        "ready_s": round(ready_s, 2),
        "cells": cells,
        "rss_gb_now": round(rss_gb, 3),
        "rss_gb_peak": round(hwm_gb, 3),
        "targets": TARGETS,
        "measured": measured,
        "met": met,
        "zero_errors": all(c["errors"] == 0 for c in cells.values()),
        "bounds": {"max_requests": max_requests, "max_seconds": max_seconds},
        "machine": {"cpus": os.cpu_count(), "load_avg_1_5_15": list(os.getloadavg())},
    }
    path = paths.resolve(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rag.bench.serve", description=__doc__)
    p.add_argument("--profile", default="default")
    p.add_argument("--papers", nargs="+", help="serve only these pinned ids (default: profile)")
    p.add_argument("--max-requests", type=int, default=300, help="per cell (default 300)")
    p.add_argument("--max-seconds", type=float, default=30.0, help="per cell (default 30)")
    p.add_argument("--out", default="outputs/bench/serve.json", help="record (log beside it)")
    a = p.parse_args(argv)
    rec = run(a.profile, a.papers, max_requests=a.max_requests, max_seconds=a.max_seconds,
              out=a.out)  # fmt: skip
    print(json.dumps({k: rec[k] for k in ("corpus", "ready_s", "measured", "met")}, indent=1))
    for name, c in rec["cells"].items():
        print(f"{name:>9}: {c['rps']:>7} req/s  p50 {c['p50_ms']:>7} ms  p95 {c['p95_ms']:>7} ms  "
              f"p99 {c['p99_ms']:>7} ms  errors {c['errors']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
