"""The report: profiles, the papermill runner, scrubbing and publishing, the metrics recorder.

Modules:

- ``calibrate``: ``make calibrate``
- ``claim_sources``: the files and keys the results tables' numbers come from
- ``figures``: figures
- ``fingerprint``: skip unchanged notebooks
- ``freshness``: stale pages
- ``index_page``: the front page
- ``kernels``: kernels that start in parallel
- ``markdown``: Markdown posts
- ``parameters_cell``: a notebook's declared parameters, read without papermill
- ``md_tables``: HTML tables as pipe tables, spans kept cell for cell
- ``profiles``: profiles and their validation
- ``publish``: nothing secret reaches a page
- ``quiet``: logs, not cells
- ``readings``: each notebook's findings computed from its numbers (one module per notebook)
- ``readme_claims``: the README's results rows, number by number
- ``readme_numbers``: the check of a results table against its sources
- ``recorder``: metrics.json, tables, figures
- ``results_claims``: ``docs/results.md``, the results table in full
- ``render``: published and code pages
- ``runner``: papermill → HTML
- ``sweep``: ``rag sweep``, local or Ray
- ``sweep_config``: sweep files and cells
- ``sweep_page``: a sweep's page
- ``sweep_results``: a sweep's table and paired tests
"""
