"""A calibrated yes/no judge: a local instruct model's P("yes") that a passage supports a claim.

One ChatML question per (claim, passage) pair, one prefill, no generation: the score is the
model's next-token probability of "yes" renormalised against "no" (both spellings, ``yes``/``Yes``
and ``no``/``No``), read from the logits after the assistant turn opens. A JSON verdict from the
same model is an argmax over a generated string; the probability is a *score*, thresholded where
it separates best on SciFact train's held-out fold, so a model that ranks well but answers "yes"
too often is still useful.

The model is a fetched, sha256-pinned GGUF (``rag models fetch qwen2.5-coder-1.5b``): opt-in,
never a dependency. Scores are cached on disk by model digest, prompt version, claim and passage
(:mod:`diskcache`), so a re-run is free and the judge's cost is paid once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from rag import paths
from rag.errors import JudgeError
from rag.verdicts import Verdict

#: Bump when the question changes: part of every cached score's key.
PROMPT_VERSION = "yesno-v1"
SYSTEM = "You check whether a passage supports a claim. Answer with one word: yes or no."
QUESTION = "Passage: {passage}\n\nClaim: {claim}\n\nDoes the passage support the claim?"


def chatml(claim: str, passage: str) -> str:
    """The ChatML prompt whose next token is the answer."""
    user = QUESTION.format(passage=passage.strip(), claim=claim.strip())
    return (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


class YesNoJudge:
    """Claim judge over a fetched chat GGUF's P("yes").

    Args:
        model: a fetched chat model (``qwen2.5-coder-1.5b``), or the packaged ``smollm2-135m``
            (ChatML too; too weak to judge, it serves tests).
        threshold: the score at or above which a claim is supported.
        n_threads: llama.cpp threads.
        max_passage_tokens: the passage is cut to this many tokens (the prompt stays in context).
    """

    def __init__(
        self,
        model: str = "qwen2.5-coder-1.5b",
        *,
        threshold: float = 0.5,
        n_threads: int = 1,
        max_passage_tokens: int = 900,
    ) -> None:
        self.model_name = model
        if model == "smollm2-135m":  # the packaged model: its GGUF lies in the package
            from rag.filehash import sha256_file
            from rag.llm.local_weights import find_gguf

            self.path = find_gguf()
            self.digest = sha256_file(self.path)
        else:
            from rag.llm.assembled import verified_digest

            self.path, self.digest = verified_digest(model)
        self.threshold = threshold
        self.n_threads = n_threads
        self.max_passage_tokens = max_passage_tokens
        self.name = f"yesno:{model}"
        self.seconds_computed = 0.0
        self.pairs_computed = 0

    @functools.cached_property
    def fingerprint(self) -> str:
        return f"{self.name}:{self.digest[:16]}:{PROMPT_VERSION}:t{self.threshold:.6f}"

    @functools.cached_property
    def _llm(self) -> Any:
        from rag.llm.llama_load import load_llama

        llm = load_llama(
            model_path=str(self.path),
            n_ctx=1280,
            n_threads=self.n_threads,
            n_batch=512,
            logits_all=False,
            verbose=False,
        )
        vocab = {}
        for word in ("yes", "Yes", "no", "No"):
            ids = llm.tokenize(word.encode(), add_bos=False, special=False)
            if len(ids) != 1:
                raise JudgeError(f"{self.model_name}: {word!r} is not one token; no yes/no score")
            vocab[word] = ids[0]
        self._ids = vocab
        return llm

    @functools.cached_property
    def _cache(self) -> Any:
        import diskcache

        return diskcache.Cache(str(paths.cache_dir("judge_yesno")))

    def _key(self, claim: str, passage: str) -> str:
        blob = json.dumps([PROMPT_VERSION, self.digest, self.max_passage_tokens, claim, passage])
        return hashlib.sha256(blob.encode()).hexdigest()

    def _passage(self, passage: str) -> str:
        llm = self._llm
        toks = llm.tokenize(passage.encode(), add_bos=False, special=False)
        if len(toks) <= self.max_passage_tokens:
            return passage
        return llm.detokenize(toks[: self.max_passage_tokens]).decode("utf-8", "ignore")

    def score(self, claim: str, passage: str) -> float:
        """P("yes") / (P("yes") + P("no")) after the question (cached)."""
        if not claim.strip():
            raise JudgeError("empty claim given to the yes/no judge; pass a non-empty claim")
        key = self._key(claim, passage)
        hit = self._cache.get(key)
        if hit is not None:
            return float(hit)
        t0 = time.perf_counter()
        llm = self._llm
        toks = llm.tokenize(
            chatml(claim, self._passage(passage)).encode(), add_bos=False, special=True
        )
        import llama_cpp

        llm.reset()
        llm.eval(toks)  # without logits_all, only the last position's logits are kept: read them
        ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
        logits = np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).astype(np.float64)
        top = logits.max()
        p = np.exp(logits - top)
        yes = p[self._ids["yes"]] + p[self._ids["Yes"]]
        no = p[self._ids["no"]] + p[self._ids["No"]]
        value = round(float(yes / (yes + no)), 6) if yes + no > 0 else 0.5
        self._cache.set(key, value)
        self.seconds_computed += time.perf_counter() - t0
        self.pairs_computed += 1
        return value

    def scores(self, pairs: Sequence[tuple[str, str]], desc: bool = False) -> np.ndarray:
        from tqdm.auto import tqdm

        return np.array(
            [
                self.score(c, p)
                for c, p in tqdm(
                    pairs, desc=f"judging ({self.name})", unit="pair", disable=not desc
                )
            ]
        )

    def predict(self, pairs: Sequence[tuple[str, str]], desc: bool = False) -> list[Verdict]:
        out = []
        for s in self.scores(pairs, desc):
            ok = s >= self.threshold
            out.append(
                Verdict(
                    "supported" if ok else "unsupported",
                    float(s),
                    f"P(yes) {s:.2f} {'>=' if ok else '<'} {self.threshold:.2f}",
                    {"p_yes": float(s)},
                )
            )
        return out

    def verdict(self, claim: str, context: str) -> Verdict:
        return self.predict([(claim, context)])[0]


__all__ = ["PROMPT_VERSION", "YesNoJudge", "chatml"]
