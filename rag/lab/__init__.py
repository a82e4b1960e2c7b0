"""The lab from a notebook: ``from rag import Lab``.

front (:class:`Lab`, :class:`Chat`: the paper desk's tools as methods, loaded lazily) · records
(the typed results: HTML in Jupyter, text, DataFrame, the service's JSON) · papers (the paper
desk's records) · compare (one question
through several retrievers, graded against the gold) · html (the records' markup, nothing loaded
from the network) · notebook (what a Jupyter cell shows: records, not progress bars or the lab's
frames). See ``docs/lab.md``.
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
