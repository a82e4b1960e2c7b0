"""llama-cpp-python helpers: grammar-constrained greedy decoding and lean prefix-cache states.

:class:`GreedyGrammar` applies a GBNF grammar the way llama.cpp's own ``common_sampler`` does
(the greedy token first, the whole vocabulary only when it is rejected), so a constrained answer
is the same text as the library's full filter gives, only faster. :func:`lean_states` makes the
prefix cache keep the KV state without a copy of the logits buffer.
"""

from __future__ import annotations

from typing import Any

from rag.errors import ConfigError


def lean_states(model: Any) -> None:
    """Make ``model``'s prefix-cache states hold the KV cache only, not a copy of its logits buffer.

    llama-cpp-python's ``save_state`` / ``load_state`` also copy ``Llama.scores``: ``n_batch`` x
    vocabulary floats (512 x 49,152 = 100 MB for SmolLM2), zeroed by a mask on every load. Without
    ``logits_all`` nothing reads those rows (sampling reads the context's logits, and a restored
    state always re-evaluates at least the prompt's last token), so the copies buy nothing. They
    cost time on every save and load and keep 100 MB per cached state outside the cache's byte
    budget (about half the peak memory of 05's local rows; docs/performance.md). The KV state,
    token ids and seed are saved and restored, so the answers are the same as with the library's
    own states (``tests/test_llm_prefix_reuse.py``).
    """
    import ctypes

    import llama_cpp
    import numpy as np
    from llama_cpp.llama import LlamaState

    if model._logits_all:
        return  # the scores are real there (logprobs): keep llama-cpp-python's own states
    ctx = model._ctx.ctx
    no_scores = np.empty((0, model.n_vocab()), dtype=np.single)

    def save_state() -> Any:
        size = llama_cpp.llama_state_get_size(ctx)
        buf = (ctypes.c_uint8 * int(size))()
        n = int(llama_cpp.llama_state_get_data(ctx, buf, size))
        if n > int(size):
            raise RuntimeError("llama.cpp wrote more state than it sized")
        return LlamaState(
            input_ids=model.input_ids.copy(),
            scores=no_scores,
            n_tokens=model.n_tokens,
            llama_state=bytes(memoryview(buf)[:n]),
            llama_state_size=n,
            seed=model._seed,
        )

    def load_state(state: Any) -> None:
        model.input_ids = state.input_ids.copy()
        model.n_tokens = state.n_tokens
        model._requires_eval = True
        model._seed = state.seed
        size = state.llama_state_size
        buf = (ctypes.c_uint8 * size).from_buffer_copy(state.llama_state)
        if llama_cpp.llama_state_set_data(ctx, buf, size) != size:
            raise RuntimeError("llama.cpp did not restore the whole state")

    model.save_state, model.load_state = save_state, load_state


def compile_grammar(gbnf: str) -> Any:
    """A ``llama_cpp.LlamaGrammar`` from GBNF text (llama.cpp parses it when sampling starts).

    Raises:
        ConfigError: llama-cpp-python rejects the grammar text (the message quotes its first line).
    """
    from llama_cpp import LlamaGrammar

    try:
        return LlamaGrammar.from_string(gbnf, verbose=False)
    except (ValueError, RuntimeError) as e:
        first = gbnf.strip().splitlines()[0] if gbnf.strip() else "(empty)"
        raise ConfigError(f"llama.cpp cannot parse the grammar starting {first!r}: {e}") from e


