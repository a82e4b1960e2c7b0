"""The entailment judge's training data: SciFact train's human pairs plus rule-made pairs at scale.

Two sources, both outside SciFact dev and outside the corpus papers (the lab's own hand-labelled
claims come from those, so they stay unseen):

* **SciFact train** (``judge_train.jsonl``, human labels): each claim against its rationale
  sentences (SUPPORT → ``supported``, CONTRADICT → ``contradicted``), against its abstract's
  other sentences closest to it by TF-IDF (``not_said``: on topic, not the evidence), and every
  SUPPORT claim altered by a contradiction rule of :mod:`rag.judge.synth` against its rationale
  (``contradicted``, as SciFact's own CONTRADICT claims were written).
* **SciFact corpus abstracts** not cited by any dev claim (unlabelled text): every sampled
  sentence through :func:`rag.judge.synth.variants` (one rule per label, chosen at random among
  those that apply), plus the nearest *other* sentence of the same abstract as a hard
  ``not_said`` premise. Premises are the sentence alone or with a neighbour, so the model also
  learns to find the claim inside a window.

:func:`build` is deterministic for a seed; :func:`data_key` is the content key of everything it
reads, so the trainer can cache by it. Held-out train rows (a grouped CV fold) are passed as
``exclude_docs``/``exclude_claims`` and contribute nothing, not even their abstracts' sentences.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from rag import paths
from rag.errors import ConfigError
from rag.jsonl import iter_jsonl
from rag.judge.synth import NLI_LABELS, RULES, SYNTH_VERSION, Pair, report_frame, variants
from rag.text.sentences import split_sentences

logger = logging.getLogger(__name__)

SCIFACT = "../shared/datasets/scifact"
TRAIN_FILE = f"{SCIFACT}/judge_train.jsonl"
CORPUS_FILE = f"{SCIFACT}/corpus.jsonl"
DEV_CLAIMS_FILE = f"{SCIFACT}/claims_dev.jsonl"

#: The contradiction rules applied to SciFact's SUPPORT claims.
CLAIM_FLIPS = ("direction", "negation", "number", "quantifier")


def _norm(text: str) -> str:
    return " ".join(text.split())


#: A structured abstract's section label opening a sentence (``RESULTS Of the 32,441 …``).
_LABEL_RE = re.compile(r"^(?:[A-Z]{3,}(?:[ /&]+[A-Z]{2,})*:?\s+)(?=[A-Z0-9(])")

#: How often each rule is drawn when several apply to a sentence: the common rules (negation,
#: names, the answer frame) would otherwise crowd out the rare ones.
KIND_WEIGHT = {
    "negation": 1,
    "entity": 1,
    "report_frame": 1,
    "direction": 3,
    "number": 3,
    "quantifier": 4,
    "comparison": 4,
    "sub_span": 3,
    "parenthetical": 2,
    "number_restated": 4,
    "hedge_to_certain": 4,
    "extra_detail": 1,
    "neighbour": 1,
}
#: Share of claims of every label put in an answerer's frame (so the frame is no label cue).
FRAME_RATE = 0.2


def _sentences(text: str) -> list[str]:
    out = (_LABEL_RE.sub("", _norm(x)) for x in split_sentences(text))
    return [s for s in out if 5 <= len(s.split()) <= 60]


def _closest(query: str, candidates: Sequence[str], k: int) -> list[str]:
    """The ``k`` candidates sharing the most content words with ``query`` (ties by order)."""
    from rag.judge.features import content_stems

    q = set(content_stems(query))
    scored = sorted(
        range(len(candidates)),
        key=lambda i: (-len(q & set(content_stems(candidates[i]))), i),
    )
    return [candidates[i] for i in scored[:k]]


def scifact_pairs(rows: Sequence[dict], rng: random.Random, *, negatives: int = 2) -> list[Pair]:
    """Pairs from SciFact's human-labelled train rows (see the module docstring)."""
    out: list[Pair] = []
    for r in rows:
        sents = _sentences(r["abstract"])
        rationale = [_norm(s) for group in r.get("rationales") or [] for s in group]
        others = [s for s in sents if s not in rationale]
        if r["label"] in ("SUPPORT", "CONTRADICT") and rationale:
            label = "supported" if r["label"] == "SUPPORT" else "contradicted"
            out.append(Pair(" ".join(rationale), r["claim"], label, "scifact_gold"))
            if label == "supported":
                for kind in CLAIM_FLIPS:
                    flipped = RULES[kind][1](r["claim"], rng)
                    if flipped and flipped != r["claim"]:
                        out.append(
                            Pair(
                                " ".join(rationale), flipped, "contradicted", f"scifact_flip_{kind}"
                            )
                        )
        for s in _closest(r["claim"], others, negatives):
            out.append(Pair(s, r["claim"], "not_said", "scifact_other_sentence"))
    return out


