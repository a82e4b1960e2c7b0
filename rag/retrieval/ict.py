"""A cross-encoder reranker trained here, without labels: the Inverse Cloze Task.

No pretrained cross-encoder can be downloaded on the offline machines, so this trains one from the
packaged all-MiniLM-L6-v2 encoder on self-supervised pairs from the corpus itself (the Inverse
Cloze Task of Lee et al., "Latent Retrieval for Weakly Supervised Open Domain Question Answering"
(ORQA), 2019, also used to pre-train REALM):

* pseudo-query: one inner sentence of a chunk (not its first or last, which the window may have
  cut; 6-40 words, sentence-final punctuation, no table/figure caption, mostly letters);
* positive: that chunk with the sentence removed (kept in ``1 - remove_prob`` of the examples, so
  the model also learns that word overlap matters, as ORQA does);
* negatives: chunks of *other* papers that BM25 ranks high for the sentence (hard) plus one
  random chunk.

The model reads (pseudo-query, passage) jointly (BERT sequence classification, one logit, fresh
head on the MiniLM encoder) and is trained with a listwise softmax cross-entropy over each group
(positive first). It never sees a gold question or label; it does see the corpus text, as any
domain-adapted model would. Training is resumable (a checkpoint every ``checkpoint_every`` steps)
and the result is a sentence-transformers ``CrossEncoder`` folder with ``ict.json`` describing
how it was made. Command: ``rag train-ict`` (``make ict``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from tqdm.auto import tqdm

from rag.atomic import atomic_path
from rag.errors import ConfigError
from rag.paths import cache_dir
from rag.text.chunk import ChunkSettings
from rag.text.sentences import split_sentences
from rag.types import Chunk

log = logging.getLogger(__name__)

#: Sections whose chunks are not prose worth asking about.
_SKIP_SECTION = re.compile(r"reference|bibliograph|acknowledg|appendix", re.I)
#: Bump when the example recipe or the training loop changes what a model learns.
RECIPE_VERSION = 3  # 3: sentences from the shared splitter (rag.text.sentences)


class ICTSettings(BaseModel):
    """How the ICT examples are drawn and the cross-encoder is trained."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_examples: int = Field(3000, ge=1, description="Training groups (one pseudo-query each).")
    negatives: int = Field(
        3, ge=1, le=15, description="Negatives per group (hard ones + 1 random)."
    )
    hard_depth: int = Field(30, ge=1, description="BM25 depth that hard negatives are drawn from.")
    remove_prob: float = Field(
        0.9, ge=0.0, le=1.0, description="Share of positives without the sentence."
    )
    min_words: int = Field(6, ge=1, description="Shortest pseudo-query sentence, in words.")
    max_words: int = Field(40, ge=1, description="Longest pseudo-query sentence, in words.")
    max_length: int = Field(192, ge=16, le=512, description="Tokens per (query, passage) pair.")
    batch_groups: int = Field(4, ge=1, description="Groups per optimiser step.")
    lr: float = Field(5e-5, gt=0, description="AdamW peak learning rate (linear warm-up/decay).")
    warmup: float = Field(0.1, ge=0.0, lt=1.0, description="Share of steps spent warming up.")
    epochs: int = Field(1, ge=1, description="Passes over the examples.")
    seed: int = Field(0, description="Seed of example sampling, initialisation and shuffling.")
    checkpoint_every: int = Field(100, ge=1, description="Steps between resumable checkpoints.")


@dataclass(frozen=True, slots=True)
class ICTExample:
    """One training group: a pseudo-query, its positive passage and negatives (chunk ids kept)."""

    query: str
    positive: str
    negatives: tuple[str, ...]
    source_chunk: str
    negative_chunks: tuple[str, ...]


def _sentences(text: str) -> list[str]:
    return split_sentences(text, mode="answer")


_CAPTION = re.compile(r"^(table|figure|fig\.|algorithm|listing)\s*\d", re.I)


def _usable(sentence: str, s: ICTSettings) -> bool:
    """A prose sentence: 6-40 words, ends like a sentence, no caption, mostly letters."""
    words = sentence.split()
    if not s.min_words <= len(words) <= s.max_words:
        return False
    if not sentence.rstrip().endswith((".", "?", "!")) or _CAPTION.match(sentence.strip()):
        return False
    letters = sum(ch.isalpha() for ch in sentence)
    return letters >= 0.7 * len(sentence.replace(" ", ""))


