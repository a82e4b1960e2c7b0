"""Figures that make their point: dots zoomed to the data, differences to a baseline with CIs.

When values cluster (found rates near 0.99, nDCG@10 within 0.05 of each other), bars on a 0–1 axis
hide the comparison; these plots zoom to the data and, for paired comparisons, plot the difference
to a baseline with its 95 % CI so "is it real?" is read off the zero line. Legends never sit on
data: they go below the axes or labels go on the points. The corpus as a citation network
(:func:`citation_network`) places its labels so that no two overlap.
"""

from __future__ import annotations

from typing import Any

import numpy as np

REAL = "#c44e52"
NOT_REAL = "#4c72b0"


def rate_dots(
    ax: Any,
    labels: list[str],
    values: list[float],
    lows: list[float],
    highs: list[float],
    *,
    target: float | None = None,
    xlabel: str = "",
    title: str = "",
    bounds: tuple[float, float] = (0.0, 1.0),
) -> None:
    """Point estimates with 95 % CIs, one row per label, the axis zoomed to the data and target."""
    y = np.arange(len(labels))
    v, lo, hi = (np.asarray(a, dtype=float) for a in (values, lows, highs))
    ax.errorbar(v, y, xerr=[v - lo, hi - v], fmt="o", color="#333", ecolor="#888", capsize=4)
    for yi, vi in zip(y, v, strict=True):
        ax.annotate(f"{vi:.3f}", (vi, yi), xytext=(0, 7), textcoords="offset points",
                    ha="center", fontsize=8)  # fmt: skip
    pts = np.concatenate([lo, hi] + ([np.array([target])] if target is not None else []))
    span = max(float(pts.max() - pts.min()), 0.02)
    left = max(bounds[0], float(pts.min()) - 0.15 * span)
    right = min(bounds[1] + 0.04 * span, float(pts.max()) + 0.15 * span)
    if right - left < 0.02:
        left, right = right - 0.02, right
    ax.set_xlim(left, right)
    if target is not None:
        ax.axvline(target, ls="--", color="k", lw=1)
        ax.annotate(f"target {target:g}", (target, len(labels) - 0.5), xytext=(3, 0),
                    textcoords="offset points", fontsize=8, va="top")  # fmt: skip
    ax.set_yticks(y, labels)
    ax.set_ylim(-0.6, len(labels) - 0.4)
    ax.set(xlabel=xlabel + "  (axis zoomed to the data)", title=title)
    ax.grid(axis="x", alpha=0.3)


def diff_to_baseline(
    ax: Any, pairwise: Any, baseline: str, *, metric: str = "nDCG@10", title: str = ""
) -> list[str]:
    """Dot-and-whisker of (retriever − ``baseline``) with its 95 % CI from a paired table.

    ``pairwise`` has columns ``a, b, diff (= a − b), ci_low, ci_high, significant``. Returns the
    retrievers drawn, top to bottom. Red: a real difference (corrected test and CI agree).
    """
    rows = []
    for _, r in pairwise.iterrows():
        if baseline not in (r["a"], r["b"]):
            continue
        sign = 1.0 if r["b"] == baseline else -1.0
        other = r["a"] if r["b"] == baseline else r["b"]
        lo, hi = sorted((sign * r["ci_low"], sign * r["ci_high"]))
        rows.append((other, sign * r["diff"], lo, hi, bool(r["significant"])))
    rows.sort(key=lambda t: t[1])
    y = np.arange(len(rows))
    for yi, (_, d, lo, hi, sig) in zip(y, rows, strict=True):
        c = REAL if sig else NOT_REAL
        ax.errorbar([d], [yi], xerr=[[d - lo], [hi - d]], fmt="o", color=c, ecolor=c, capsize=4)
        ax.annotate(f"{d:+.3f}", (d, yi), xytext=(0, 7), textcoords="offset points",
                    ha="center", fontsize=8, color=c)  # fmt: skip
    ax.axvline(0, color="k", lw=1)
    ax.set_yticks(y, [r[0] for r in rows])
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set(xlabel=f"{metric} minus {baseline} (95 % CI); red = a real difference", title=title)
    ax.grid(axis="x", alpha=0.3)
    return [r[0] for r in rows]


#: Marker area (points²) per corpus paper citing a node in :func:`citation_network`.
SIZE_PER_CITATION = 16


def short_title(title: str, width: int = 30) -> str:
    """A node label: the name before a title's colon ("BERT: Pre-training ..." → "BERT") when it
    is short, else the title's first words up to ``width`` characters."""
    if title.isupper():
        title = title.title()
    head, colon, _ = title.partition(":")
    if colon and len(head) <= width:
        return head.strip()
    words, out = title.split(), ""
    for w in words:
        if len(out) + len(w) + 1 > width:
            return out + "…"
        out = f"{out} {w}".strip()
    return out


def _place_labels(ax: Any, items: list[tuple[Any, str, float]]) -> None:
    """Label points without overlapping labels: each label takes the first of a few offsets
    (above, below, right, left, then further out) whose box meets no label placed before it."""
    from matplotlib.text import Text

    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    placed: list[Any] = []
    for xy, text, radius in items:
        tries = [
            (np.cos(a) * d, np.sin(a) * d, "left" if np.cos(a) > 0.3 else "right"
             if np.cos(a) < -0.3 else "center", "bottom" if np.sin(a) > 0.3 else "top"
             if np.sin(a) < -0.3 else "center")
            for d in (radius + 3, radius + 16, radius + 32, radius + 50)
            for a in np.radians([90, 270, 0, 180, 45, 135, 315, 225])
        ]  # fmt: skip
        ann = None
        for dx, dy, ha, va in tries:
            if ann is not None:
                ann.remove()
            ann = ax.annotate(
                text, xy, xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=8,
                zorder=4, arrowprops={"arrowstyle": "-", "color": "#666", "lw": 0.5},
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8},
            )  # fmt: skip
            # the text's own box: the annotation's extent includes its leader line
            ann.update_positions(renderer)
            box = Text.get_window_extent(ann, renderer).padded(3)
            if not any(box.overlaps(b) for b in placed):
                break
        placed.append(box)


