"""Validate a faithfulness judge against human labels (SciFact claim / abstract pairs).

SciFact (Wadden et al., 2020) labels each (claim, cited abstract) pair SUPPORT, CONTRADICT or
NOT_ENOUGH_INFO. A judge is scored on the binary question that faithfulness asks — supported or
not — by **balanced accuracy** = (recall on SUPPORT + recall on not-SUPPORT) / 2, which a judge
cannot game by always answering the majority class. Its 95 % CI resamples the pairs (2,000
bootstrap resamples, fixed seed) through :func:`rag.evaluation.stats.bootstrap_ci`. The 3 x 3
confusion matrix (human label x judge label) shows *how* it errs, e.g. whether contradictions pass
as supported. A judge that fails on a pair (an LLM judge's unreadable output) is counted in
``n_failures`` and its own confusion column, and left out of the accuracy — never scored as wrong
or right silently.

Per-class recall is the binary decision's recall within each human label: SUPPORT pairs judged
``supported``, CONTRADICT and NOT_ENOUGH_INFO pairs judged anything else (so CONTRADICT recall is
the share of contradicted claims the judge does *not* pass). :func:`validate_judges` scores
several judges on the same pairs into one tidy table ("old judge vs new judge"), each paired with a
baseline judge (:func:`paired_balanced_accuracy`: the difference's bootstrap CI and a randomisation
test), and :func:`judge_card` keeps, per judge name, the numbers every faithfulness figure should
sit beside. :func:`lab_claims` reads the lab's hand-labelled claims about its corpus papers in the
same format.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from rag import paths
from rag.atomic import write_atomic
from rag.errors import ConfigError, JudgeError
from rag.evaluation.stats import bootstrap_ci
from rag.judge import VERDICT_LABELS, ClaimJudge, Verdict

logger = logging.getLogger(__name__)

HUMAN_LABELS = ("SUPPORT", "CONTRADICT", "NOT_ENOUGH_INFO")
FAILURE = "judge_failure"
DEV_PATH = "../shared/datasets/scifact/judge_dev.jsonl"
CLAIMS_PATH = "data/judge/corpus_claims.jsonl"
#: The lab's claim labels in SciFact's vocabulary.
CLAIM_LABELS = {"supported": "SUPPORT", "contradicted": "CONTRADICT", "not_said": "NOT_ENOUGH_INFO"}


def lab_claims(src: str | Path = CLAIMS_PATH) -> tuple[Path, list[str]]:
    """The lab's hand-labelled claims about its corpus papers as a SciFact-format judge file (in
    the cache; ligatures expanded, as the chunk text a judge sees in use is), and each pair's kind.

    ``data/judge/corpus_claims.jsonl`` rows are ``{id, claim, passage, label, kind, ...}`` with
    labels ``supported``/``contradicted``/``not_said`` (docs/judge-corpus-set.md: how they were
    written and read twice). They are reported only, never used to train or tune a judge.
    """
    from rag.text.normalize import expand_ligatures

    p = paths.resolve(src)
    if not p.exists():
        raise ConfigError(f"labelled claims file {paths.display(p)} not found")
    rows, kinds = [], []
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            label = CLAIM_LABELS[r["label"]]
            rows.append(
                {
                    "claim_id": r["id"],
                    "claim": r["claim"],
                    "abstract": expand_ligatures(r["passage"]),
                    "label": label,
                }
            )
            kinds.append(r["kind"])
        except (json.JSONDecodeError, KeyError) as e:
            raise ConfigError(f"{paths.display(p)} line {n} is not a labelled claim: {e!r}") from e
    out = paths.cache_dir("judge_corpus_claims") / f"{p.stem}.scifact.jsonl"
    write_atomic(out, "".join(json.dumps(r) + "\n" for r in rows))
    return out, kinds


def balanced_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Mean per-class recall of a binary decision (classes absent from ``y_true`` are skipped)."""
    recalls = [np.mean(y_pred[y_true == c] == c) for c in (True, False) if np.any(y_true == c)]
    if not recalls:
        raise ConfigError("balanced accuracy of zero pairs is undefined; pass labelled pairs")
    return float(np.mean(recalls))


def _verdicts(judge: ClaimJudge, pairs: Sequence[tuple[str, str]]) -> list[Verdict | str]:
    """Verdicts, or the failure reason for pairs the judge could not judge."""
    predict = getattr(judge, "predict", None)
    if callable(predict):
        return list(predict(pairs, desc=True))
    out: list[Verdict | str] = []
    for claim, ctx in tqdm(pairs, desc=f"judging ({judge.name})", unit="pair", disable=None):
        try:
            out.append(judge.verdict(claim, ctx))
        except JudgeError as e:
            out.append(str(e))
    return out