def make_examples(
    chunks: Sequence[Chunk], settings: ICTSettings | None = None, *, bm25: Any = None
) -> list[ICTExample]:
    """Draw ICT groups from ``chunks`` (deterministic for a given seed and chunk list).

    Args:
        chunks: the corpus chunks (need at least two papers, for negatives).
        settings: recipe; defaults to :class:`ICTSettings`.
        bm25: a :class:`rag.index.bm25.BM25Index` over exactly these chunks (built when None).

    Raises:
        ConfigError: fewer than two papers, or no chunk with a usable sentence.
    """
    s = settings or ICTSettings()
    from rag.index.bm25 import BM25Index

    by_id = {c.chunk_id: c for c in chunks}
    if len({c.paper_id for c in chunks}) < 2:
        raise ConfigError("ICT needs chunks from at least two papers (negatives come from others)")
    if bm25 is None:
        bm25 = BM25Index([c.chunk_id for c in chunks], [c.text for c in chunks])
    rng = random.Random(s.seed)
    pool = [c for c in chunks if not _SKIP_SECTION.search(c.section or "")]
    candidates: list[tuple[Chunk, list[str], int]] = []
    for c in sorted(pool, key=lambda c: c.chunk_id):
        sents = _sentences(c.text)
        # the first and last sentence of a window are often cut by the chunk boundary
        usable = [i for i, x in enumerate(sents[1:-1], start=1) if _usable(x, s)]
        if len(sents) >= 3 and usable:
            candidates.append((c, sents, rng.choice(usable)))
    if not candidates:
        raise ConfigError("no chunk has a usable pseudo-query sentence (3+ sentences, 6-40 words)")
    rng.shuffle(candidates)
    ids = sorted(by_id)
    out: list[ICTExample] = []
    for i in range(s.n_examples):
        c, sents, qi = candidates[i % len(candidates)]
        query = sents[qi]
        keep = rng.random() >= s.remove_prob
        positive = " ".join(sents if keep else sents[:qi] + sents[qi + 1 :])
        hard = [
            h
            for h, _ in bm25.search(query, s.hard_depth)
            if h in by_id and by_id[h].paper_id != c.paper_id
        ]
        picked = rng.sample(hard, min(len(hard), s.negatives - 1))
        while len(picked) < s.negatives:
            r = rng.choice(ids)
            if by_id[r].paper_id != c.paper_id and r not in picked:
                picked.append(r)
        out.append(
            ICTExample(
                query,
                positive,
                tuple(by_id[n].text for n in picked),
                c.chunk_id,
                tuple(picked),
            )
        )
    return out


def fingerprint(examples: Sequence[ICTExample], settings: ICTSettings, base: str) -> str:
    """Identifies a trained model: recipe version, base model, settings and the examples."""
    h = hashlib.sha256(f"ict-v{RECIPE_VERSION}|{base}|{settings.model_dump_json()}".encode())
    for e in examples:
        h.update(f"{e.source_chunk}|{e.query}|{','.join(e.negative_chunks)}\n".encode())
    return h.hexdigest()[:16]


def default_model_dir() -> Path:
    """Where ``rag train-ict`` writes the model that ``reranker: "ict-minilm"`` loads."""
    return cache_dir("models") / "ict-minilm"


def _lr_factor(step: int, total: int, warmup: float) -> float:
    w = max(1, int(total * warmup))
    if step < w:
        return (step + 1) / w
    return max(0.0, (total - step) / max(1, total - w))


