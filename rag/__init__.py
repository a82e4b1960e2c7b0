"""arXiv RAG Lab: question answering over a pinned arXiv corpus, measured honestly.

The package does the work; the numbered notebooks in ``notebooks/`` only orchestrate, plot and
explain. One module per idea: see the README's "Package map".
"""

from __future__ import annotations

import os

__version__ = "0.1.0"

#: OpenMP threads (torch's and llama.cpp's libgomp) spin while they wait for each other; when
#: another process holds one of the cores (a second notebook, a test worker, a sweep cell) the
#: spinning thread starves the one it waits for. The policy is read once, when libgomp loads, so it
#: is set here, before any submodule imports torch or llama_cpp (and for every report kernel in
#: ``rag.report.runner.KERNEL_ENV``); an explicit setting in the environment wins. Measured on 2
#: cores with two other processes busy: SmolLM2 generating 64 tokens on 2 threads took 41.85 s by
#: default and 3.77 s passive (1 thread: 3.55 s); MiniLM embedded 19.8 vs 58.6 passages/s. The
#: effect on an otherwise idle machine is not measured yet.
OMP_WAIT_POLICY = "PASSIVE"
os.environ.setdefault("OMP_WAIT_POLICY", OMP_WAIT_POLICY)