def validate_judge(
    judge: ClaimJudge,
    path: str | Path | None = None,
    *,
    limit: int | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[dict, pd.DataFrame]:
    """Score ``judge`` on SciFact-format human labels (default: ``judge_dev.jsonl``).

    Args:
        judge: any claim judge (a batched ``predict(pairs)`` is used when it has one).
        path: the labelled file, a path parameter as :func:`rag.paths.resolve` reads it
            (``../shared/…`` is the shared data folder, ``$RAG_SHARED_DIR``).
        limit: judge only the first ``limit`` pairs (smoke runs).
        n_resamples: bootstrap resamples for the CI.
        seed: bootstrap seed.

    Returns:
        ``(metrics, table)``: ``metrics`` is ready for ``metrics.json`` (``balanced_accuracy``,
        ``ci_low``, ``ci_high``, ``n``, ``n_failures``, ``confusion`` as
        ``{human: {judge_label: count}}``, per-class recalls, ``seconds``); ``table`` has one row
        per pair with the human label, the judge's label, score and reason.
    """
    from rag.judge.offline import read_pairs

    p = paths.resolve(path if path is not None else DEV_PATH)
    rows = read_pairs(p)[:limit] if limit is not None else read_pairs(p)
    bad = sorted({r["label"] for r in rows} - set(HUMAN_LABELS))
    if bad:
        raise ConfigError(f"{paths.display(p)} has labels {bad}; expected {list(HUMAN_LABELS)}")
    t0 = time.perf_counter()
    verdicts = _verdicts(judge, [(r["claim"], r["abstract"]) for r in rows])
    seconds = time.perf_counter() - t0
    table = pd.DataFrame(
        {
            "claim_id": [str(r["claim_id"]) for r in rows],
            "claim": [r["claim"] for r in rows],
            "human": [r["label"] for r in rows],
            "judge": [v.label if isinstance(v, Verdict) else FAILURE for v in verdicts],
            "score": [v.score if isinstance(v, Verdict) else None for v in verdicts],
            "reason": [v.reason if isinstance(v, Verdict) else v for v in verdicts],
        }
    )
    ok = table[table["judge"] != FAILURE]
    y = (ok["human"] == "SUPPORT").to_numpy()
    yhat = (ok["judge"] == "supported").to_numpy()
    if len(ok) == 0:
        raise JudgeError(f"{judge.name} failed on all {len(rows)} pairs; see the table's reasons")
    ci = bootstrap_ci(
        np.arange(len(ok), dtype=float),
        statistic=lambda idx: balanced_accuracy(y[idx.astype(int)], yhat[idx.astype(int)]),
        n_resamples=n_resamples,
        seed=seed,
    )
    cols = [*VERDICT_LABELS, FAILURE]
    confusion = pd.crosstab(
        pd.Categorical(table["human"], HUMAN_LABELS),
        pd.Categorical(table["judge"], cols),
        dropna=False,
    ).reindex(index=list(HUMAN_LABELS), columns=cols, fill_value=0)
    confusion.index.name, confusion.columns.name = "human", "judge"
    metrics = {
        "judge": judge.name,
        "balanced_accuracy": balanced_accuracy(y, yhat),
        "ci_low": ci.low,
        "ci_high": ci.high,
        "ci_method": ci.method_used,
        "n": int(len(ok)),
        "n_failures": int(len(table) - len(ok)),
        "support_recall": float(np.mean(yhat[y])) if y.any() else None,
        "not_support_recall": float(np.mean(~yhat[~y])) if (~y).any() else None,
        "class_recall": class_recall(ok["human"].to_numpy(), yhat),
        "confusion": {h: {c: int(confusion.loc[h, c]) for c in cols} for h in HUMAN_LABELS},
        "data": paths.display(p),
        "seconds": round(seconds, 1),
    }
    logger.info("%s on %s: balanced accuracy %s", judge.name, metrics["data"], ci)
    return metrics, table


def class_recall(human: np.ndarray, supported: np.ndarray) -> dict[str, dict]:
    """``{label: {"k", "n", "recall"}}``: SUPPORT pairs judged supported, other labels judged not
    supported (``recall`` is None for a label with no pairs)."""
    out = {}
    for h in HUMAN_LABELS:
        mask = human == h
        right = supported[mask] if h == "SUPPORT" else ~supported[mask]
        n, k = int(mask.sum()), int(right.sum())
        out[h] = {"k": k, "n": n, "recall": k / n if n else None}
    return out


def paired_balanced_accuracy(
    human_support: np.ndarray,
    a_support: np.ndarray,
    b_support: np.ndarray,
    *,
    n_resamples: int = 2000,
    n_permutations: int = 10_000,
    seed: int = 0,
) -> dict[str, float]:
    """Balanced accuracy of A minus B on the same pairs: CI and two-sided permutation p.

    Args:
        human_support: True where the human label is SUPPORT.
        a_support, b_support: True where judge A / B said supported, aligned with the labels.
    """
    from scipy import stats as sps

    y = np.asarray(human_support, dtype=bool)
    a = np.asarray(a_support, dtype=bool)
    b = np.asarray(b_support, dtype=bool)
    diff = balanced_accuracy(y, a) - balanced_accuracy(y, b)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_resamples):
        idx = rng.integers(0, len(y), len(y))
        if y[idx].all() or not y[idx].any():
            continue
        boots.append(balanced_accuracy(y[idx], a[idx]) - balanced_accuracy(y[idx], b[idx]))
    low, high = np.percentile(boots, [2.5, 97.5])

    def stat(x: np.ndarray, z: np.ndarray, axis: int = -1) -> np.ndarray:
        x, z = np.atleast_2d(x), np.atleast_2d(z)
        out = [balanced_accuracy(y, xi.astype(bool)) - balanced_accuracy(y, zi.astype(bool))
               for xi, zi in zip(x, z, strict=True)]  # fmt: skip
        return np.asarray(out)

    res = sps.permutation_test(
        (a.astype(float), b.astype(float)), stat, permutation_type="samples",
        vectorized=True, n_resamples=n_permutations, alternative="two-sided",
        rng=np.random.default_rng(seed),
    )  # fmt: skip
    return {"diff": float(diff), "ci_low": float(low), "ci_high": float(high),
            "p": float(min(1.0, res.pvalue))}  # fmt: skip


