"""Evaluation: gold sets, evidence matching, IR metrics, statistics, SciFact, answer and
faithfulness grades.

ranx's metrics are numba kernels. At this lab's sizes (hundreds of queries x 100 documents)
compiling them costs far more than it saves: a new process spends seconds to tens of seconds
compiling numba's typed containers (never cached on disk), and a new venv more for the kernels,
against a fraction of a second to score the same runs as plain Python
(``outputs/bench/ranx_jit.json``, docs/decisions.md; both modes give identical per-query values).
So this package, imported before any of its modules imports ranx, lets ranx run as plain Python
unless numba is already imported or ``NUMBA_DISABLE_JIT`` is set (``NUMBA_DISABLE_JIT=0`` keeps
the JIT). numba serves only ranx in this project.

Modules:

- ``agreement``: retrievers compared without labels
- ``answers``: token F1, yes/no accuracy, rejection
- ``citations``: faithfulness, citation precision/recall
- ``compare``: retrievers compared on one dataset
- ``conversation``: follow-ups built from the gold
- ``evidence``: the one fuzzy evidence matcher
- ``faithfulness``: answerers graded on the same contexts
- ``gold``: gold questions and qrels
- ``judge_validation``: judges against human labels
- ``metrics``: ranx metrics with CIs
- ``model_pairs``: two local models, question by question (also from a page's traces)
- ``own_questions``: how much gold a slice has, your own questions
- ``qasper``: human QASPER evidence
- ``scifact``: BEIR SciFact
- ``stats``: bootstrap CIs, paired tests, Holm
"""

import os as _os
import sys as _sys

if "numba" not in _sys.modules:
    _os.environ.setdefault("NUMBA_DISABLE_JIT", "1")
