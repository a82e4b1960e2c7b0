"""Benchmarks of the LLM layer (speed, not correctness; the ``llm`` stage of ``rag bench``).

- Local model, per engine: load seconds; prompt processing tokens/s on a ~1,500-token prompt
  (``n_prompt / prompt_s``) and generation tokens/s for a forced 150-token answer
  (``(150 - 1) / (seconds - prompt_s)``), both split out of one run (see ``local.Timing``) so
  load changes between runs cannot make the difference negative.
- Cache-hit latency of :meth:`CachedChatModel.complete` (median over repeated hits).
- Overhead of the layer (validation, hashing, semaphore, retry wrapper, cost, meter) over a raw
  ``openai`` SDK call, both against :class:`~rag.llm.testing.FakeLLMServer` on 127.0.0.1
  with the cache off, so the difference of medians is the layer's own cost.

The 1-minute system load before and after is recorded with the numbers, since wall-clock
figures move with whatever else runs on the machine.
"""

from __future__ import annotations

import logging
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from rag.errors import ProviderUnavailable
from rag.llm.cache import CompletionCache
from rag.llm.factory import make_chat_model
from rag.llm.local import Engine, LocalBackend, Weights
from rag.llm.settings import ApiKeys, LLMSettings
from rag.llm.testing import FakeLLMServer

log = logging.getLogger(__name__)

_PARAGRAPH = (
    "Retrieval-augmented generation answers a question by first retrieving passages from a "
    "corpus and then conditioning a language model on them. Dense retrievers embed queries and "
    "passages in one vector space, while sparse retrievers such as BM25 score term overlap. "
    "Faithfulness asks whether every claim in the answer is supported by the retrieved text. "
)


def long_prompt(target_chars: int = 7_700) -> list[dict[str, str]]:
    """A deterministic chat prompt of about 1,500 tokens (about 4 characters per token)."""
    body = (_PARAGRAPH * (target_chars // len(_PARAGRAPH) + 1))[:target_chars]
    return [
        {"role": "system", "content": "Answer from the context only."},
        {"role": "user", "content": f"Context:\n{body}\n\nQuestion: What is faithfulness?"},
    ]


def bench_local(
    engine: Engine,
    *,
    threads: int = 2,
    answer_tokens: int = 150,
    weights: Weights = "q4_1",
) -> dict[str, Any]:
    """Load time and prompt/generation tokens/s of the local model on one engine."""
    t0 = time.perf_counter()
    backend = LocalBackend(engine, threads=threads, reuse_prefix=False, weights=weights)
    backend._load()
    load_s = time.perf_counter() - t0
    msgs = long_prompt()
    _, full = backend.generate(msgs, max_tokens=answer_tokens, min_tokens=answer_tokens)
    gen_s = max(full.seconds - full.prompt_s, 1e-9)
    return {
        "engine": engine,
        "weights": backend.weights,
        "threads": threads,
        "load_s": round(load_s, 2),
        "prompt_tokens": full.prompt_tokens,
        "prompt_tok_per_s": round(full.prompt_tokens / max(full.prompt_s, 1e-9), 1),
        "answer_tokens": full.output_tokens,
        "gen_tok_per_s": round((full.output_tokens - 1) / gen_s, 1),
        "total_s_150": round(full.seconds, 2),
    }


def _timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _median(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 3)


def _median_ms(fn: Callable[[], object], n: int) -> float:
    return _median([_timed(fn) for _ in range(n)])


def bench_layer(n: int = 200) -> dict[str, Any]:
    """Cache-hit latency and layer overhead over the raw openai SDK, on a local server."""
    import openai

    msgs = [{"role": "user", "content": "Say hi."}]
    keys = ApiKeys(openai="sk-bench-not-a-key")  # type: ignore[arg-type]
    with FakeLLMServer("openai") as server, tempfile.TemporaryDirectory() as tmp:
        s = LLMSettings(openai_base_url=f"{server.url}/v1", max_attempts=1)
        cache = CompletionCache(tmp)
        cached = make_chat_model("gpt-4o-mini", s, cache=cache, meter=None, keys=keys)
        first, second = cached.complete(msgs), cached.complete(msgs)
        if first.cached or not second.cached:
            raise RuntimeError("cache benchmark: the second call was not served from the cache")
        hit_ms = _median_ms(lambda: cached.complete(msgs), n)
        cache.close()
        layer = make_chat_model(
            "gpt-4o-mini", s.model_copy(update={"cache_enabled": False}), keys=keys
        )
        raw = openai.OpenAI(
            api_key="sk-bench-not-a-key", base_url=f"{server.url}/v1", max_retries=0
        )
        raw_call = lambda: raw.chat.completions.create(  # noqa: E731
            model="gpt-4o-mini", messages=msgs, temperature=0.0, max_tokens=256, seed=0
        )
        raw_call(), layer.complete(msgs)  # warm both connections
        raw_t, layer_t = [], []
        for _ in range(n):  # interleaved, so load drift hits both alike
            raw_t.append(_timed(raw_call))
            layer_t.append(_timed(lambda: layer.complete(msgs)))
        raw_ms, layer_ms = _median(raw_t), _median(layer_t)
    return {
        "cache_hit_ms": hit_ms,
        "raw_sdk_ms": raw_ms,
        "layer_ms": layer_ms,
        "overhead_ms": round(layer_ms - raw_ms, 3),
        "n": n,
    }


def run_bench(engines: tuple[Engine, ...] = ("llama_cpp", "transformers")) -> dict[str, Any]:
    """Run every LLM benchmark, print a table and return the numbers."""
    load = os.getloadavg()
    out: dict[str, Any] = {"loadavg_1m_before": round(load[0], 2), "local": [], "skipped": []}
    for engine in engines:
        try:
            row = bench_local(engine)
        except ProviderUnavailable as e:
            out["skipped"].append(f"{engine}: {e}")
            continue
        out["local"].append(row)
        print(f"local {engine}: {row}", flush=True)
    out["layer"] = bench_layer()
    out["loadavg_1m_after"] = round(os.getloadavg()[0], 2)
    print(format_table(out))
    return out


def format_table(res: dict[str, Any]) -> str:
    """The benchmark results as a plain-text table."""
    lines = [
        f"{'engine':<13}{'load s':>8}{'prompt tok':>11}{'prompt tok/s':>13}"
        f"{'gen tok/s':>10}{'150-tok s':>10}"
    ]
    for r in res["local"]:
        lines.append(
            f"{r['engine']:<13}{r['load_s']:>8}{r['prompt_tokens']:>11}{r['prompt_tok_per_s']:>13}"
            f"{r['gen_tok_per_s']:>10}{r['total_s_150']:>10}"
        )
    lines += [f"skipped: {s}" for s in res["skipped"]]
    lay = res["layer"]
    lines.append(
        f"cache hit {lay['cache_hit_ms']} ms | raw SDK {lay['raw_sdk_ms']} ms | "
        f"layer {lay['layer_ms']} ms | overhead {lay['overhead_ms']} ms (median of {lay['n']})"
    )
    lines.append(
        f"system load (1 min) before {res['loadavg_1m_before']}, after {res['loadavg_1m_after']}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    run_bench(tuple(sys.argv[1:]) or ("llama_cpp", "transformers"))  # type: ignore[arg-type]
