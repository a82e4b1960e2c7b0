"""Notebook 03's view of ``outputs/bench/scale.json``: tables, the 1×→100× figure and its reading.

The benchmark itself is :mod:`rag.bench.scale`; this module only reads its file, so a report can
show the large sizes without measuring them again.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from rag import paths
from rag.errors import ConfigError

KINDS = {"flat": "Flat (exact)", "hnsw": "HNSW", "ivf_flat": "IVF-Flat", "ivf_pq": "IVF-PQ"}
COLORS = {"flat": "C0", "hnsw": "C1", "ivf_flat": "C2", "ivf_pq": "C3"}
RECALL_TARGET = 0.95
P50_TARGET_MS = 10.0
MEMORY_TARGET_MB = 1024.0
GROWTH_TARGET = 1.1


def load_scale(path: str = "outputs/bench/scale.json") -> dict[str, Any]:
    """The scale benchmark's results; ConfigError naming the command if the file is missing."""
    p = paths.resolve(path)
    if not p.exists():
        raise ConfigError(f"{path} not found: run `make bench-scale` (rag bench scale) first")
    return json.loads(p.read_text(encoding="utf-8"))


def best_at_target(dense: pd.DataFrame, target: float = RECALL_TARGET) -> pd.DataFrame:
    """Per size and kind, the fastest grid point (CPU p50) reaching ``target`` recall@10."""
    ok = dense[dense["recall"] >= target]
    idx = ok.groupby(["n", "kind"])["p50_cpu_ms"].idxmin()
    cols = ["scale", "n", "kind", "m", "ef_search", "nlist", "nprobe", "recall", "p50_ms",
            "p50_cpu_ms", "p95_ms", "build_s", "bytes_per_vector", "memory_mb"]  # fmt: skip
    return ok.loc[idx, [c for c in cols if c in ok]].reset_index(drop=True)


def chosen_table(res: dict[str, Any]) -> pd.DataFrame:
    """The rule's pick at each measured size with its measured recall, latency and memory."""
    rows = []
    for c in res.get("chosen", []):
        ch = c["choice"]
        params = ", ".join(
            f"{k}={v}" for k, v in ch.items() if k not in ("kind", "memory_bytes", "reason")
        )
        rows.append({
            "n": c["n"], "kind": ch["kind"], "params": params, "recall@10": c.get("recall"),
            "p50_cpu_ms": c.get("p50_cpu_ms"), "p50_ms": c.get("p50_ms"),
            "memory_mb": c.get("memory_mb"), "build_s": c.get("build_s"), "why": ch["reason"],
        })  # fmt: skip
    return pd.DataFrame(rows)


def stages_table(res: dict[str, Any]) -> pd.DataFrame:
    """One row per stage: sizes measured, fitted exponent, predicted seconds for 10k papers."""
    st = res.get("stages", {}).get("stages", {})
    return pd.DataFrame(
        [
            {
                "stage": k,
                "papers measured": v["papers"],
                "seconds": v["seconds"],
                "growth exponent": v["exponent"],
                "work measured": f"{v['work']} {v['work_unit']}" if "work" in v else "",
                "exponent vs work": v.get("exponent_vs_work"),
                "predicted s at 10k papers": v["predicted_10k_papers_s"],
            }
            for k, v in st.items()
        ]  # fmt: skip
    )