class GreedyGrammar:
    """Greedy, grammar-constrained token choice that checks the greedy token first.

    llama-cpp-python's sampler chain applies a grammar to every one of SmolLM2's 49,152 vocabulary
    entries at every step, which makes a constrained answer several times slower than a free one.
    llama.cpp's own ``common_sampler`` avoids that: it tests only the greedy
    token against the grammar and filters the whole vocabulary only when that token is
    rejected. This does the same inside the chain (penalties -> this -> greedy), with one more
    step: a rejected greedy token sends the :attr:`TOP` highest-scoring tokens through the grammar
    before the whole vocabulary. The chosen token is always the highest-scoring token the
    grammar allows, exactly what the full filter followed by greedy would choose (ties aside:
    equal logits), so the text is the same and only faster.
    """

    #: Candidates checked, best first, when the greedy token is rejected.
    TOP = 256

    def __init__(self, llm: Any, gbnf: str, root: str = "root") -> None:
        import ctypes

        import llama_cpp
        import numpy as np

        self._c, self._lc, self._np = ctypes, llama_cpp, np
        self._g = llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, gbnf.encode("utf-8"), root.encode("utf-8")
        )
        if not self._g:
            first = gbnf.strip().splitlines()[0] if gbnf.strip() else "(empty)"
            raise ConfigError(f"llama.cpp cannot parse the grammar starting {first!r}")
        self._dtype = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])
        self._prev: int | None = None
        self.fast = self.slow = self.full = 0

    def apply(self, cur_p: Any) -> None:
        """Leave only the grammar-allowed greedy token with a finite logit."""
        c, lc, np = self._c, self._lc, self._np
        if self._prev is not None:
            lc.llama_sampler_accept(self._g, self._prev)
        arr = cur_p.contents
        n = int(arr.size)
        raw = (c.c_char * (n * self._dtype.itemsize)).from_address(c.addressof(arr.data.contents))
        view = np.frombuffer(raw, dtype=self._dtype)
        logits = view["logit"]
        i = int(np.argmax(logits))
        one = (lc.llama_token_data * 1)()
        one[0].id, one[0].logit, one[0].p = int(view["id"][i]), float(logits[i]), 0.0
        single = lc.llama_token_data_array(data=one, size=1, selected=-1, sorted=False)
        lc.llama_sampler_apply(self._g, c.byref(single))
        if np.isfinite(one[0].logit):
            self.fast += 1
        else:  # the greedy token breaks the grammar: try the best TOP tokens, then everything
            top = np.argpartition(-logits, self.TOP)[: self.TOP] if n > self.TOP else np.arange(n)
            few = (lc.llama_token_data * len(top))()
            for j, t in enumerate(top):
                few[j].id, few[j].logit, few[j].p = int(view["id"][t]), float(logits[t]), 0.0
            some = lc.llama_token_data_array(data=few, size=len(top), selected=-1, sorted=False)
            lc.llama_sampler_apply(self._g, c.byref(some))
            ok = [(few[j].logit, -j) for j in range(len(top)) if np.isfinite(few[j].logit)]
            if ok:
                self.slow += 1
                i = int(top[-max(ok)[1]])
            else:
                self.full += 1
                lc.llama_sampler_apply(self._g, cur_p)
                i = int(np.argmax(logits))
        best = float(logits[i])
        logits[:] = -np.inf
        logits[i] = best
        self._prev = int(view["id"][i])

    def close(self) -> None:
        """Free the llama.cpp grammar sampler."""
        if self._g:
            self._lc.llama_sampler_free(self._g)
            self._g = None


def grammar_sampler_factory(llm: Any, gbnf: str) -> tuple[Any, GreedyGrammar]:
    """An ``_init_sampler`` for one constrained greedy call (:class:`GreedyGrammar`)."""
    from llama_cpp import _internals

    gate = GreedyGrammar(llm, gbnf)

    def init_sampler(**kw: Any) -> Any:
        s = _internals.LlamaSampler()
        s.add_penalties(
            n_vocab=llm._n_vocab,
            penalty_last_n=llm.last_n_tokens_size,
            penalty_repeat=kw.get("repeat_penalty", 1.0),
            penalty_freq=kw.get("frequency_penalty", 0.0),
            penalty_present=kw.get("presence_penalty", 0.0),
        )
        s.add_custom(gate.apply)
        s.add_greedy()
        return s

    return init_sampler, gate
