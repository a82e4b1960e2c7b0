"""The lab from a notebook: ``from rag import Lab``.

:class:`Lab` and :class:`Chat` offer the paper desk's tools as methods, loaded lazily; they return
typed records that show as HTML in Jupyter, as text, as a DataFrame or as the service's JSON, with
no markup loaded from the network. See ``docs/lab.md``.

Modules:

- ``compare``: retrievers side by side, graded
- ``front``: ``rag.Lab``, the desk in a notebook
- ``html``: markup
- ``notebook``: what a cell shows (no progress bars, input errors briefly)
- ``papers``: the desk's paper records
- ``records``: hits, answers, verdicts
"""

from __future__ import annotations

from rag.lab.compare import Comparison
from rag.lab.front import Chat, Lab
from rag.lab.notebook import show_errors_briefly
from rag.lab.papers import Citations, Page, Paper, PaperList, Related, Summary
from rag.lab.records import Answer, ChatTurn, Hits, Record, Verdict

__all__ = [
    "Answer", "Chat", "ChatTurn", "Citations", "Comparison", "Hits", "Lab", "Page", "Paper",
    "PaperList", "Record", "Related", "Summary", "Verdict",
]  # fmt: skip

show_errors_briefly()  # in a Jupyter kernel, a bad argument shows as its message alone