def scale_figure(res: dict[str, Any]) -> Any:
    """Three panels: recall vs p50 at the largest size per kind; bytes/vector against N; the fastest
    setting at recall ≥ 0.95 against N per kind, with the rule's pick circled."""
    import matplotlib.pyplot as plt

    dense = pd.DataFrame(res["dense"])
    big = dense[dense["n"] == dense["n"].max()]
    best = best_at_target(dense)
    chosen = chosen_table(res)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    ax = axes[0]
    for kind, g in big.groupby("kind"):
        by = [c for c in ("m", "nlist") if g[c].notna().any()] or ["kind"]
        for j, (_, gg) in enumerate(g.groupby(by)):  # one line per M or nlist, dashed for the 2nd
            ax.plot(gg["p50_cpu_ms"], gg["recall"], "o" + ("-", "--")[j % 2], ms=3,
                    color=COLORS[kind], label=KINDS[kind])  # fmt: skip
    ax.axhline(RECALL_TARGET, color="grey", ls=":", lw=1)
    ax.axvline(P50_TARGET_MS, color="grey", ls=":", lw=1)
    h, lab = ax.get_legend_handles_labels()
    uniq = dict(zip(lab, h, strict=True))
    ax.legend(uniq.values(), uniq.keys(), fontsize=8)
    ax.set(xscale="log", xlabel="p50 ms / query (one thread, CPU)", ylabel="recall@10 vs exact",
           title=f"Recall vs latency at {int(big['n'].iloc[0]):,} vectors")  # fmt: skip
    ax = axes[1]
    mem = dense.groupby(["n", "kind"])["bytes_per_vector"].min().unstack()
    for kind in mem:
        ax.plot(mem.index, mem[kind], "o-", color=COLORS[kind], label=KINDS[kind])
    ax.set(xscale="log", xlabel="vectors", ylabel="bytes / vector", title="Index memory per vector")
    ax.legend(fontsize=8)
    ax = axes[2]
    for kind, g in best.groupby("kind"):
        ax.plot(g["n"], g["p50_cpu_ms"], "o-", color=COLORS[kind],
                label=f"{KINDS[kind]} (fastest at recall ≥ 0.95)")  # fmt: skip
    if len(chosen):
        ax.plot(chosen["n"], chosen["p50_cpu_ms"], "o", ms=13, mfc="none", mec="black",
                label="the rule's pick")  # fmt: skip
    ax.axhline(P50_TARGET_MS, color="grey", ls=":", lw=1)
    ax.set(xscale="log", yscale="log", xlabel="vectors", ylabel="p50 ms / query",
           title="Where the rule switches")  # fmt: skip
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def scale_summary(res: dict[str, Any]) -> dict[str, Any]:
    """Headline numbers for metrics.json: the pick at the largest size against the targets."""
    chosen = [c for c in res.get("chosen", []) if c.get("measured")]
    st = res.get("stages", {}).get("stages", {})
    out: dict[str, Any] = {
        "sizes": sorted({r["n"] for r in res.get("dense", [])}),
        "date": res.get("date"), "machine": res.get("machine"), "command": res.get("command"),
        "growth_exponents": {k: v["exponent"] for k, v in st.items()},
        "work_exponents": {
            f"{k} ({v['work_unit']})": v["exponent_vs_work"]
            for k, v in st.items()
            if "exponent_vs_work" in v
        },
        "ray": res.get("ray"),
    }  # fmt: skip
    if chosen:
        last = chosen[-1]
        out["largest"] = {
            "n": last["n"], "kind": last["choice"]["kind"], "recall@10": last["recall"],
            "p50_ms": last["p50_ms"], "p50_cpu_ms": last["p50_cpu_ms"],
            "memory_mb": last["memory_mb"],
            "meets_targets": bool(
                last["recall"] >= RECALL_TARGET and last["p50_cpu_ms"] <= P50_TARGET_MS
                and last["memory_mb"] <= MEMORY_TARGET_MB
            ),
        }  # fmt: skip
    return out


def scale_reading(res: dict[str, Any]) -> Any:
    """A computed paragraph: the rule's switches, the largest size against the targets, growth."""
    from IPython.display import Markdown

    s = scale_summary(res)
    ch = chosen_table(res)
    sizes = s["sizes"]
    parts = [
        f"**Reading.** Measured at {len(sizes)} sizes, {sizes[0]:,}–{sizes[-1]:,} vectors "
        f"({res.get('date')}, {res.get('machine')}, `{res.get('command')}`)."
    ]
    if len(ch):
        rows = ch.to_dict("records")
        switches = [
            f"{a['kind']} → {b['kind']} between {a['n']:,} and {b['n']:,} vectors"
            for a, b in zip(rows[:-1], rows[1:], strict=True)
            if a["kind"] != b["kind"]
        ]
        parts.append("The rule switches " + ("; ".join(switches) if switches else "nowhere") + ".")
    if "largest" in s:
        L = s["largest"]
        verdict = "meets" if L["meets_targets"] else "misses"
        parts.append(
            f"At {L['n']:,} vectors it picks {KINDS[L['kind']]}: recall@10 {L['recall@10']:.3f}, "
            f"p50 {L['p50_cpu_ms']:.2f} ms CPU ({L['p50_ms']:.2f} ms wall on the shared machine), "
            f"{L['memory_mb']:.0f} MB — it {verdict} the targets (≥ {RECALL_TARGET}, ≤ "
            f"{P50_TARGET_MS:g} ms, ≤ {MEMORY_TARGET_MB:.0f} MB)."
        )
    for lead, ex in (
        ("Growth exponents against papers (time ∝ papers^b): ", s["growth_exponents"]),
        (
            "Against the work each stage does (first-N-paper subsets differ in length): ",
            s.get("work_exponents", {}),
        ),
    ):
        if ex:
            over = [k for k, v in ex.items() if v > GROWTH_TARGET]
            parts.append(
                lead
                + ", ".join(f"{k} {v:.2f}" for k, v in ex.items())
                + (
                    f"; above {GROWTH_TARGET}: {', '.join(over)}."
                    if over
                    else f"; all ≤ {GROWTH_TARGET}."
                )
            )
    parts.append(
        "Recall here is on replicated, perturbed copies of the real vectors (see the method note): "
        "evidence for this distribution, an assumption for 100× genuinely different papers."
    )
    return Markdown(" ".join(parts))
