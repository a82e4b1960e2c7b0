"""The citation-network figure of notebook 07: what it draws, its labels, its determinism."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from rag.report import figures  # noqa: E402

# a hub cited by four papers, a pair citing each other, and two papers with no link
PAPERS = [(f"2001.0000{i}", f"Paper number {i}: a title", "cs.CL" if i < 5 else "cs.LG")
          for i in range(8)]  # fmt: skip
EDGES = [(f"2001.0000{i}", "2001.00000") for i in range(1, 5)] + [
    ("2001.00005", "2001.00004"), ("2001.00004", "2001.00005")
]  # fmt: skip


def _draw(**kw):
    fig, ax = plt.subplots(figsize=(6, 5))
    drawn = figures.citation_network(ax, PAPERS, EDGES, **kw)
    return fig, ax, drawn


def test_the_network_counts_linked_and_lone_papers_and_labels_the_most_cited():
    fig, ax, drawn = _draw(labels=2)
    assert drawn["linked"] == 6 and drawn["alone"] == 2 and drawn["edges"] == 6
    # in-degree: 00000 has 4; 00004 and 00005 one each (ties broken by id)
    assert drawn["labelled"] == ["2001.00000", "2001.00004"]
    texts = [t.get_text() for t in ax.texts]
    assert "Paper number 0 (4)" in texts
    assert "2 papers with no citation link inside the corpus" in texts
    plt.close(fig)


def test_labels_never_overlap_each_other():
    # six papers all citing each other in a small figure: labels drawn above their points would
    # collide
    six = [(f"2001.0001{i}", f"A fairly long title number {i}", "cs.CL") for i in range(6)]
    fig, ax = plt.subplots(figsize=(3, 3))
    edges = [(a[0], b[0]) for a in six for b in six if a != b]
    drawn = figures.citation_network(ax, six, edges, labels=6)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    boxes = [Text.get_window_extent(t, r) for t in ax.texts if t.get_text().endswith(")")]
    assert len(boxes) == len(drawn["labelled"]) == 6
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    plt.close(fig)


def test_the_svg_is_the_same_on_every_draw():
    svgs = []
    for _ in range(2):
        fig, _, _ = _draw()
        buf = io.StringIO()
        with matplotlib.rc_context({"svg.hashsalt": "t"}):
            fig.savefig(buf, format="svg", metadata={"Date": None})
        svgs.append(buf.getvalue())
        plt.close(fig)
    assert svgs[0] == svgs[1]


def test_short_titles():
    assert figures.short_title("BERT: Pre-training of Deep Bidirectional Transformers") == "BERT"
    assert figures.short_title("Attention Is All You Need") == "Attention Is All You Need"
    assert figures.short_title("BI-DIRECTIONAL ATTENTION FLOW FOR MACHINE COMPREHENSION") == (
        "Bi-Directional Attention Flow…"
    )
