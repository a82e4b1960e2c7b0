"""The entailment judge: the lab's own cross-encoder behind the one :class:`ClaimJudge` interface.

A claim is read against the context's sentences and adjacent sentence pairs (windows, so a claim
that combines two sentences can be entailed); the ``max_units`` units sharing the most content
words with the claim go through the cross-encoder of :mod:`rag.judge.nli_train`, which gives each
(claim, unit) pair p(not said), p(supported), p(contradicted). The claim's scores are the maxima
over units: it is ``supported`` when p(supported) reaches the pinned threshold, otherwise
``unsupported`` (named *contradicted* in the reason and trace when p(contradicted) reaches its
threshold) or ``not_found`` when no unit shares a content word with it. Both thresholds are
chosen on a held-out grouped fold of SciFact train, never on dev.

The model is pinned in git as ``data/judge/<name>.json`` (recipe, data key, thresholds, the
weights' sha256) beside ``<name>.safetensors`` (the trained parameters in fp16; the frozen word
embeddings come from the packaged backbone). Loading re-hashes the weights and refuses a file
whose digest differs from the pinned one, naming both. A pair's scores are cached on disk by the
weights' digest, ``max_units``, claim and context (:mod:`diskcache`), so a re-run judges nothing
twice.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag import paths
from rag.errors import ConfigError, JudgeError
from rag.filehash import sha256_file
from rag.judge.features import content_stems
from rag.judge.synth import NLI_LABELS
from rag.text.sentences import split_sentences
from rag.verdicts import Verdict

#: The pinned entailment judges by name (files under ``data/judge/``).
NLI_JUDGES: tuple[str, ...] = ("nli-minilm-v1",)
#: Bump when the JSON layout changes.
NLI_FORMAT = "nli-judge-v1"


def pin_dir(root: Path | None = None) -> Path:
    return (root or paths.project_root()) / "data" / "judge"


def claim_units(context: str, max_units: int, claim: str) -> tuple[list[str], int]:
    """The context's sentences and adjacent pairs closest to ``claim`` by shared content words.

    Returns (units in context order, the largest number of content words a unit shares with the
    claim); ties keep context order, so the choice is deterministic.
    """
    sents = [s for s in split_sentences(context, mode="answer") if s.strip()] or [context.strip()]
    units = sents + [f"{a} {b}" for a, b in zip(sents, sents[1:], strict=False)]
    q = set(content_stems(claim))
    overlap = [len(q & set(content_stems(u))) for u in units]
    keep = sorted(range(len(units)), key=lambda i: (-overlap[i], i))[:max_units]
    return [units[i] for i in sorted(keep)], max(overlap) if overlap else 0


class NliJudge:
    """Claim judge over the pinned entailment cross-encoder ``name``.

    Args:
        name: a pinned judge (:data:`NLI_JUDGES`) or the stem of a JSON file in ``pin_root``.
        pin_root: the folder holding ``<name>.json`` and its weights (``data/judge/``).
        max_units: context units scored per claim (the cost per claim).
    """

    def __init__(
        self, name: str = NLI_JUDGES[0], *, pin_root: Path | None = None, max_units: int = 10
    ) -> None:
        root = pin_root or pin_dir()
        meta_path = root / f"{name}.json"
        if not meta_path.exists():
            raise ConfigError(
                f"no pinned entailment judge {name!r} at {paths.display(meta_path)}; "
                "build it with `make judge-train`"
            )
        self.meta: dict[str, Any] = json.loads(meta_path.read_text(encoding="utf-8"))
        if self.meta.get("format") != NLI_FORMAT:
            raise ConfigError(f"{paths.display(meta_path)} is not a {NLI_FORMAT} file")
        self.weights_path = root / self.meta["weights"]
        self.name = name
        self.max_units = max_units
        self.threshold = float(self.meta["threshold"])
        self.contra_threshold = float(self.meta["contra_threshold"])
        self.max_length = int(self.meta["recipe"]["max_length"])
        self.model, self.tok = self._load()

    def _load(self) -> tuple[Any, Any]:
        import torch
        from safetensors.torch import load_file

        from rag.judge.nli_train import load_backbone

        if not self.weights_path.exists():
            raise ConfigError(f"pinned judge weights missing: {paths.display(self.weights_path)}")
        got, want = sha256_file(self.weights_path), self.meta["sha256"]
        if got != want:
            raise ConfigError(
                f"{paths.display(self.weights_path)} has sha256 {got}, but {self.name} pins "
                f"{want}; restore the file (git checkout) or rebuild it with `make judge-train`"
            )
        model, tok = load_backbone(self.meta["recipe"]["backbone"], 0)
        state = {k: v.to(torch.float32) for k, v in load_file(str(self.weights_path)).items()}
        missing = set(state) - set(model.state_dict())
        if missing:
            raise ConfigError(f"{self.name}: weights carry unknown tensors {sorted(missing)[:3]}")
        model.load_state_dict(state, strict=False)
        model.eval()
        return model, tok

    @functools.cached_property
    def fingerprint(self) -> str:
        return f"{self.name}:{self.meta['sha256'][:16]}:u{self.max_units}"

    @functools.cached_property
    def _cache(self) -> Any:
        import diskcache

        return diskcache.Cache(str(paths.cache_dir("judge_nli")))

    def _key(self, claim: str, context: str) -> str:
        blob = json.dumps([self.meta["sha256"], self.max_units, claim, context])
        return hashlib.sha256(blob.encode()).hexdigest()

    def scores(self, pairs: Sequence[tuple[str, str]], desc: bool = False) -> np.ndarray:
        """Per (claim, context) pair: max p(supported), max p(contradicted), largest overlap."""
        for claim, _ in pairs:
            if not claim.strip():
                raise JudgeError(
                    "empty claim given to the entailment judge; pass a non-empty claim"
                )
        keys = [self._key(c, x) for c, x in pairs]
        out = np.zeros((len(pairs), 3))
        todo = []
        for i, k in enumerate(keys):
            hit = self._cache.get(k)
            if hit is None:
                todo.append(i)
            else:
                out[i] = hit
        if todo:
            fresh = self._score([pairs[i] for i in todo], desc)
            for i, row in zip(todo, fresh, strict=True):
                out[i] = row
                self._cache.set(keys[i], [float(v) for v in row])
        return out

    def _score(self, pairs: Sequence[tuple[str, str]], desc: bool) -> np.ndarray:
        """The model's scores for pairs not in the cache."""
        from tqdm.auto import tqdm

        from rag.judge.nli_train import predict

        flat, owner, overlaps = [], [], []
        for i, (claim, context) in enumerate(pairs):
            units, overlap = claim_units(context, self.max_units, claim)
            flat += [(claim, u) for u in units]
            owner += [i] * len(units)
            overlaps.append(overlap)
        probs = np.zeros((0, len(NLI_LABELS)), dtype=np.float32)
        step = 512
        chunks = range(0, len(flat), step)
        parts = [
            predict(self.model, self.tok, flat[s : s + step], max_length=self.max_length)
            for s in tqdm(
                chunks,
                desc=f"judging ({self.name})",
                unit="batch",
                disable=not desc or len(chunks) < 2,
            )
        ]
        if parts:
            probs = np.concatenate(parts)
        out = np.zeros((len(pairs), 3))
        out[:, 2] = overlaps
        for p, o in zip(probs, owner, strict=True):
            out[o, 0] = max(out[o, 0], float(p[1]))
            out[o, 1] = max(out[o, 1], float(p[2]))
        return out

    def predict(self, pairs: Sequence[tuple[str, str]], desc: bool = False) -> list[Verdict]:
        """Verdicts for many (claim, context) pairs at once (one batched model pass)."""
        out = []
        for s, c, overlap in self.scores(pairs, desc):
            s, c = round(float(s), 6), round(float(c), 6)
            trace = {
                "p_supported": s,
                "p_contradicted": c,
                "overlap": int(overlap),
                "contradicted": False,
            }
            if s >= self.threshold:
                label, why = "supported", f"entailed: p(supported) {s:.2f} >= {self.threshold:.2f}"
            elif c >= self.contra_threshold:
                label, why = "unsupported", f"contradicted: p(contradicted) {c:.2f}"
                trace["contradicted"] = True
            elif overlap == 0:
                label, why = "not_found", "no context sentence shares a content word"
            else:
                label, why = (
                    "unsupported",
                    f"not entailed: p(supported) {s:.2f} < {self.threshold:.2f}",
                )
            out.append(Verdict(label, s, why, trace))
        return out

    def verdict(self, claim: str, context: str) -> Verdict:
        return self.predict([(claim, context)])[0]


__all__ = ["NLI_JUDGES", "NliJudge", "claim_units"]
