"""Does a re-run reproduce the published report? Compare two run folders number by number.

``python -m rag.bench.reproduce OTHER [--published outputs/default] [--label NAME]`` reads every
``<notebook>/metrics.json`` of both folders (``OTHER``: a report run elsewhere, e.g. the clone
that ``make bench-report BENCH_ARGS=--keep`` leaves) and writes
``outputs/bench/reproduction[_NAME].json``:

- per notebook, the numeric results compared (timings, latencies and throughputs left out: they
  measure the machine, not the method): how many are identical, how many differ, and for every
  estimate with a 95% CI (``{"mean", "ci": [lo, hi]}`` or ``{"mean", "ci_low", "ci_high"}``)
  whether the re-run's mean lies inside the published CI; the estimates outside are listed;
- for notebook 05, per answerer, how many answers differ, split by whether the retrieved sources
  were the same (a difference with the same sources is the model computing differently, e.g.
  llama.cpp's bf16 kernels on AVX-512 BF16 against their AVX2 emulation).

A benchmark tool, not a test: it reads results, it does not run anything.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rag import paths
from rag.bench import write_json
from rag.errors import ConfigError
from rag.jsonl import iter_jsonl

#: Key endings and path parts that measure the machine, not the method.
TIMING_SUFFIXES = ("_s", "_ms", "_seconds", "per_s", "_utc", "_bytes", "_mb")
TIMING_PARTS = ("latency", "throughput", "growth", "scale", "date", "loadavg", "model_calls")
#: How many differing estimates / strings are listed per notebook.
MAX_LISTED = 25


def _is_timing(path: str) -> bool:
    parts = path.split(".")
    return path.endswith(TIMING_SUFFIXES) or any(any(t in p for t in TIMING_PARTS) for p in parts)


def _estimate(d: dict[str, Any]) -> tuple[float, float, float] | None:
    """(mean, ci_low, ci_high) of an estimate dict, else None."""
    mean = d.get("mean")
    if not isinstance(mean, int | float) or isinstance(mean, bool):
        return None
    ci = d.get("ci")
    lo, hi = ci if isinstance(ci, list) and len(ci) == 2 else (d.get("ci_low"), d.get("ci_high"))
    if not all(isinstance(x, int | float) for x in (lo, hi)):
        return None
    return float(mean), float(lo), float(hi)


def compare_metrics(published: Any, other: Any) -> dict[str, Any]:
    """Compare two metrics.json trees (see the module docstring)."""
    res: dict[str, Any] = {
        "numbers": 0,
        "identical": 0,
        "differ": 0,
        "estimates": 0,
        "within_published_ci": 0,
        "outside_published_ci": [],
        "missing_in_other": [],
        "strings_differ": [],
    }

    def walk(a: Any, b: Any, path: str) -> None:
        if path and _is_timing(path):
            return
        if isinstance(a, dict):
            if not isinstance(b, dict):
                res["missing_in_other"].append(path)
                return
            est_a, est_b = _estimate(a), _estimate(b)
            if est_a is not None and est_b is not None:
                res["estimates"] += 1
                inside = est_a[1] - 1e-12 <= est_b[0] <= est_a[2] + 1e-12
                res["within_published_ci"] += inside
                if not inside:
                    res["outside_published_ci"].append(
                        {"metric": path, "published": list(est_a), "other_mean": est_b[0]}
                    )
            for k, v in a.items():
                walk(v, b.get(k), f"{path}.{k}" if path else str(k))
        elif isinstance(a, list):
            if not isinstance(b, list) or len(a) != len(b):
                res["missing_in_other"].append(path)
                return
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(x, y, f"{path}[{i}]")
        elif isinstance(a, int | float) and not isinstance(a, bool):
            res["numbers"] += 1
            if b == a:
                res["identical"] += 1
            else:
                res["differ"] += 1
        elif isinstance(a, str) and a != b:
            res["strings_differ"].append(path)

    walk(published, other, "")
    for k in ("outside_published_ci", "missing_in_other", "strings_differ"):
        res[f"n_{k}"] = len(res[k])
        res[k] = res[k][:MAX_LISTED]
    return res


def compare_answers(published: Path, other: Path) -> dict[str, dict[str, int]]:
    """Per answerer: answers compared, answers that differ, and those of them whose sources were
    the same, from two ``05_faithfulness/traces.jsonl`` files."""

    def load(p: Path) -> dict[tuple[str, str], dict[str, Any]]:
        return {(r["answerer"], r["qid"]): r for _, r in iter_jsonl(p, ConfigError)}

    a, b = load(published), load(other)
    out: dict[str, dict[str, int]] = {}
    for key, ra in a.items():
        rb = b.get(key)
        row = out.setdefault(key[0], {"n": 0, "differ": 0, "differ_same_sources": 0})
        if rb is None:
            continue
        row["n"] += 1
        if ra.get("answer") != rb.get("answer"):
            row["differ"] += 1
            same = json.dumps(ra.get("sources"), sort_keys=True) == json.dumps(
                rb.get("sources"), sort_keys=True
            )
            row["differ_same_sources"] += same
    return out


def reproduce(
    other: str | Path,
    *,
    published: str | Path = "outputs/default",
    label: str = "",
    out: str | None = None,
) -> dict[str, Any]:
    """Compare the run folder ``other`` with ``published``; write and return the summary."""
    pub, oth = paths.resolve(published), Path(other).expanduser().resolve()
    for d in (pub, oth):
        if not d.is_dir():
            raise ConfigError(f"reproduce: {d.name!r} is not a run folder (no such directory)")
    notebooks = sorted(p.parent.name for p in pub.glob("*/metrics.json"))
    if not notebooks:
        raise ConfigError(f"reproduce: no <notebook>/metrics.json under {published}")
    # no absolute local path in a committed file: a folder outside the project is named, not placed
    shown = str(published) if not Path(published).is_absolute() else pub.name
    res: dict[str, Any] = {"published": shown, "other": label or oth.name, "notebooks": {}}
    for nb in notebooks:
        theirs = oth / nb / "metrics.json"
        if not theirs.exists():
            res["notebooks"][nb] = {"missing": True}
            continue
        res["notebooks"][nb] = compare_metrics(
            json.loads((pub / nb / "metrics.json").read_text(encoding="utf-8")),
            json.loads(theirs.read_text(encoding="utf-8")),
        )
    traces = Path("05_faithfulness") / "traces.jsonl"
    if (pub / traces).exists() and (oth / traces).exists():
        res["answers"] = compare_answers(pub / traces, oth / traces)
    if (oth / "run.json").exists():  # the commit the other run executed
        res["other_commit"] = json.loads((oth / "run.json").read_text("utf-8")).get("git_commit")
    write_json(res, out or f"outputs/bench/reproduction{'_' + label if label else ''}.json")
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("other", help="the re-run's output folder (e.g. <clone>/outputs/default)")
    ap.add_argument("--published", default="outputs/default")
    ap.add_argument("--label", default="", help="names the output file and the other run")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    res = reproduce(args.other, published=args.published, label=args.label, out=args.out)
    for nb, r in res["notebooks"].items():
        if r.get("missing"):
            print(f"{nb}: missing in the re-run")
            continue
        print(
            f"{nb}: {r['identical']}/{r['numbers']} numbers identical; "
            f"{r['within_published_ci']}/{r['estimates']} estimates inside the published 95% CI"
        )
        for o in r["outside_published_ci"]:
            print(f"   outside: {o['metric']} {o['other_mean']:.4f} vs {o['published']}")
    for name, a in res.get("answers", {}).items():
        same = a["differ_same_sources"]
        print(f"answers {name}: {a['differ']}/{a['n']} differ ({same} with the same sources)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