def validate_judges(
    judges: Sequence[ClaimJudge] | dict[str, ClaimJudge],
    path: str | Path | None = None,
    *,
    baseline: str | None = None,
    groups: Sequence[str] | None = None,
    limit: int | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[pd.DataFrame, dict[str, dict]]:
    """Validate several judges on the same labelled pairs.

    Args:
        judges: judges, or ``{display name: judge}`` (default names: ``judge.version`` when the
            judge has one, else ``judge.name``).
        path, limit, n_resamples, seed: as in :func:`validate_judge`.
        baseline: a judge name: every other judge gets the paired difference of balanced
            accuracy to it (:func:`paired_balanced_accuracy`, same pairs; a pair a judge fails
            on counts as not supported), in its metrics as ``paired`` and in the table.
        groups: one group name per pair (e.g. the kind of claim): each judge's metrics gain
            ``right_by_group`` (``{group: "right/n"}``, right = the supported-or-not decision
            agrees with the human label).

    Returns:
        ``(table, metrics)``: one table row per judge with balanced accuracy, its CI, per-class
        recall (``k/n`` and the rate), n and the paired difference; ``metrics`` maps each name to
        its :func:`validate_judge` metrics.
    """
    named = (
        dict(judges)
        if isinstance(judges, dict)
        else {getattr(j, "version", None) or j.name: j for j in judges}
    )
    if not named:
        raise ConfigError("validate_judges needs at least one judge")
    if baseline is not None and baseline not in named:
        raise ConfigError(f"baseline {baseline!r} is not one of the judges {sorted(named)}")
    runs = {
        name: validate_judge(j, path, limit=limit, n_resamples=n_resamples, seed=seed)
        for name, j in named.items()
    }
    metrics = {name: m for name, (m, _) in runs.items()}
    said = {name: (t["judge"] == "supported").to_numpy() for name, (_, t) in runs.items()}
    human = (next(iter(runs.values()))[1]["human"] == "SUPPORT").to_numpy()
    if groups is not None:
        groups = list(groups)[: len(human)]
        if len(groups) != len(human):
            raise ConfigError(f"{len(groups)} groups for {len(human)} pairs; give one per pair")
        for name in named:
            right = said[name] == human
            metrics[name]["right_by_group"] = {
                g: f"{int(right[[x == g for x in groups]].sum())}/{groups.count(g)}"
                for g in sorted(set(groups))
            }
    if baseline is not None:
        for name in named:
            if name != baseline:
                d = paired_balanced_accuracy(human, said[name], said[baseline], seed=seed)
                metrics[name]["paired"] = {"baseline": baseline, **d}
    return validation_table(metrics), metrics


def validation_table(metrics: dict[str, dict]) -> pd.DataFrame:
    """The tidy comparison table of :func:`validate_judges` from ``{name: metrics}``."""
    rows = []
    for name, m in metrics.items():
        row = {
            "judge": name,
            "balanced accuracy": round(m["balanced_accuracy"], 3),
            "CI": f"{m['ci_low']:.3f}-{m['ci_high']:.3f}",
            "n": m["n"],
            "failures": m["n_failures"],
        }
        for h, r in m["class_recall"].items():
            row[f"{h} recall"] = None if r["recall"] is None else round(r["recall"], 3)
            row[f"{h} k/n"] = f"{r['k']}/{r['n']}"
        if any("paired" in v for v in metrics.values()):
            d = m.get("paired")
            row["paired diff"] = "" if d is None else f"{d['diff']:+.3f}"
            row["paired CI"] = "" if d is None else f"{d['ci_low']:+.3f} to {d['ci_high']:+.3f}"
            row["p"] = "" if d is None else f"{d['p']:.4f}"
        rows.append(row)
    return pd.DataFrame(rows).set_index("judge")


def validate_repeats(
    make_judge: Callable[[int], ClaimJudge],
    n_repeats: int,
    path: str | Path | None = None,
    *,
    limit: int | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[pd.DataFrame, dict]:
    """Run-to-run variance of a judge: validate repeats ``0..n_repeats-1`` on the same pairs.

    ``make_judge(r)`` builds repeat ``r`` (e.g. ``lambda r: LLMJudge(chat, repeat=r)``, whose
    calls are cached per repeat). Returns one row per repeat and a summary with the spread of
    balanced accuracy across repeats (min, max, standard deviation) beside repeat 0's bootstrap
    CI, which only covers the resampling of pairs.
    """
    if n_repeats < 1:
        raise ConfigError(f"n_repeats must be >= 1, got {n_repeats}")
    runs = [
        validate_judge(make_judge(r), path, limit=limit, n_resamples=n_resamples, seed=seed)[0]
        for r in range(n_repeats)
    ]
    table = pd.DataFrame(
        {
            "repeat": range(n_repeats),
            "balanced accuracy": [m["balanced_accuracy"] for m in runs],
            "n": [m["n"] for m in runs],
            "failures": [m["n_failures"] for m in runs],
            "CONTRADICT recall": [m["class_recall"]["CONTRADICT"]["recall"] for m in runs],
        }
    ).set_index("repeat")
    bas = table["balanced accuracy"].to_numpy(dtype=float)
    summary = {
        "judge": runs[0]["judge"],
        "n_repeats": n_repeats,
        "ba_mean": float(bas.mean()),
        "ba_min": float(bas.min()),
        "ba_max": float(bas.max()),
        "ba_sd": float(bas.std(ddof=1)) if n_repeats > 1 else 0.0,
        "bootstrap_ci_repeat0": (runs[0]["ci_low"], runs[0]["ci_high"]),
    }
    return table, summary


def judge_card(metrics: dict[str, dict]) -> dict[str, dict]:
    """``{judge name: {balanced_accuracy, ci_low, ci_high, n, contradict_recall, contradict_k,
    contradict_n, model}}`` — what a faithfulness number is reported beside."""
    out = {}
    for name, m in metrics.items():
        c = m["class_recall"]["CONTRADICT"]
        out[name] = {
            "balanced_accuracy": m["balanced_accuracy"],
            "ci_low": m["ci_low"],
            "ci_high": m["ci_high"],
            "n": m["n"],
            "contradict_recall": c["recall"],
            "contradict_k": c["k"],
            "contradict_n": c["n"],
            "model": m["judge"],
        }
    return out


def format_report(metrics: dict) -> str:
    """A plain-text summary: balanced accuracy with its CI, per-class recalls and the confusion."""
    cols = [*VERDICT_LABELS, FAILURE]
    lines = [
        f"judge {metrics['judge']} on {metrics['data']} (n={metrics['n']}, "
        f"failures={metrics['n_failures']}, {metrics['seconds']} s)",
        f"balanced accuracy {metrics['balanced_accuracy']:.3f} "
        f"(95% CI {metrics['ci_low']:.3f}-{metrics['ci_high']:.3f}, {metrics['ci_method']})",
        f"recall on SUPPORT {metrics['support_recall']:.3f}, "
        f"on not-SUPPORT {metrics['not_support_recall']:.3f}",
        "human / judge".ljust(16) + "".join(f"{c:>14}" for c in cols),
    ]
    for h in HUMAN_LABELS:
        lines.append(f"{h:<16}" + "".join(f"{metrics['confusion'][h][c]:>14}" for c in cols))
    return "\n".join(lines)
