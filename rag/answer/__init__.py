"""Answering: grounded context assembly, answerers and the parsing of answers into claims.

Modules:

- ``answerers``: ``build_answerers``
- ``base``: the Answer record, the interface
- ``calibrate``: the support threshold, held out
- ``calibrate_pin``: the threshold pinned (``make calibrate``)
- ``claims``: answers → sentences, citations, claims
- ``context``: numbered sources, budget, order
- ``extractive``: model-free extractive answerer
- ``gate``: decline gate, attribution filter
- ``grammar``: GBNF grammars
- ``llm``: LLM answerer: free, grammar, closed book
- ``noise``: noisy-context baselines
- ``prompts``: versioned prompts, the refusal
- ``questions``: yes/no and statement forms
- ``quote``: verbatim-quote answerer
- ``run``: answerers over fixed contexts
- ``support``: the supporting sentence
- ``support_extractive``: the judge-supported span
"""
