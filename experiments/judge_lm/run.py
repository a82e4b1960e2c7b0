"""Does the packaged small LM's conditional likelihood add anything to the offline judge?

The offline judge must catch contradictions with no NLI model installable here. Besides
hand-built cues (offline-v2) and a fine-tuned MiniLM cross-encoder
(:mod:`experiments.judge_crossencoder.run`), a third signal is free: how much more likely the
packaged SmolLM2-135M finds the claim after reading the evidence than without it (pointwise mutual
information, as in perplexity-based fact checking, Lee et al., 2021). Per SciFact pair, with the
``k`` abstract sentences closest to the claim (MiniLM cosine, in document order) as the passage:

- ``pmi_mean`` / ``pmi_sum`` / ``pmi_min``: per claim token, log p(token | passage) minus
  log p(token | no passage); their mean, sum and minimum;
- ``flip_contrast``: [log p(claim | passage) - log p(flipped claim | passage)] minus the same
  difference without the passage, where the flipped claim is the judge's own polarity flip
  (:func:`rag.judge.contrast.flip_claim`): does the evidence prefer the claim to its negation?
- ``cond_mean``: mean log p(token | passage).

**Recipe, fixed before the first run** (:data:`RECIPE`): the offline judge's logistic regression
over the offline-v2 features, with and without these five columns (and the two subsets
``pmi_mean + flip_contrast`` and ``flip_contrast``), C and threshold chosen by the judge's grouped
5-fold CV on ``judge_train``. SciFact dev is featurised and scored **only if** a variant's CV
balanced accuracy beats the features alone by at least :data:`DEV_BAR`; otherwise the JSON says
dev was not read.

``python -m experiments.judge_lm.run`` writes ``outputs/bench/judge_lm.json``. Needs
llama-cpp-python (``make setup`` builds it) and ``../shared``. Four llama.cpp passes per pair (the
passage evaluated once); features are cached in blocks of :data:`BLOCK` pairs, so an interrupted
run resumes where it stopped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from experiments._common import DEV_PATH, TRAIN_PATH, dev_card, read_rows, stack_cv, train_setup
from rag import paths
from rag.bench import write_json
from rag.errors import ConfigError

#: The recipe's version: part of the feature cache key.
RECIPE = "judge-lm-pmi-v1"
NAMES = ("pmi_mean", "pmi_sum", "pmi_min", "flip_contrast", "cond_mean")
#: Variants: name -> columns of NAMES added to the offline-v2 features.
VARIANTS: dict[str, tuple[int, ...]] = {
    "features": (),
    "features + all five": (0, 1, 2, 3, 4),
    "features + pmi_mean, flip_contrast": (0, 3),
    "features + flip_contrast": (3,),
}
#: A variant must beat the features' grouped-CV balanced accuracy by this much for dev to be read.
DEV_BAR = 0.01
BLOCK = 50
PASSAGE = "Passage: {passage}\nA statement the passage supports:"
NO_PASSAGE = "A statement:"


class ClaimScorer:
    """Per-token log-probabilities of a text after a prefix, from a llama.cpp model.

    The prefix's state is kept between calls, so the claim and its flip after the same passage
    evaluate the passage once. ``llm`` is a ``llama_cpp.Llama`` built with ``logits_all=True``.
    """

    def __init__(self, llm: Any, max_tokens: int = 1000) -> None:
        self.llm = llm
        self.max_tokens = max_tokens
        self._prefix: list[int] | None = None

    def __call__(self, prefix: str, text: str) -> np.ndarray:
        llm = self.llm
        a = llm.tokenize(prefix.encode(), add_bos=False, special=False)
        b = llm.tokenize((" " + text).encode(), add_bos=False, special=False)
        if not b:
            raise ConfigError(f"nothing to score after the prefix: {text!r}")
        b = b[: self.max_tokens // 2]
        a = a[-(self.max_tokens - len(b)) :] or llm.tokenize(b" ", add_bos=False, special=False)
        if self._prefix == a:
            llm.n_tokens = len(a)  # keep the prefix's cache; eval() drops what follows it
        else:
            llm.reset()
            llm.eval(a)
            self._prefix = a
        llm.eval(b)
        toks = np.array(a + b)
        pos = np.arange(len(a), len(toks))
        logits = np.asarray(llm.scores[pos - 1], dtype=np.float64)
        top = logits.max(axis=1, keepdims=True)
        logz = np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0]
        return logits[np.arange(len(pos)), toks[pos]] - logz


def load_llm(n_ctx: int = 1024) -> Any:
    """The packaged SmolLM2-135M under llama.cpp, keeping every position's logits."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError as exc:  # pragma: no cover - make setup installs it
        raise ConfigError("llama-cpp-python is not installed: run `make setup`") from exc
    from rag.llm.llama_load import load_llama
    from rag.llm.local import find_gguf

    return load_llama(
        model_path=str(find_gguf()),
        n_ctx=n_ctx,
        n_threads=2,
        logits_all=True,
        verbose=False,
        n_batch=512,
    )


def pair_features(score: Callable[[str, str], np.ndarray], passage: str, claim: str) -> list[float]:
    """The five :data:`NAMES` features of one (passage, claim) pair."""
    from rag.judge.contrast import flip_claim

    flip = flip_claim(claim)
    c1 = score(PASSAGE.format(passage=passage), claim)
    c2 = score(PASSAGE.format(passage=passage), flip)
    u1 = score(NO_PASSAGE, claim)
    u2 = score(NO_PASSAGE, flip)
    n = min(len(c1), len(u1))
    tok = c1[-n:] - u1[-n:]
    return [
        float(tok.mean()),
        float(tok.sum()),
        float(tok.min()),
        float((c1.sum() - c2.sum()) - (u1.sum() - u2.sum())),
        float(c1.mean()),
    ]


