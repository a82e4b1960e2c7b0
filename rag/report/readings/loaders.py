"""The file reads behind two readings, kept apart so every other reading is a pure function.

:func:`parameter_of` reads a profile and a notebook's ``parameters`` cell; :func:`context_choice`
reads notebook 04's ``metrics.json`` from the run folder and hands its chunk block to the pure
:func:`rag.report.readings.faithfulness.context_choice_reading`.
"""

from __future__ import annotations

import ast
from typing import Any

from rag.report import profiles
from rag.report.readings.faithfulness import context_choice_reading
from rag.report.recorder import read_metrics


def parameter_of(profile: str, notebook: str, key: str) -> Any:
    """The value ``notebook`` runs with on ``profile``: the profile's delta, else the default of
    its ``parameters`` cell (so 02 can name the chunking that 03–05 index)."""
    resolved = profiles.resolve_parameters(profile, f"outputs/{profile}").get(notebook, {})
    if key in resolved:
        return resolved[key]
    nb = next(p for p in profiles.notebook_paths() if p.stem == notebook)
    return ast.literal_eval(profiles.declared_parameters(nb)[key]["default"])


def retrieval_chunk_metrics(output_dir: str) -> dict[str, Any]:
    """Notebook 04's ``corpus_gold.chunk`` block in ``output_dir``; ``{}`` when 04 has not run."""
    try:
        m04 = read_metrics(output_dir, "04_retrieval")
    except (OSError, ValueError):
        m04 = {}
    return m04.get("corpus_gold", {}).get("chunk", {})


def context_choice(retriever: str, output_dir: str) -> Any:
    """Why the held-constant retriever, from what notebook 04 recorded in ``output_dir``."""
    return context_choice_reading(retriever, retrieval_chunk_metrics(output_dir))