def abstract_pairs(abstracts: Iterable[str], rng: random.Random, *, per_label: int) -> list[Pair]:
    """Rule-made pairs from unlabelled abstracts, ``per_label`` of each label at most.

    Each sentence yields at most one pair per label (one applicable rule drawn at random), plus
    its nearest other sentence as a hard ``not_said`` premise.
    """
    pools: dict[str, list[Pair]] = {label: [] for label in NLI_LABELS}
    for text in abstracts:
        sents = _sentences(text)
        for i, s in enumerate(sents):
            by_label: dict[str, list[Pair]] = {}
            for p in variants(s, sents, rng):
                by_label.setdefault(p.label, []).append(p)
            others = sents[:i] + sents[i + 1 :]
            if others:
                near = _closest(s, others, 1)[0]
                by_label.setdefault("not_said", []).append(Pair(near, s, "not_said", "neighbour"))
            for label, ps in by_label.items():
                p = rng.choices(ps, weights=[KIND_WEIGHT.get(x.kind, 1) for x in ps])[0]
                hypothesis = p.hypothesis
                if p.kind != "report_frame" and rng.random() < FRAME_RATE:
                    hypothesis = report_frame(hypothesis, rng) or hypothesis
                premise = p.premise
                if rng.random() < 0.5 and len(sents) > 1 and p.kind != "neighbour":
                    j = i + rng.choice((-1, 1))
                    if 0 <= j < len(sents):
                        premise = f"{sents[min(i, j)]} {sents[max(i, j)]}"
                pools[label].append(Pair(premise, hypothesis, p.label, p.kind))
    out: list[Pair] = []
    for label in NLI_LABELS:
        pool = pools[label]
        rng.shuffle(pool)
        out.extend(pool[:per_label])
    return out


def _read(path: str) -> list[dict]:
    return [r for _, r in iter_jsonl(paths.resolve(path), ConfigError)]


def dev_doc_ids(dev_claims_file: str = DEV_CLAIMS_FILE) -> set[str]:
    """Abstracts cited by any SciFact dev claim: never a source of training text."""
    return {str(d) for r in _read(dev_claims_file) for d in r.get("cited_doc_ids", [])}


def build(
    *,
    train_rows: Sequence[dict],
    exclude_docs: set[str] = frozenset(),
    per_label: int = 8000,
    scifact_repeat: int = 1,
    seed: int = 0,
    corpus_file: str = CORPUS_FILE,
    dev_claims_file: str = DEV_CLAIMS_FILE,
) -> list[Pair]:
    """The training pairs: SciFact train's (``train_rows``) plus rule-made ones, shuffled.

    Args:
        train_rows: SciFact judge rows to learn from (a CV fold's training part, or all).
        exclude_docs: abstract ids whose text must not be used (a held-out fold's).
        per_label: rule-made pairs per label from the corpus abstracts.
        scifact_repeat: copies of SciFact train's pairs (its claims are the human-written kind;
            repeating them weighs them against the rule-made pairs).
        seed: the one source of randomness.
    """
    rng = random.Random(seed)
    banned = dev_doc_ids(dev_claims_file) | set(exclude_docs)
    train_docs = {str(r["doc_id"]) for r in train_rows}
    abstracts = [r["text"] for r in _read(corpus_file) if str(r["_id"]) not in banned]
    pairs = scifact_pairs(train_rows, rng) * scifact_repeat
    pairs += abstract_pairs(abstracts, rng, per_label=per_label)
    rng.shuffle(pairs)
    logger.info(
        "judge training data: %d pairs from %d train rows (%d abstracts), %d other abstracts; %s",
        len(pairs),
        len(train_rows),
        len(train_docs),
        len(abstracts),
        dict(Counter(p.label for p in pairs)),
    )
    return pairs


def data_key(files: Sequence[str], **params: object) -> str:
    """Content key of the data :func:`build` makes from ``files`` with ``params``."""
    h = hashlib.sha256(SYNTH_VERSION.encode())
    for f in files:
        h.update(Path(paths.resolve(f)).read_bytes())
    h.update(json.dumps(params, sort_keys=True, default=sorted).encode())
    return h.hexdigest()[:20]


def counts(pairs: Sequence[Pair]) -> dict[str, dict[str, int]]:
    """Pairs per label and per kind (what the training log records)."""
    out: dict[str, dict[str, int]] = {}
    for p in pairs:
        out.setdefault(p.label, {}).setdefault(p.kind, 0)
        out[p.label][p.kind] += 1
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


__all__ = [
    "CLAIM_FLIPS",
    "TRAIN_FILE",
    "abstract_pairs",
    "build",
    "counts",
    "data_key",
    "dev_doc_ids",
    "scifact_pairs",
]