def passages(rows: Sequence[dict], embedder: Any, k: int) -> list[str]:
    """Per row, its ``k`` abstract sentences closest to the claim, joined in document order."""
    from rag.judge.features import context_units
    from rag.judge.offline import embed

    out = []
    for r in rows:
        sents = list(context_units(r["abstract"]).sentences)
        vecs = embed([r["claim"], *sents], embedder)
        top = sorted(np.argsort(-(vecs[1:] @ vecs[0]), kind="stable")[:k].tolist())
        out.append(" ".join(sents[i] for i in top))
    return out


def lm_features(
    rows: Sequence[dict],
    embedder: Any,
    score: Callable[[str, str], np.ndarray],
    *,
    k: int = 3,
    show_progress: bool = True,
) -> np.ndarray:
    """The :data:`NAMES` features of ``rows``, cached per block of :data:`BLOCK` rows."""
    from tqdm.auto import tqdm

    texts = passages(rows, embedder, k)
    out = []
    bar = tqdm(total=len(rows), desc="SmolLM2 PMI", unit="pair", disable=not show_progress)
    for start in range(0, len(rows), BLOCK):
        part = list(zip(texts[start : start + BLOCK], rows[start : start + BLOCK], strict=True))
        key = hashlib.sha256(
            json.dumps([RECIPE, k, [(p, r["claim"]) for p, r in part]]).encode()
        ).hexdigest()[:16]
        saved = paths.cache_dir("judge_lm") / f"{key}.npy"
        if saved.exists():
            block = np.load(saved)
        else:
            block = np.array([pair_features(score, p, r["claim"]) for p, r in part])
            tmp = saved.with_suffix(".part.npy")
            np.save(tmp, block)
            tmp.replace(saved)
        out.append(block)
        bar.update(len(part))
    bar.close()
    return np.concatenate(out) if out else np.zeros((0, len(NAMES)))


def run(
    train_path: str = TRAIN_PATH,
    dev_path: str = DEV_PATH,
    *,
    k: int = 3,
    limit: int = 0,
    score: Callable[[str, str], np.ndarray] | None = None,
    show_progress: bool = True,
) -> dict:
    """The recipe: grouped CV on train for every variant, then dev only past :data:`DEV_BAR`."""
    from sklearn.metrics import roc_auc_score

    from rag.judge.features import compute_idf
    from rag.judge.offline import featurize

    t0 = time.perf_counter()
    rows, settings, embedder, y, folds = train_setup(train_path, limit=limit)
    score = score or ClaimScorer(load_llm())
    idf = compute_idf([r["abstract"] for r in rows])

    def judge_features(part: Sequence[dict]) -> np.ndarray:
        pairs = [(r["claim"], r["abstract"]) for r in part]
        return featurize(pairs, embedder, idf, settings.max_sentences, version=settings.version)[0]

    x = judge_features(rows)
    lm = lm_features(rows, embedder, score, k=k, show_progress=show_progress)
    sup = y.astype(bool)
    con = np.array([r["label"] == "CONTRADICT" for r in rows])
    both = sup | con
    alone = {
        name: {
            "auc_support_vs_not": round(float(roc_auc_score(y, lm[:, j])), 4),
            "auc_support_vs_contradict": round(float(roc_auc_score(sup[both], lm[both, j])), 4),
        }
        for j, name in enumerate(NAMES)
    }
    cv: dict[str, dict] = {}
    for name, cols in VARIANTS.items():
        xt = np.c_[x, lm[:, list(cols)]] if cols else x
        best, oof, _ = stack_cv(xt, y, xt[:1], folds, settings)
        cv[name] = {**best, "oof_auc": round(float(roc_auc_score(y, oof)), 4)}
    base = cv["features"]["cv_ba"]
    gain = max(v["cv_ba"] for v in cv.values()) - base
    res: dict[str, Any] = {
        "what": "SUPPORT-vs-not; SmolLM2-135M PMI columns beside the offline-v2 features",
        "recipe": RECIPE,
        "train_file": paths.display(paths.resolve(train_path)),
        "pairs": len(rows),
        "k_sentences": k,
        "features_alone_on_train": alone,
        "grouped_cv": cv,
        "best_cv_gain": round(gain, 4),
        "dev_bar": DEV_BAR,
    }
    if gain + 1e-12 < DEV_BAR:
        res["dev"] = f"not read: no variant beats the features by {DEV_BAR} in grouped CV"
    else:
        dev = read_rows(dev_path)[: limit or None]
        xd = judge_features(dev)
        lmd = lm_features(dev, embedder, score, k=k, show_progress=show_progress)
        res["dev_file"] = paths.display(paths.resolve(dev_path))
        res["dev"] = {}
        for name, cols in VARIANTS.items():
            xt = np.c_[x, lm[:, list(cols)]] if cols else x
            xdv = np.c_[xd, lmd[:, list(cols)]] if cols else xd
            best, _, p = stack_cv(xt, y, xdv, folds, settings)
            res["dev"][name] = dev_card(dev, p >= best["threshold"])
    res["seconds"] = round(time.perf_counter() - t0, 1)
    return res


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--k", type=int, default=3, help="abstract sentences in the passage")
    ap.add_argument("--out", default="outputs/bench/judge_lm.json")
    a = ap.parse_args(argv)
    res = run(k=a.k)
    write_json(res, a.out)
    for name, r in res["grouped_cv"].items():
        print(f"{name:40s} grouped-CV BA {r['cv_ba']}  OOF AUC {r['oof_auc']}")
    print("dev:", res["dev"] if isinstance(res["dev"], str) else json.dumps(res["dev"]))


if __name__ == "__main__":
    main()