def train(
    examples: Sequence[ICTExample],
    out_dir: str | Path | None = None,
    settings: ICTSettings | None = None,
    *,
    base: str | Path | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Train the ICT cross-encoder and save it (a ``CrossEncoder`` folder + ``ict.json``).

    Resumes from ``out_dir/checkpoint.pt`` when it was written for the same fingerprint; a
    finished model with the same fingerprint is not retrained.

    Returns:
        the ``ict.json`` record: fingerprint, settings, steps, seconds, mean loss per 10% of
        training, and the share of groups whose positive scored highest (train accuracy).
    """
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    s = settings or ICTSettings()
    if not examples:
        raise ConfigError("train: no ICT examples")
    if base is None:
        from rag.index.embed import MINILM_ID, minilm_path

        base, label = minilm_path(), MINILM_ID
    else:
        label = Path(str(base)).name
    out = Path(out_dir) if out_dir else default_model_dir()
    fp = fingerprint(examples, s, label)
    record_path = out / "ict.json"
    if record_path.exists():
        rec = json.loads(record_path.read_text())
        if rec.get("fingerprint") == fp:
            log.info("ICT model %s already trained (%s)", fp, out)
            return rec
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(s.seed)
    tok = AutoTokenizer.from_pretrained(str(base), local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(
        str(base), num_labels=1, local_files_only=True
    )
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=s.lr, weight_decay=0.01)
    order_rng = random.Random(s.seed + 1)
    steps_per_epoch = math.ceil(len(examples) / s.batch_groups)
    total = steps_per_epoch * s.epochs
    schedule = []
    for _ in range(s.epochs):
        idx = list(range(len(examples)))
        order_rng.shuffle(idx)
        schedule += [idx[i : i + s.batch_groups] for i in range(0, len(idx), s.batch_groups)]
    ckpt = out / "checkpoint.pt"
    start, losses, correct = 0, [], []
    if ckpt.exists():
        state = torch.load(ckpt, map_location="cpu", weights_only=False)
        if state.get("fingerprint") == fp:
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["opt"])
            start, losses, correct = state["step"], state["losses"], state["correct"]
            log.info("resuming ICT training at step %d/%d", start, total)
    t0 = time.perf_counter()
    group = 1 + s.negatives
    bar = tqdm(total=total, initial=start, desc="ICT training", disable=not show_progress)
    for step in range(start, total):
        batch = [examples[i] for i in schedule[step]]
        queries = [e.query for e in batch for _ in range(group)]
        passages = [p for e in batch for p in (e.positive, *e.negatives)]
        enc = tok(
            queries,
            passages,
            truncation="only_second",
            max_length=s.max_length,
            padding=True,
            return_tensors="pt",
        )
        for g in opt.param_groups:
            g["lr"] = s.lr * _lr_factor(step, total, s.warmup)
        logits = model(**enc).logits.view(len(batch), group)
        loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(batch), dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        correct.extend((logits.argmax(1) == 0).tolist())
        bar.update(1)
        bar.set_postfix(loss=f"{sum(losses[-50:]) / len(losses[-50:]):.3f}")
        if (step + 1) % s.checkpoint_every == 0 and step + 1 < total:
            with atomic_path(ckpt) as tmp:
                torch.save(
                    {
                        "fingerprint": fp,
                        "model": model.state_dict(),
                        "opt": opt.state_dict(),
                        "step": step + 1,
                        "losses": losses,
                        "correct": correct,
                    },
                    tmp,
                )
    bar.close()
    model.eval()
    model.save_pretrained(out)
    tok.save_pretrained(out)
    tenth = max(1, len(losses) // 10)
    rec = {
        "fingerprint": fp,
        "recipe_version": RECIPE_VERSION,
        "base": label,
        "settings": s.model_dump(),
        "examples": len(examples),
        "steps": total,
        "seconds_this_run": round(time.perf_counter() - t0, 1),
        "loss_by_tenth": [
            round(sum(losses[i : i + tenth]) / len(losses[i : i + tenth]), 4)
            for i in range(0, len(losses), tenth)
        ],
        "train_top1_last_tenth": round(
            sum(correct[-max(1, len(correct) // 10) :]) / max(1, len(correct) // 10), 4
        ),
        "chance_top1": round(1 / group, 4),
    }
    record_path.write_text(json.dumps(rec, indent=2) + "\n", encoding="utf-8")
    ckpt.unlink(missing_ok=True)
    log.info("ICT model saved to %s: %s", out, rec)
    return rec


def load_ict_reranker(path: str | Path | None = None, *, max_length: int = 256) -> Any:
    """The trained ICT cross-encoder as a :class:`rag.retrieval.rerank.CrossEncoderReranker`.

    Raises:
        ConfigError: no trained model at ``path`` (the message says how to train one).
    """
    from rag.retrieval.rerank import CrossEncoderReranker

    p = Path(path) if path else default_model_dir()
    if not (p / "ict.json").exists():
        raise ConfigError(
            f"no ICT cross-encoder at {p.name!r}: train it first with `make ict` "
            "(rag train-ict; about 20-30 min on 2 cores)"
        )
    rec = json.loads((p / "ict.json").read_text())
    return CrossEncoderReranker(
        p, max_length=max_length, name=f"cross-encoder[ict-minilm@{rec['fingerprint'][:8]}]"
    )


def train_on_corpus(
    settings: ICTSettings | None = None,
    *,
    manifest_path: str = "data/manifest.jsonl",
    max_papers: int = 0,
    chunking: ChunkSettings | None = None,
    out_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Draw ICT examples from the pinned corpus (fixed chunks, as notebook 04 indexes) and train."""
    from rag.corpus.papers import load_corpus, select_papers
    from rag.text.chunk import require_settings
    from rag.text.chunk_cache import chunk_corpus

    papers = select_papers(manifest_path, [], max_papers)
    corpus = load_corpus(papers)
    parsed = [corpus.parsed[p.arxiv_id] for p in papers if p.arxiv_id in corpus.parsed]
    chunks = chunk_corpus(parsed, require_settings(chunking, "train_on_corpus"))  # None: fixed
    s = settings or ICTSettings()
    examples = make_examples(chunks, s)
    log.info(
        "ICT: %d examples from %d chunks of %d papers", len(examples), len(chunks), len(parsed)
    )
    return train(examples, out_dir, s)
