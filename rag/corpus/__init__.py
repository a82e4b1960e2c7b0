"""The corpus stage: the pinned manifest, the polite arXiv client, ingest and PDF parsing.

Modules:

- ``arxiv_client``: polite arXiv client
- ``fetch``: cache → mirror → arXiv, verified
- ``ingest``: fetch and parse a corpus
- ``ingest_summary``: the run's record
- ``lock``: per-paper lock
- ``manifest``: the pinned corpus
- ``papers``: a profile's corpus
- ``parse``: PyMuPDF → blocks
- ``pdf_meta``: title, authors, year, arXiv id, DOI from the PDF itself
- ``pdf_check``: a whole PDF?
- ``pdf_layout``: margins, order, headings, kinds
- ``pdf_lines``: lines, block text
- ``rate_limit``: request spacing
- ``title_scores``: margins
- ``titlecheck``: page-1 title check
"""
