"""``python -m rag.report.calibrate`` (``make calibrate``): notebook 05's support threshold, pinned.

Runs notebook 05's held-out calibration (:func:`rag.answer.calibrate.held_out_threshold`) on a
profile's parameters, outside the notebook, and writes it with every input it was chosen on to
``data/calibration/support-threshold.json`` (:mod:`rag.answer.calibrate_pin`). The selection
steps are notebook 05's (its parameters cell, then the profile's deltas; the corpus, the gold
slice, the held-out questions, the index, the retriever, the default offline judge), so the inputs
recorded here equal those the notebook computes; a notebook that computed other inputs would say
so and calibrate itself. :func:`profile_inputs` predicts those inputs without embedding anything,
for the test that the committed pin is current; :func:`fit_profile` checks that prediction
against the index it builds before anything is pinned.
"""

from __future__ import annotations

import argparse
import ast
from dataclasses import dataclass
from typing import Any

from rag import paths
from rag.answer.calibrate import SOURCES, Calibration, held_out_questions, held_out_threshold
from rag.answer.calibrate_pin import (
    IndexIdentity,
    calibration_inputs,
    index_identity,
    pin_path,
    write,
)
from rag.answer.context import ContextSettings
from rag.errors import ConfigError, RagError
from rag.retrieval.retrievers import RetrievalSettings
from rag.text.chunk import ChunkSettings, chunk_settings

#: The notebook whose calibration is pinned.
NOTEBOOK = "05_faithfulness"


@dataclass
class ProfileSetup:
    """What notebook 05 calibrates on for one profile, short of the index, retriever and judge."""

    params: dict[str, Any]
    parsed: list[Any]
    titles: dict[str, str]
    held_out: dict[str, tuple[str, str]]

    def context_settings(self) -> ContextSettings:
        p = self.params
        return ContextSettings(
            order=p["context_order"],
            token_budget=p["context_token_budget"],
            per_paper_cap=p["per_paper_cap"],
        )

    def chunking(self) -> ChunkSettings:
        """The chunk settings of the profile's parameters, parsed here (this module's door)."""
        p = self.params
        keys = ("strategy", "max_tokens", "overlap_tokens")
        values = (p["chunk_strategy"], p["max_tokens"], p["overlap_tokens"])
        return chunk_settings(dict(zip(keys, values, strict=True)))


def notebook_parameters(profile: str) -> dict[str, Any]:
    """Notebook 05's parameters on ``profile``: its ``parameters`` cell, then the deltas."""
    from rag.report import profiles

    nb = next(p for p in profiles.notebook_paths() if p.stem == NOTEBOOK)
    declared = profiles.declared_parameters(nb)
    values = {k: ast.literal_eval(d["default"]) for k, d in declared.items()}
    return values | profiles.resolve_parameters(profile, f"outputs/{profile}")[NOTEBOOK]


def profile_setup(profile: str = "default") -> ProfileSetup:
    """Papers, titles and held-out questions as notebook 05 selects them on ``profile``.

    Raises:
        ConfigError: the profile does not calibrate on held-out questions (a fixed threshold, the
            judge's own, or no gold on its papers).
    """
    from rag.corpus.papers import corpus_papers
    from rag.evaluation.gold import answer_slice, gold_for_papers, load_gold
    from rag.evaluation.own_questions import gold_coverage
    from rag.evaluation.qasper import load_qasper

    p = notebook_parameters(profile)
    if p["support_threshold"] >= 0 or p["support_threshold_rule"] != "held-out":
        raise ConfigError(
            f"profile {profile!r} does not calibrate the support threshold on held-out questions "
            f"(support_threshold={p['support_threshold']}, rule={p['support_threshold_rule']!r})"
        )
    papers, parsed = corpus_papers(
        p["manifest_path"], p["paper_ids"], p["max_papers"], pdf_mirror=p["pdf_mirror"]
    )
    titles = {x.arxiv_id: x.title for x in papers}
    gold_all = load_gold(paths.resolve(p["gold_path"]))
    if not gold_coverage(gold_all, titles).covers():
        raise ConfigError(f"profile {profile!r}: the gold file holds no question on its papers")
    corpus_gold = gold_for_papers(gold_all, set(titles))
    items = answer_slice(
        corpus_gold,
        p["n_answerable"],
        include_unanswerable=p["include_unanswerable"],
        max_unanswerable=p["max_unanswerable"],
    )
    qasper = (
        load_qasper(paths.resolve(p["qasper_path"])) if p["held_out_source"] == "qasper" else []
    )
    held_out = held_out_questions(
        p["held_out_source"],
        gold=corpus_gold,
        in_slice=[g.qid for g in items],
        qasper=qasper,
        papers=titles,
    )
    return ProfileSetup(params=p, parsed=parsed, titles=titles, held_out=held_out)


