"""Would a fine-tuned MiniLM cross-encoder judge support better than the offline judge's features?

Issue 13 suggests fine-tuning a small cross-encoder on the SciFact train pairs with the packaged
MiniLM "if CPU time allows (measure it)". ``python -m rag.bench.judge_crossencoder`` measures it on
one grouped fold of ``judge_train`` (the offline judge's claim+document groups: no claim and no
abstract on both sides of the cut); SciFact dev is never read.

- **Sentence pairs.** For every (claim, abstract) pair, the ``k`` abstract sentences closest to the
  claim (MiniLM cosine, as the judge aligns). A sentence that is one of the pair's human rationales
  takes the pair's label (SUPPORT or CONTRADICT); every other sentence is NOT_ENOUGH_INFO.
- **Cross-encoder.** all-MiniLM-L6-v2 with a fresh 3-way head, fine-tuned with class-weighted
  cross-entropy on the training part's sentence pairs (the embeddings and the first
  ``freeze_layers`` encoder layers frozen). A pair's support score is its sentences' highest
  p(SUPPORT).
- **Reference.** The offline-v2 judge fitted by :func:`rag.judge.offline.fit_judge` (its own
  grouped CV inside) on the same training part; its support probability on the held-out part.

Both are scored on the held-out part by ROC AUC (threshold-free) and by balanced accuracy at the
best threshold on that part (optimistic for both, equally), and so is the mean of their z-scores
(does the cross-encoder add anything to the features?).
Writes ``outputs/bench/judge_crossencoder.json``. Full fine-tuning of the six layers for 4 epochs:
~25 min on 2 cores.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag import paths
from rag.bench import write_json
from rag.errors import ConfigError
from rag.jsonl import iter_jsonl

TRAIN_PATH = "../shared/datasets/scifact/judge_train.jsonl"
LABELS = ("NOT_ENOUGH_INFO", "SUPPORT", "CONTRADICT")


def _norm(text: str) -> str:
    return " ".join(text.split())


def read_rows(path: str | Path) -> list[dict]:
    """SciFact judge rows with their rationale sentences flattened into ``rationales``."""
    rows = []
    for _, r in iter_jsonl(paths.resolve(str(path)), ConfigError):
        rows.append(
            {
                "claim_id": r["claim_id"],
                "claim": r["claim"],
                "abstract": r["abstract"],
                "label": r["label"],
                "doc_id": str(r.get("doc_id", "")),
                "title": r.get("title", ""),
                "rationales": [_norm(s) for group in r.get("rationales") or [] for s in group],
            }
        )
    if not rows:
        raise ConfigError(f"{path}: no judge pairs")
    return rows


def sentence_pairs(rows: Sequence[dict], embedder: Any, k: int = 3) -> list[list[tuple[str, int]]]:
    """Per row, its ``k`` sentences closest to the claim, each with a label index into LABELS."""
    from rag.judge.features import context_units
    from rag.judge.offline import embed

    out = []
    for r in rows:
        sents = list(context_units(r["abstract"]).sentences)
        vecs = embed([r["claim"], *sents], embedder)
        top = np.argsort(-(vecs[1:] @ vecs[0]), kind="stable")[:k]
        rationale = set(r["rationales"])
        items = []
        for i in top:
            s = _norm(sents[int(i)])
            hit = s in rationale or any(len(x) > 20 and (s in x or x in s) for x in rationale)
            items.append((sents[int(i)], LABELS.index(r["label"]) if hit else 0))
        out.append(items)
    return out


def fine_tune(
    pairs: Sequence[tuple[str, str]],
    labels: Sequence[int],
    *,
    epochs: int = 4,
    freeze_layers: int = 0,
    lr: float = 3e-5,
    batch: int = 16,
    max_length: int = 192,
    seed: int = 0,
    show_progress: bool = True,
) -> tuple[Any, Any, dict]:
    """MiniLM with a fresh 3-way head fine-tuned on (claim, sentence) pairs: (model, tok, log)."""
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rag.index.embed import minilm_path

    if not pairs:
        raise ConfigError("fine_tune: no sentence pairs")
    torch.manual_seed(seed)
    base = str(minilm_path())
    tok = AutoTokenizer.from_pretrained(base, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(
        base, num_labels=len(LABELS), local_files_only=True
    )
    frozen = [model.bert.embeddings, *model.bert.encoder.layer[:freeze_layers]]
    for module in frozen:
        for p in module.parameters():
            p.requires_grad = False
    counts = np.bincount(np.asarray(labels), minlength=len(LABELS)).clip(1)
    weight = torch.tensor(len(labels) / (len(LABELS) * counts), dtype=torch.float32)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    y = torch.tensor(list(labels))
    rng = np.random.default_rng(seed)
    steps = epochs * -(-len(pairs) // batch)
    bar = tqdm(total=steps, desc="fine-tune judge cross-encoder", disable=not show_progress)
    losses, t0 = [], time.perf_counter()
    model.train()
    for _ in range(epochs):
        total = 0.0
        order = rng.permutation(len(pairs))
        for i in range(0, len(order), batch):
            idx = order[i : i + batch]
            enc = tok(
                [pairs[j][0] for j in idx],
                [pairs[j][1] for j in idx],
                truncation=True,
                max_length=max_length,
                padding=True,
                return_tensors="pt",
            )
            loss = torch.nn.functional.cross_entropy(model(**enc).logits, y[idx], weight=weight)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
            bar.update(1)
        losses.append(round(total / len(pairs), 4))
    bar.close()
    model.eval()
    return model, tok, {"loss_per_epoch": losses, "seconds": round(time.perf_counter() - t0, 1)}


def predict(model: Any, tok: Any, pairs: Sequence[tuple[str, str]], max_length: int = 192):
    """Class probabilities (rows in LABELS order) of (claim, sentence) pairs."""
    import torch

    out = []
    with torch.inference_mode():
        for i in range(0, len(pairs), 64):
            chunk = pairs[i : i + 64]
            enc = tok(
                [p[0] for p in chunk],
                [p[1] for p in chunk],
                truncation=True,
                max_length=max_length,
                padding=True,
                return_tensors="pt",
            )
            out.append(torch.softmax(model(**enc).logits, -1).numpy())
    return np.concatenate(out) if out else np.zeros((0, len(LABELS)))


def _scores(y: np.ndarray, p: np.ndarray) -> dict:
    from sklearn.metrics import roc_auc_score

    from rag.judge.offline import _best_threshold

    t, ba = _best_threshold(y, p)
    return {"auc": round(float(roc_auc_score(y, p)), 4), "ba_best_threshold": round(ba, 4)}


def _z(p: np.ndarray) -> np.ndarray:
    return (p - p.mean()) / (p.std() or 1.0)


def run(
    train_path: str = TRAIN_PATH,
    *,
    fold: int = 0,
    folds: int = 5,
    k: int = 3,
    epochs: int = 4,
    freeze_layers: int = 0,
    limit: int = 0,
    show_progress: bool = True,
) -> dict:
    """Fine-tune on the other folds, score fold ``fold`` against the offline-v2 features."""
    from sklearn.model_selection import StratifiedGroupKFold

    from rag.index.embed import minilm
    from rag.judge.offline import OfflineJudgeSettings, cv_groups, featurize, fit_judge

    t0 = time.perf_counter()
    rows = read_rows(train_path)
    if limit:
        rows = rows[:limit]
    settings = OfflineJudgeSettings()
    embedder = minilm(passage_backend="torch")  # the judge's own fp32 features
    y = np.array([r["label"] == "SUPPORT" for r in rows])
    groups = cv_groups(rows, settings.cv_groups)
    split = list(
        StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=settings.seed).split(
            np.zeros(len(rows)), y, groups
        )
    )
    train_idx, test_idx = split[fold]
    sents = sentence_pairs(rows, embedder, k)

    def flat(idx):
        pairs, labels, owner = [], [], []
        for i in idx:
            for s, lab in sents[i]:
                pairs.append((rows[i]["claim"], s))
                labels.append(lab)
                owner.append(i)
        return pairs, labels, np.array(owner)

    tr_pairs, tr_labels, _ = flat(train_idx)
    te_pairs, _, te_owner = flat(test_idx)
    model, tok, log = fine_tune(
        tr_pairs, tr_labels, epochs=epochs, freeze_layers=freeze_layers, show_progress=show_progress
    )
    probs = predict(model, tok, te_pairs)
    ce = {int(i): 0.0 for i in test_idx}
    for p, o in zip(probs[:, 1], te_owner, strict=True):
        ce[int(o)] = max(ce[int(o)], float(p))
    p_ce = np.array([ce[int(i)] for i in test_idx])

    fitted = fit_judge([rows[i] for i in train_idx], embedder, settings)
    x, _ = featurize(
        [(rows[i]["claim"], rows[i]["abstract"]) for i in test_idx],
        embedder,
        fitted.idf,
        settings.max_sentences,
        version=settings.version,
    )
    p_feat = fitted.support_model.predict_proba(x)[:, 1]
    y_te = y[test_idx]
    return {
        "what": "SUPPORT-vs-not on one held-out grouped fold of SciFact judge_train (dev unread)",
        "train_file": paths.display(paths.resolve(train_path)),
        "fold": f"{fold + 1} of {folds} (StratifiedGroupKFold, claim+document groups)",
        "pairs": {"train": len(train_idx), "held_out": len(test_idx)},
        "sentence_pairs": {
            "k_per_pair": k,
            "train": len(tr_pairs),
            "train_labels": dict(
                zip(LABELS, np.bincount(tr_labels, minlength=len(LABELS)).tolist(), strict=True)
            ),
        },
        "cross_encoder": {
            "base": "all-MiniLM-L6-v2 + fresh 3-way head",
            "epochs": epochs,
            "frozen_layers": freeze_layers,
            **log,
            "held_out": _scores(y_te, p_ce),
        },
        "offline_v2_features": {"held_out": _scores(y_te, p_feat)},
        "mean_of_z_scores": {"held_out": _scores(y_te, _z(p_ce) + _z(p_feat))},
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--freeze-layers", type=int, default=0)
    ap.add_argument("--fold", type=int, default=0)
    ap.add_argument("--out", default="outputs/bench/judge_crossencoder.json")
    a = ap.parse_args(argv)
    res = run(epochs=a.epochs, freeze_layers=a.freeze_layers, fold=a.fold)
    write_json(res, a.out)
    for name in ("cross_encoder", "offline_v2_features", "mean_of_z_scores"):
        print(f"{name:22s} {res[name]['held_out']}")


if __name__ == "__main__":
    main()
