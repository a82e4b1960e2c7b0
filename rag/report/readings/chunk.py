"""Readings of notebook 02 (chunk): chunk sizes, evidence kept intact, and the strategy it picks."""

from __future__ import annotations

from typing import Any

from rag.evaluation.stats import CI
from rag.report.readings.common import interval, join, md


def chunk_sizes(sizes: Any) -> Any:
    """Chunks and token sizes per strategy, and which strategy makes the fewest chunks."""
    parts = [
        f"`{s}` {int(r['chunks']):,} chunks (median {r['median_tokens']:.0f} tokens, p95 "
        f"{r['p95_tokens']:.0f}, max {int(r['max_tokens'])})"
        for s, r in sizes.iterrows()
    ]
    fewest = sizes["chunks"].idxmin()
    return md(
        f"**Reading.** {join(parts)}. `{fewest}` makes the fewest chunks, i.e. the fewest vectors "
        "to embed and search; `fixed` windows sit at the cap by construction, sentence and section "
        "chunks end at sentence boundaries and run shorter."
    )


def _intact(survival: Any, strategy: str) -> CI:
    return CI.from_dict(survival.loc[strategy], "intact_rate")


def chunk_choice(survival: Any, sizes: Any, indexed: str) -> tuple[str, str, list[str]]:
    """(the strategy this evidence picks, why, the strategies tied with the best) — the best
    intact rate, ties (overlapping CIs) broken by the fewest chunks."""
    best = _intact(survival, survival["intact_rate"].idxmax())
    tied = [s for s in survival.index if best.overlaps(_intact(survival, s))]
    pick = min(tied, key=lambda s: sizes.loc[s, "chunks"])
    if len(tied) > 1:
        why = (
            f"{join([f'`{s}`' for s in tied])} are not distinguishable on intact evidence (their "
            f"95 % CIs overlap), so the tie goes to the fewest chunks: `{pick}`"
        )
    else:
        why = f"`{pick}` keeps the most evidence intact, clear of the others' intervals"
    return pick, why, tied


def evidence_intact(survival: Any, sizes: Any, indexed: str) -> Any:
    """Gold quotes intact per strategy, the strategy the rule picks, and whether 03–05 index it."""
    n = int(survival["quotes"].iloc[0]) if len(survival) else 0
    parts = [
        f"`{s}` {int(r['intact'])}/{int(r['quotes'])} = " + interval(CI.from_dict(r, "intact_rate"))
        for s, r in survival.iterrows()
    ]
    pick, why, _ = chunk_choice(survival, sizes, indexed)
    text = f"**Reading.** Gold quotes intact inside one chunk (n = {n}): {join(parts)}. {why}. "
    if pick == indexed:
        text += f"Notebooks 03–05 index `{indexed}` (their `chunk_strategy`), the same choice."
    else:
        text += (
            f"Notebooks 03–05 index `{indexed}` (their `chunk_strategy` parameter), not `{pick}`: "
            "on this profile the rule above would pick the other one."
        )
    return md(text)


def example_chunks(quote: str | None, examples: list[dict[str, Any]], width: int = 420) -> Any:
    """The first gold quote inside a chunk of each strategy, the quote in bold."""
    if quote is None:
        return md("_No gold quote falls on these papers: no example._")
    lines = [
        f"**The quote** (first gold quote in gold-file order): “{' '.join(quote.split())}”",
        "",
    ]
    q = " ".join(quote.split())
    for e in examples:
        text = " ".join(e["text"].split())
        at = text.find(q)
        if at >= 0:  # a window around the quote, the quote in bold
            lo, hi = max(0, at - width // 3), min(len(text), at + len(q) + width // 3)
            text = (
                ("… " if lo else "")
                + text[lo:at]
                + f"**{q}**"
                + text[at + len(q) : hi]
                + (" …" if hi < len(text) else "")
            )
        elif len(text) > width:
            text = text[:width].rsplit(" ", 1)[0] + " …"
        has = "contains the quote" if e["contains_quote"] else "does **not** contain it"
        lines += [
            f"- **`{e['strategy']}`** — chunk `{e['chunk_id']}`, section “{e['section'] or '–'}”, "
            f"pages {e['pages']}, {e['tokens']} tokens; {has}:",
            f"  > {text}",
        ]
    lines += ["", "**Reading.** The same quote sits in a chunk of each strategy; how much context "
              "surrounds it is what differs."]  # fmt: skip
    return md("\n".join(lines))


def answer_chunk(survival: Any, sizes: Any, indexed: str) -> str:
    """The index page's one sentence for notebook 02."""
    pick, _, tied = chunk_choice(survival, sizes, indexed)
    r = survival.loc[pick]
    verdict = (
        f"{join([f'`{s}`' for s in tied])} are not distinguishable on intact evidence"
        if len(tied) > 1
        else "the others lose evidence"
    )
    return (
        f"`{pick}` keeps {interval(CI.from_dict(r, 'intact_rate'))} of {int(r['quotes'])} "
        f"gold quotes inside one chunk with the fewest chunks "
        f"({int(sizes.loc[pick, 'chunks']):,}); "
        f"{verdict}, and notebooks 03–05 index `{indexed}`."
    )