def _inputs(setup: ProfileSetup, index: Any, judge_name: str) -> dict[str, Any]:
    p = setup.params
    return calibration_inputs(
        gold_path=paths.resolve(p["gold_path"]),
        held_out=setup.held_out,
        titles=setup.titles,
        index=index,
        judge=judge_name,
        retriever=p["retriever"],
        retrieval=RetrievalSettings(k=p["k"]),
        k=p["k"],
        settings=setup.context_settings(),
        source=p["held_out_source"],
    )


def _judge(setup: ProfileSetup) -> Any:
    from rag.judge.offline import DEFAULT_JUDGE, make_offline_judge

    return make_offline_judge(DEFAULT_JUDGE, train_limit=setup.params["judge_train_limit"])


def predicted_identity(setup: ProfileSetup) -> IndexIdentity:
    """The :class:`IndexIdentity` of the index notebook 05 builds for ``setup``, without embedding:
    :func:`rag.index.build.index_corpus` without an embedder selects and fingerprints the chunks
    and builds BM25 as the full build does (both cached); the dense settings are those
    :func:`rag.index.choose.choose_index` picks for that many chunks, as the full build does."""
    from rag.index.build import index_corpus
    from rag.index.choose import choose_index
    from rag.index.dense import DenseSettings
    from rag.index.embed import load_embedder

    lexical = index_corpus(setup.parsed, setup.chunking(), embedder=None, show_progress=False)
    emb = load_embedder(setup.params["embedder"])
    choice = choose_index(max(1, len(lexical.chunks)), int(emb.dim))
    return IndexIdentity(
        chunks=lexical.chunk_fingerprint,
        embedder=emb.fingerprint,
        dense=DenseSettings(**choice.settings.model_dump()).model_dump(mode="json"),
        bm25=lexical.bm25.settings.model_dump(mode="json"),
    )


def profile_inputs(profile: str = "default") -> dict[str, Any]:
    """The inputs notebook 05 would calibrate on for ``profile``, without embedding anything
    (:func:`predicted_identity`; :func:`fit_profile` checks it against the index it builds)."""
    setup = profile_setup(profile)
    return _inputs(setup, predicted_identity(setup), _judge(setup).name)


def fit_profile(profile: str = "default") -> tuple[Calibration, dict[str, Any]]:
    """Run notebook 05's held-out calibration on ``profile``: ``(calibration, its inputs)``.

    Raises:
        RagError: :func:`predicted_identity` differs from the index built here (the prediction
            the committed-pin test relies on has drifted from what the notebook builds).
    """
    from rag.evaluation.compare import build_retrievers
    from rag.index.build import index_corpus
    from rag.retrieval.retrievers import Components

    setup = profile_setup(profile)
    p = setup.params
    ix = index_corpus(setup.parsed, setup.chunking(), embedder=p["embedder"])
    built, predicted = index_identity(ix), predicted_identity(setup)
    if built != predicted:
        raise RagError(
            f"predicted_identity() gives {predicted}, the built index {built}: fix the prediction "
            "before pinning"
        )
    judge = _judge(setup)
    parts = Components(
        store=ix.store, embedder=ix.embedder, dense_index=ix.dense, bm25_index=ix.bm25
    )
    retr, skipped = build_retrievers([p["retriever"]], parts, RetrievalSettings(k=p["k"]))
    if skipped:
        raise ConfigError(f"retriever {p['retriever']!r} cannot be built: {skipped}")
    cal = held_out_threshold(
        judge,
        retr[p["retriever"]],
        setup.held_out,
        k=p["k"],
        settings=setup.context_settings(),
        titles=setup.titles,
    )
    return cal, _inputs(setup, ix, judge.name)


def main(argv: list[str] | None = None) -> int:
    """Choose notebook 05's support threshold on its held-out questions and pin it."""
    ap = argparse.ArgumentParser(prog="python -m rag.report.calibrate", description=main.__doc__)
    ap.add_argument("--profile", default="default", help="params profile (default: default)")
    args = ap.parse_args(argv)
    cal, inputs = fit_profile(args.profile)
    out = write(cal, inputs, pin_path())
    print(
        f"support threshold {cal.threshold} (held-out balanced accuracy "
        f"{cal.balanced_accuracy:.4f}, answered {cal.answered:.4f}, declined {cal.declined:.4f}, "
        f"n {cal.n}; {SOURCES[inputs['held_out_source']]}): {paths.display(out)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
