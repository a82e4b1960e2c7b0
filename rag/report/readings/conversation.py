"""Readings of notebook 06 (conversation): follow-ups retrieved raw, rewritten, and as originals."""

from __future__ import annotations

import pandas as pd


def answer_conversation(
    table: pd.DataFrame, pairwise: pd.DataFrame, restoration: pd.DataFrame
) -> str:
    """The index page's paragraph for notebook 06: nDCG@10 per condition, entities restored by
    each rewriter, and the paired differences that survive Holm's correction."""
    if table.empty:
        return "The construction rule yields no follow-up on this corpus: nothing to measure."
    raw, top = "follow-up (raw)", "original (upper bound)"

    def nd(name: str) -> str:
        r = table.loc[name]
        return f"{r['ndcg@10']:.3f} {r['ndcg@10 CI']}"

    parts = [
        f"On {int(table.loc[raw, 'n'])} follow-ups, retrieving with the raw follow-up gives "
        f"nDCG@10 {nd(raw)} against {nd(top)} for the original standalone question."
    ]
    for name in [n for n in table.index if n not in (raw, top)]:
        rest = restoration.loc[name]
        parts.append(
            f"{name}: {nd(name)}, entity restored in {int(rest['restored'])}/{int(rest['n'])}."
        )
    if not pairwise.empty:
        sig = pairwise[pairwise["significant"]]
        parts.append(
            f"{len(sig)} of {len(pairwise)} paired differences are significant after Holm "
            "correction" + (": " + "; ".join(sig["reading"].astype(str)) if len(sig) else ".")
        )
    return " ".join(parts)
