"""The LLM layer: one chat interface over OpenAI, Anthropic, Groq, self-hosted OpenAI-compatible
endpoints (Ollama, vLLM, llama.cpp's server), any local GGUF file and the packaged SmolLM2.

- :mod:`rag.llm.base` — the :class:`ChatModel` protocol and :class:`Completion` record.
- :mod:`rag.llm.factory` — ``make_chat_model(name, settings, cache=, meter=)`` and
  ``available_models(settings)``; the only place SDK clients are built.
- :mod:`rag.llm.settings` — ``LLMSettings`` and ``keys_from_env()`` (the only reader of keys).
- :mod:`rag.llm.names` — ``provider:model`` names parsed into a ``ModelRef``.
- :mod:`rag.llm.registry` — model specs and the dated list prices of ``prices.yaml``.
- :mod:`rag.llm.gguf` — a GGUF file's context, chat template, end token and sha256.
- :mod:`rag.llm.cache`, :mod:`rag.llm.retry`, :mod:`rag.llm.meter`, :mod:`rag.llm.estimate` —
  disk cache, retries, per-run cost meter, dry-run cost estimate.
- :mod:`rag.llm.testing` — local fake provider servers shared by tests and :mod:`rag.bench.llm`.

Submodules are imported explicitly so that importing :mod:`rag.llm.base` stays cheap.
"""