def citation_network(
    ax: Any,
    papers: list[tuple[str, str, str]],
    edges: list[tuple[str, str]],
    *,
    labels: int = 12,
    seed: int = 0,
) -> dict[str, Any]:
    """Draw the corpus as a citation network on ``ax``; return what was drawn.

    Papers linked to another corpus paper are laid out by a seeded spring layout (Fruchterman &
    Reingold 1991), edges citing → cited as thin grey arrows; papers with no in-corpus link sit
    in a row beneath, so the reader sees how much of the corpus the graph covers. Nodes are
    coloured by arXiv primary category and sized by in-degree (corpus papers citing them); the
    ``labels`` most cited carry a short title. Legends go below the axes.

    Args:
        ax: a matplotlib axes.
        papers: ``(arxiv_id, title, primary_category)`` for every corpus paper.
        edges: ``(citing, cited)`` pairs, both in the corpus.
        labels: how many of the most-cited papers are labelled.
        seed: seed of the layout (the figure is deterministic).
    """
    import networkx as nx
    from matplotlib.lines import Line2D

    g = nx.DiGraph()
    g.add_nodes_from(sorted(pid for pid, _, _ in papers))
    g.add_edges_from(sorted(edges))
    title = {pid: t for pid, t, _ in papers}
    cats = {pid: c for pid, _, c in papers}
    counts: dict[str, int] = {}
    for c in cats.values():
        counts[c] = counts.get(c, 0) + 1
    order = sorted(counts, key=lambda c: (-counts[c], c))
    palette = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
               "#8c8c8c", "#ccb974", "#64b5cd"]  # fmt: skip
    colour = {c: palette[i % len(palette)] for i, c in enumerate(order)}
    linked = sorted(n for n in g if g.degree(n) > 0)
    alone = sorted(n for n in g if g.degree(n) == 0)
    pos: dict[str, Any] = {}
    if linked:
        # Kamada-Kawai spreads a small graph evenly (hubs in the middle, no far-flung leaves);
        # the seeded spring layout only starts it, so the figure is deterministic
        sub = g.subgraph(linked).to_undirected()
        start = nx.spring_layout(sub, seed=seed)
        pos.update(nx.kamada_kawai_layout(sub, pos=start))
    ys = [p[1] for p in pos.values()] or [0.0]
    y_alone = min(ys) - 0.16
    for i, n in enumerate(alone):
        x = -1.0 + 2.0 * (i + 0.5) / max(len(alone), 1)
        pos[n] = np.array([x, y_alone])
    indeg = dict(g.in_degree())
    size = {n: 14 + SIZE_PER_CITATION * indeg[n] for n in g}
    nx.draw_networkx_edges(
        g, pos, ax=ax, edge_color="#9a9a9a", width=0.6, alpha=0.55, arrows=True,
        arrowstyle="-|>", arrowsize=6, node_size=[size[n] for n in g],
        connectionstyle="arc3,rad=0.08",
    )  # fmt: skip
    nodes = list(g)
    ax.scatter(
        [pos[n][0] for n in nodes], [pos[n][1] for n in nodes], s=[size[n] for n in nodes],
        c=[colour[cats[n]] for n in nodes], edgecolors="white", linewidths=0.7, zorder=3,
    )  # fmt: skip
    top = sorted((n for n in linked if indeg[n]), key=lambda n: (-indeg[n], n))[:labels]
    _place_labels(ax, [(pos[n], f"{short_title(title[n])} ({indeg[n]})",
                        np.sqrt(size[n]) / 2) for n in top])  # fmt: skip
    if alone:
        ax.annotate(
            f"{len(alone)} papers with no citation link inside the corpus", (0, y_alone),
            xytext=(0, -14), textcoords="offset points", ha="center", fontsize=8, color="#555",
        )  # fmt: skip
    ax.set_axis_off()
    cat_handles = [
        Line2D([], [], ls="", marker="o", ms=7, color=colour[c], label=f"{c} ({counts[c]})")
        for c in order
    ]
    steps = [d for d in (1, 5, 10, 20, 40) if d <= max(indeg.values(), default=0)]
    size_handles = [
        Line2D([], [], ls="", marker="o", ms=np.sqrt(14 + SIZE_PER_CITATION * d), color="#bbbbbb",
               label=f"cited by {d}")
        for d in steps
    ]  # fmt: skip
    leg = ax.legend(
        handles=cat_handles, title="primary category (papers)", loc="upper left",
        bbox_to_anchor=(0.0, 0.0), ncol=len(cat_handles), frameon=False, fontsize=8,
        title_fontsize=8,
    )  # fmt: skip
    if size_handles:
        # a second legend replaces the axes' legend: keep the first as an artist, unclipped (an
        # added artist is clipped to the axes, and these sit below them)
        ax.add_artist(leg)
        leg.set_clip_on(False)
        ax.legend(
            handles=size_handles, title="node size: corpus papers citing it", loc="upper right",
            bbox_to_anchor=(1.0, 0.0), ncol=len(size_handles), frameon=False, fontsize=8,
            title_fontsize=8,
        )  # fmt: skip
    return {"linked": len(linked), "alone": len(alone), "edges": g.number_of_edges(),
            "labelled": top}  # fmt: skip
