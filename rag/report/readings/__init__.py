"""Readings computed, not typed: each section's finding stated from the numbers it records.

A notebook section ends with ``readings.<section>(...)`` fed the same values that go into
``metrics.json``, so the prose cannot drift from the numbers when a parameter or the corpus changes.
Each reading returns an ``IPython.display.Markdown``; ``answer_*`` functions return the sentence
the index page shows for the notebook. Fixed wording is for method and caveats only.

One module per notebook (:mod:`.ingest`, :mod:`.chunk`, :mod:`.index`, :mod:`.retrieval`,
:mod:`.faithfulness`, :mod:`.conversation`), the skip notes and gold-free readings of papers no
gold covers in :mod:`.nogold`, number formatting in :mod:`.common`, and the two readings that need
files in :mod:`.loaders`. Every reading is importable from here, so notebooks
write ``from rag.report import readings`` and ``readings.<name>(...)``.

Modules:

- ``chunk``: 02's findings
- ``common``: number formatting
- ``conversation``: 06's findings
- ``faithfulness``: 05's findings
- ``index``: 03's findings
- ``ingest``: 01's findings
- ``loaders``: the file reads behind two readings
- ``nogold``: skip notes and gold-free findings
- ``papers``: 07's findings
- ``retrieval``: 04's findings
"""

from __future__ import annotations

from rag.report.readings.chunk import (
    answer_chunk,
    chunk_choice,
    chunk_sizes,
    evidence_intact,
    example_chunks,
)
from rag.report.readings.common import interval, join, md, num
from rag.report.readings.conversation import answer_conversation
from rag.report.readings.faithfulness import (
    answer_faithfulness,
    answerers_status,
    context_choice_reading,
    faithfulness_reading,
    headline_faithfulness,
    judge_candidates,
    judge_validation,
    paired_reading,
    questions_reading,
    trim_answer,
    worked_examples,
)
from rag.report.readings.index import (
    answer_index,
    embedding_throughput,
    index_build,
    index_growth,
)
from rag.report.readings.ingest import answer_ingest, block_kinds, ingest_counts, parse_quality
from rag.report.readings.loaders import context_choice, parameter_of, retrieval_chunk_metrics
from rag.report.readings.nogold import (
    SKIP_NOTE,
    agreement_reading,
    answer_chunk_without_gold,
    answer_faithfulness_without_gold,
    answer_no_follow_ups,
    answer_retrieval_without_gold,
    coverage_reading,
    faithfulness_without_gold,
    headline_without_gold,
    needs_gold,
    no_follow_ups,
    own_questions_reading,
    section_note,
)
from rag.report.readings.retrieval import (
    answer_retrieval,
    breakdown_reading,
    components,
    gold_file,
    gold_ranking,
    latency_reading,
    llm_cache_label,
    pairwise_reading,
    pool_recall,
    proxy_reading,
    qasper_check,
    scifact_reproduction,
    wins_reading,
)

__all__ = [
    "SKIP_NOTE",
    "agreement_reading",
    "answer_chunk_without_gold",
    "answer_no_follow_ups",
    "answer_faithfulness_without_gold",
    "answer_retrieval_without_gold",
    "coverage_reading",
    "faithfulness_without_gold",
    "headline_without_gold",
    "needs_gold",
    "no_follow_ups",
    "own_questions_reading",
    "section_note",
    "answer_chunk",
    "answer_conversation",
    "answer_faithfulness",
    "answer_index",
    "answer_ingest",
    "answer_retrieval",
    "answerers_status",
    "block_kinds",
    "breakdown_reading",
    "chunk_choice",
    "chunk_sizes",
    "components",
    "context_choice",
    "context_choice_reading",
    "embedding_throughput",
    "evidence_intact",
    "example_chunks",
    "faithfulness_reading",
    "gold_file",
    "gold_ranking",
    "headline_faithfulness",
    "index_build",
    "index_growth",
    "ingest_counts",
    "interval",
    "join",
    "judge_candidates",
    "judge_validation",
    "latency_reading",
    "llm_cache_label",
    "md",
    "num",
    "paired_reading",
    "pairwise_reading",
    "parameter_of",
    "parse_quality",
    "pool_recall",
    "proxy_reading",
    "qasper_check",
    "questions_reading",
    "retrieval_chunk_metrics",
    "scifact_reproduction",
    "trim_answer",
    "wins_reading",
    "worked_examples",
]
