"""``rag judge train``: build the data, train the entailment judge, choose its thresholds, pin it.

1. SciFact ``judge_train`` is split by the offline judge's grouped folds (claim + abstract
   components); fold 0 is held out.
2. :func:`rag.judge.nli_data.build` makes the training pairs from the other folds plus rule-made
   pairs from SciFact abstracts (the held-out fold's abstracts and every dev abstract excluded).
3. :func:`rag.judge.nli_train.train` fine-tunes the backbone (cached by data + recipe; resumes).
4. The trained parameters are written in fp16 as ``data/judge/<name>.safetensors``; the held-out
   fold, scored through :class:`rag.judge.nli.NliJudge` on exactly those weights, picks the
   support and contradiction thresholds (balanced accuracy), written with the recipe, the data's
   kinds and counts and the weights' sha256 to ``data/judge/<name>.json``.

SciFact dev is not read here. ``--check`` rebuilds into the cache and compares the new weights'
digest and held-out verdicts with the pinned ones instead of overwriting them.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from rag import paths
from rag.atomic import atomic_path, write_atomic
from rag.errors import ConfigError
from rag.filehash import sha256_file
from rag.jsonl import iter_jsonl
from rag.judge import nli_data
from rag.judge.nli import NLI_FORMAT, NLI_JUDGES, NliJudge, pin_dir
from rag.judge.nli_train import NliRecipe, recipe_key, train, trained_state, workdir_for

logger = logging.getLogger(__name__)

#: Rule-made pairs per label in the pinned recipe.
PER_LABEL = 4000
#: Copies of SciFact train's human pairs in the pinned recipe (chosen on the held-out fold).
SCIFACT_REPEAT = 4


def train_rows(path: str = nli_data.TRAIN_FILE) -> list[dict]:
    """SciFact judge rows with their rationale groups."""
    rows = [r for _, r in iter_jsonl(paths.resolve(path), ConfigError)]
    if not rows:
        raise ConfigError(f"{path}: no judge pairs")
    return rows


def held_out_split(rows: list[dict]) -> tuple[list[int], list[int]]:
    """(training rows, held-out rows): fold 0 of the offline judge's grouped CV."""
    from sklearn.model_selection import StratifiedGroupKFold

    from rag.judge.fit import cv_groups
    from rag.judge.settings import OfflineJudgeSettings

    s = OfflineJudgeSettings()
    y = np.array([r["label"] == "SUPPORT" for r in rows])
    split = StratifiedGroupKFold(n_splits=s.cv_folds, shuffle=True, random_state=s.seed)
    tr, te = next(iter(split.split(np.zeros(len(rows)), y, cv_groups(rows, s.cv_groups))))
    return sorted(tr.tolist()), sorted(te.tolist())


def _ba(y: np.ndarray, pred: np.ndarray) -> float:
    return float(np.mean([np.mean(pred[y == c] == c) for c in (True, False) if np.any(y == c)]))


def choose_thresholds(scores: np.ndarray, labels: list[str]) -> dict[str, float]:
    """Support threshold: best balanced accuracy of SUPPORT vs rest; contradiction threshold:
    best balanced accuracy of CONTRADICT vs NOT_ENOUGH_INFO among the pairs not passed."""
    from rag.judge.fit import best_threshold

    y = np.array([lab == "SUPPORT" for lab in labels])
    t, ba = best_threshold(y, scores[:, 0])
    rest = ~(scores[:, 0] >= t) & ~y
    yc = np.array([lab == "CONTRADICT" for lab in labels])[rest]
    tc, bac = best_threshold(yc, scores[rest, 1]) if yc.any() and (~yc).any() else (0.5, 0.0)
    return {
        "threshold": t,
        "held_out_ba": round(ba, 4),
        "contra_threshold": tc,
        "held_out_contra_ba": round(bac, 4),
    }


def write_weights(model: Any, path: Path) -> str:
    """The trained parameters in fp16 as safetensors (atomic); returns their sha256."""
    import torch
    from safetensors.torch import save_file

    state = {k: v.detach().to(torch.float16).contiguous() for k, v in trained_state(model).items()}
    with atomic_path(path) as tmp:
        save_file(state, str(tmp), metadata={"format": NLI_FORMAT})
    return sha256_file(path)


