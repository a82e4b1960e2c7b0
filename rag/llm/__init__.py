"""The LLM layer: one chat interface over OpenAI, Anthropic, Groq, self-hosted OpenAI-compatible
endpoints (Ollama, vLLM, llama.cpp's server), any local GGUF file and the packaged SmolLM2.

Submodules are imported explicitly so that importing :mod:`rag.llm.base` stays cheap.

Modules:

- ``anthropic_chat``: Anthropic client
- ``assembled``: models assembled from pinned packages (``rag models fetch``)
- ``assembled_io``: concatenate, inflate, extract, verified
- ``assembled_verify``: a fetched model re-verified on each load
- ``base``: ``ChatModel`` interface, messages
- ``cache``: completion cache
- ``commands``: ``rag models``, ``rag cost``, ``rag llm-smoke``
- ``errors``: LLM error types
- ``estimate``: dry-run cost of a batch
- ``factory``: a model by name, or why not; the only place SDK clients are built
- ``gguf``: any GGUF file by path
- ``llama_load``: loading llama.cpp models
- ``llama_sampling``: grammar decoding, lean states
- ``local``: SmolLM2-135M, local
- ``local_weights``: weights, bf16 copies, engines
- ``meter``: tokens and dollars per run
- ``model``: one chat model: cache, retries, cost
- ``names``: ``provider:model`` names
- ``openai_chat``: OpenAI and Groq client
- ``registry``: models, providers, dated prices
- ``retry``: backoff and retryable errors
- ``settings``: ``LLMSettings``, keys from env (the only reader of keys)
- ``testing``: local fake provider servers for tests and ``rag.bench.llm``
"""
