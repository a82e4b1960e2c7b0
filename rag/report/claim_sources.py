"""Where the results tables' numbers come from: the committed files and the keys inside them.

Notebooks 01-07 of the default run write ``metrics.json`` and tables under ``outputs/default/``;
the chunking x embedder sweep, the embedder comparison and two judge benches write theirs under
``outputs/``. The claims of :mod:`rag.report.readme_claims` (the README's rows) and
:mod:`rag.report.results_claims` (``docs/results.md``) name their numbers through these.
"""

from __future__ import annotations

from rag.report.readme_numbers import Csv, Json

DEFAULT_RUN = "outputs/default"
INGEST, CHUNK, INDEX, RETRIEVAL, FAITHFULNESS, CONVERSATION, PAPERS = (
    f"{DEFAULT_RUN}/{nb}/metrics.json"
    for nb in ("01_ingest", "02_chunk", "03_index", "04_retrieval", "05_faithfulness",
               "06_conversation", "07_papers")
)  # fmt: skip
PAIRWISE = f"{DEFAULT_RUN}/04_retrieval/tables/corpus_gold_pairwise.csv"
SUMMARIES = "outputs/bench/summaries.json"
SWEEP = "outputs/sweeps/chunk_embedder"
EMBEDDERS, EMB_PAIRED, GEMMA_ROW = (
    "outputs/bench/embedders.json",
    "paired_vs_minilm",
    "embedder=embeddinggemma-300m",
)
NOMIC = "embedders.nomic-embed-v1.5.corpus_gold_chunk"
GEMMA = "embedders.embeddinggemma-300m.corpus_gold_chunk"
E5, MPNET = "embedders.e5-small.corpus_gold_chunk", "embedders.mpnet-base-v2.corpus_gold_chunk"
MINILM = "embedders.minilm.corpus_gold_chunk"
QWEN_JUDGE, JUDGE_PAIRED = (
    "outputs/bench/judge_qwen2.5-coder-1.5b.json",
    "paired_other_minus_offline",
)
GEMMA_JUDGE = "outputs/bench/judge_offline_embeddinggemma-300m.json"
RELATED_PAIRED = "related_work.paired_tests.recall@10[a=text,b=fusion]"


def js(file: str, **path: str) -> dict[str, Json]:
    return {name: Json(file, p) for name, p in path.items()}


def ci(file: str, path: str, name: str, *, listed: bool = False) -> dict[str, Json]:
    """``name``, ``name_lo``, ``name_hi`` of a ``{mean, ci_low, ci_high}`` block (``listed``:
    ``{mean, ci: [low, high]}``)."""
    lo, hi = ("ci.0", "ci.1") if listed else ("ci_low", "ci_high")
    return js(
        file, **{name: f"{path}.mean", f"{name}_lo": f"{path}.{lo}", f"{name}_hi": f"{path}.{hi}"}
    )


def pair(a: str, b: str, name: str, *, flip: bool = False) -> dict[str, Csv]:
    """A row of 04's paired table; ``flip``: the README states ``b`` minus ``a``."""
    w, s = (("a", a), ("b", b)), -1.0 if flip else 1.0
    lo, hi = ("ci_high", "ci_low") if flip else ("ci_low", "ci_high")
    return {
        name: Csv(PAIRWISE, "diff", w, scale=s),
        f"{name}_lo": Csv(PAIRWISE, lo, w, scale=s),
        f"{name}_hi": Csv(PAIRWISE, hi, w, scale=s),
        f"{name}_p": Csv(PAIRWISE, "p_adjusted", w),
    }


def answerer(row: str, name: str, *, listed: bool = True) -> dict[str, Json]:
    return ci(FAITHFULNESS, f"answerers.{row}.faithfulness", name, listed=listed)