def build_and_pin(
    name: str = NLI_JUDGES[0],
    *,
    recipe: NliRecipe | None = None,
    per_label: int = PER_LABEL,
    scifact_repeat: int = SCIFACT_REPEAT,
    out_dir: Path | None = None,
    train_path: str = nli_data.TRAIN_FILE,
    show_progress: bool = True,
) -> dict:
    """Build, train (or resume), threshold and pin the judge ``name`` under ``out_dir``."""
    from safetensors.torch import load_file

    recipe = recipe or NliRecipe()
    out_dir = out_dir or pin_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows = train_rows(train_path)
    tr, te = held_out_split(rows)
    held = [rows[i] for i in te]
    files = [train_path, nli_data.CORPUS_FILE, nli_data.DEV_CLAIMS_FILE]
    extra = {"scifact_repeat": scifact_repeat} if scifact_repeat != 1 else {}
    dkey = nli_data.data_key(files, per_label=per_label, seed=recipe.seed, held_out=te, **extra)
    pairs = nli_data.build(
        train_rows=[rows[i] for i in tr],
        exclude_docs={str(r["doc_id"]) for r in held},
        per_label=per_label,
        scifact_repeat=scifact_repeat,
        seed=recipe.seed,
    )
    work = workdir_for(recipe_key(recipe, dkey))
    final = work / "model.safetensors"
    if final.exists():
        from rag.judge.nli_train import load_backbone

        model, _ = load_backbone(recipe.backbone, recipe.seed)
        model.load_state_dict(
            {k: v.float() for k, v in load_file(str(final)).items()}, strict=False
        )
        log = json.loads((work / "log.json").read_text())
    else:
        model, _, log = train(pairs, recipe, work, show_progress=show_progress)
        write_weights(model, final)
        (work / "log.json").write_text(json.dumps(log))
    weights = out_dir / f"{name}.safetensors"
    digest = write_weights(model, weights)
    meta = {
        "format": NLI_FORMAT,
        "name": name,
        "weights": weights.name,
        "sha256": digest,
        "recipe": recipe.model_dump(),
        "data": {
            "key": dkey,
            "train_file": paths.display(paths.resolve(train_path)),
            "held_out": {
                "fold": "1 of 5 (StratifiedGroupKFold, claim+document groups)",
                "pairs": len(te),
                "train_pairs": len(tr),
            },
            "rule_made_per_label": per_label,
            "scifact_repeat": scifact_repeat,
            "pairs": len(pairs),
            "kinds": nli_data.counts(pairs),
        },
        "training": log,
        "threshold": 0.5,
        "contra_threshold": 0.5,
    }
    meta_path = out_dir / f"{name}.json"
    meta_path.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    judge = NliJudge(name, pin_root=out_dir)
    scores = judge.scores([(r["claim"], r["abstract"]) for r in held], desc=show_progress)
    meta.update(choose_thresholds(scores, [r["label"] for r in held]))
    meta["seconds"] = round(time.perf_counter() - t0, 1)
    write_atomic(meta_path, json.dumps(meta, indent=1) + "\n")
    return meta


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="rag judge train", description=__doc__.split("\n")[0])
    ap.add_argument("--name", default=NLI_JUDGES[0])
    ap.add_argument("--per-label", type=int, default=PER_LABEL)
    ap.add_argument("--epochs", type=int, default=NliRecipe().epochs)
    ap.add_argument(
        "--scifact-repeat",
        type=int,
        default=SCIFACT_REPEAT,
        help="copies of SciFact train's human pairs in the data",
    )
    ap.add_argument("--out-dir", default="", help="where to pin (default data/judge/)")
    ap.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads (0: torch's default); on a busy machine 1 is fastest",
    )
    ap.add_argument(
        "--check",
        action="store_true",
        help="rebuild into the cache and compare with the pinned judge",
    )
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if a.threads:
        import torch

        torch.set_num_threads(a.threads)
    recipe = NliRecipe(epochs=a.epochs)
    if a.check:
        check_dir = paths.cache_dir("judge_nli", "check")
        pinned = json.loads((pin_dir() / f"{a.name}.json").read_text())
        meta = build_and_pin(
            a.name,
            recipe=recipe,
            per_label=a.per_label,
            scifact_repeat=a.scifact_repeat,
            out_dir=check_dir,
        )
        same = meta["sha256"] == pinned["sha256"]
        print(
            f"pinned  {pinned['sha256']}\nrebuilt {meta['sha256']}\n"
            f"{'identical' if same else 'DIFFERENT'}; thresholds pinned "
            f"{pinned['threshold']}/{pinned['contra_threshold']}, rebuilt "
            f"{meta['threshold']}/{meta['contra_threshold']}"
        )
        raise SystemExit(0 if same else 1)
    meta = build_and_pin(
        a.name,
        recipe=recipe,
        per_label=a.per_label,
        scifact_repeat=a.scifact_repeat,
        out_dir=Path(a.out_dir) if a.out_dir else None,
    )
    print(
        json.dumps(
            {
                k: meta[k]
                for k in (
                    "name",
                    "sha256",
                    "threshold",
                    "held_out_ba",
                    "contra_threshold",
                    "held_out_contra_ba",
                    "seconds",
                )
            }
        )
    )


if __name__ == "__main__":
    main()
