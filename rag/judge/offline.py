"""The offline faithfulness judge: embedding alignment + deterministic checks + a small classifier.

No NLI or fact-checking model can be installed here, so :class:`OfflineJudge` scores a claim from
the features of :mod:`rag.judge.features` with a scikit-learn classifier fitted on SciFact
``judge_train.jsonl`` only (Wadden et al., 2020), by the grouped-CV procedure of
:mod:`rag.judge.fit`.

Two versions are kept, selectable by name (:data:`JUDGES`, :func:`make_offline_judge`):

* ``offline-v1`` — the alignment features only; CV groups are claims.
* ``offline-v2`` (default) — adds the contradiction cues of :mod:`rag.judge.contrast` (negation,
  antonyms, signed direction, numbers, comparatives, flip gain); CV groups are the connected
  components of claims and documents, so neither a claim nor an abstract sits in two folds; and a
  *contradiction veto*: a logistic regression fitted on the SUPPORT and CONTRADICT train pairs
  only, whose threshold is chosen jointly with the support threshold on the same out-of-fold
  predictions, labels a pair ``unsupported`` when it looks contradicted even if it aligns well.

A judge is loaded from its pinned JSON in ``data/judge/`` when that was fitted on the same inputs
(:mod:`rag.judge.pinned`), else from ``cache_dir("judge")`` under its content key
(:func:`rag.judge.artifact.artifact_key`), else fitted deterministically and cached.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import pickle
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rag import paths
from rag.atomic import atomic_path
from rag.errors import ConfigError, IndexBuildError, JudgeError
from rag.index.embed import Embedder, minilm
from rag.judge import ClaimVerdict, Verdict, judge_claims, pinned
from rag.judge.artifact import ARTIFACT_VERSION, FittedJudge, artifact_key, library_versions
from rag.judge.contrast import CONTRAST_VERSION
from rag.judge.features import FEATURE_VERSION
from rag.judge.fit import (
    cv_groups,
    embed,
    feature_names,
    featurize,
    first_claims,
    fit_classifiers,
    fit_judge,
    read_pairs,
)
from rag.judge.settings import DEFAULT_JUDGE, JUDGES, JudgeVersion, OfflineJudgeSettings

logger = logging.getLogger(__name__)


class OfflineJudge:
    """Claim judge that needs no API: ``verdict(claim, context) -> Verdict``.

    Args:
        settings: judge settings.
        embedder: an injected :class:`Embedder`; the packaged MiniLM when ``None``.
        fitted: an already fitted model (tests); otherwise the pinned judge of
            ``data/judge/`` when it was fitted on the same inputs, else loaded from the cache or
            trained (:mod:`rag.judge.pinned`).
        fit_only: ignore the pinned file and the cache and fit (what ``make judge`` pins).
    """

    def __init__(
        self,
        settings: OfflineJudgeSettings | None = None,
        embedder: Embedder | None = None,
        fitted: FittedJudge | None = None,
        *,
        fit_only: bool = False,
    ) -> None:
        self.settings = settings or OfflineJudgeSettings()
        # fp32 MiniLM, whatever the index's default: the judge is validated (SciFact dev BA,
        # CONTRADICT recall) on fp32 features, not on bf16 ones
        self.embedder = embedder or minilm(
            batch_size=self.settings.batch_size, passage_backend="torch"
        )
        self.fitted = fitted or self._load_or_fit(fit_only)
        self.version: str = self.settings.version
        self.name = f"{self.version}:{self.fitted.meta.get('key', 'custom')}"

    @functools.cached_property
    def fingerprint(self) -> str:
        """Content key of this judge's verdicts: its settings, embedder and fitted model.

        A fitted model is named by its artifact key (the hash of its training inputs, in
        :attr:`name`: fitting is deterministic, so a reload or a pinned copy shares it); one
        handed in without a key is hashed as it is.
        """
        h = hashlib.sha256()
        for part in (self.name, self.settings.model_dump_json(), self.embedder.fingerprint):
            h.update(part.encode())
            h.update(b"\0")
        if "key" not in self.fitted.meta:
            h.update(pickle.dumps(self.fitted, protocol=4))
        return f"{self.name}:{h.hexdigest()[:16]}"

    def _train_path(self) -> Path:
        p = Path(self.settings.train_path)
        return p if p.is_absolute() else paths.shared_dir() / p

    def _load_or_fit(self, fit_only: bool = False) -> FittedJudge:
        train = self._train_path()
        rows = first_claims(read_pairs(train), self.settings.train_limit)
        train_bytes = train.read_bytes()
        key = artifact_key(train_bytes, self.embedder.fingerprint, self.settings)
        #: what a pinned judge must have been fitted on to stand in for this fit
        self.pin_inputs = pinned.pin_inputs(
            train_bytes,
            self.embedder.fingerprint,
            self.settings,
            {
                "artifact": ARTIFACT_VERSION,
                "features": FEATURE_VERSION,
                "contrast": CONTRAST_VERSION if self.settings.version == "offline-v2" else "",
            },
        )
        if not fit_only and (
            fitted := pinned.load(pinned.pin_path(self.settings), self.pin_inputs)
        ):
            return fitted
        store = paths.cache_dir("judge") / f"offline-{key}.pkl"
        if store.exists() and not fit_only:
            try:
                with store.open("rb") as f:
                    fitted = pickle.load(f)
                if isinstance(fitted, FittedJudge) and fitted.meta.get("key") == key:
                    return fitted
                logger.warning("stale judge artifact %s; retraining", paths.display(store))
            except (pickle.UnpicklingError, EOFError, AttributeError) as e:
                logger.warning("unreadable judge artifact %s (%s); retraining", store.name, e)
        logger.info("training the %s judge on %s", self.settings.version, paths.display(train))
        fitted = fit_judge(rows, self.embedder, self.settings)
        fitted.meta.update(
            {"key": key, "versions": library_versions(), "train": paths.display(train)}
        )
        with atomic_path(store) as tmp, tmp.open("wb") as f:
            pickle.dump(fitted, f, protocol=4)
        return fitted

    def predict(self, pairs: Sequence[tuple[str, str]], desc: bool = False) -> list[Verdict]:
        """Verdicts for many (claim, context) pairs at once (batched embedding)."""
        if not pairs:
            return []
        for claim, _ in pairs:
            if not claim.strip():
                raise JudgeError("empty claim given to the offline judge; pass a non-empty claim")
        try:
            x, traces = featurize(
                pairs,
                self.embedder,
                self.fitted.idf,
                self.settings.max_sentences,
                desc,
                version=self.settings.version,
            )
        except ValueError as e:
            raise IndexBuildError(f"could not embed judge inputs: {e}") from e
        p = self.fitted.support_model.predict_proba(x)[:, 1]
        p_contra = self.fitted.kind_model.predict_proba(x)[:, 1]
        veto_model = getattr(self.fitted, "contra_model", None)
        tv = getattr(self.fitted, "contra_threshold", None)
        p_veto = veto_model.predict_proba(x)[:, 1] if veto_model is not None else np.zeros(len(p))
        t = self.fitted.threshold
        out = []
        for pi, pc, pv, tr in zip(p, p_contra, p_veto, traces, strict=True):
            pi, pc, pv = round(float(pi), 6), round(float(pc), 6), round(float(pv), 6)
            strict_miss = self.settings.strict_numbers and bool(tr["missing_numbers"])
            vetoed = tv is not None and pv >= tv
            if pi >= t and vetoed:
                label, why = (
                    "unsupported",
                    f"p(supported)={pi:.3f} but p(contradicted)={pv:.3f} >= {tv:.3f}",
                )
            elif pi >= t and not strict_miss:
                label, why = "supported", f"p(supported)={pi:.3f} >= {t:.3f}"
            elif pi >= t:
                label, why = (
                    "unsupported",
                    f"p(supported)={pi:.3f} but a number is not in the context",
                )
            elif pc >= 0.5:
                label, why = "unsupported", f"p(supported)={pi:.3f} < {t:.3f}; contradiction cues"
            else:
                label, why = "not_found", f"p(supported)={pi:.3f} < {t:.3f}; no entailing sentence"
            cues = [f"missing numbers {tr['missing_numbers']}"] if tr["missing_numbers"] else []
            if tr["missing_entities"]:
                cues.append(f"missing entities {tr['missing_entities']}")
            cues.extend(tr.get("contradiction_cues", [])[:2])
            reason = "; ".join([why, *cues]) + f"; best: {tr['best_sentence'][:160]!r}"
            extra = {"p_contradict": pc, "threshold": t, "judge_version": self.version}
            if veto_model is not None:
                extra |= {"p_contradicted": pv, "contra_threshold": tv, "p_supported": pi}
            # A vetoed claim scores just below the threshold, so "score >= threshold" keeps
            # meaning "supported" for callers that gate on the score.
            score = min(pi, float(np.nextafter(t, 0.0))) if pi >= t and vetoed else pi
            out.append(Verdict(label, score, reason, tr | extra))
        return out

    def verdict(self, claim: str, context: str) -> Verdict:
        """The judge's verdict on one claim against one context."""
        return self.predict([(claim, context)])[0]

    def entails(self, claim: str, premise: str) -> bool:
        """Entailment function for :mod:`rag.evaluation.citations` (``supported`` or not)."""
        return self.verdict(claim, premise).supported

    def judge_answer(self, answer: str, context: str):
        """Claim-level judgement of a whole answer (see :func:`rag.judge.judge_claims`)."""
        return judge_claims(self, answer, context)


def make_offline_judge(
    name: str = DEFAULT_JUDGE, embedder: Embedder | None = None, train_limit: int = 0
) -> OfflineJudge:
    """The offline judge called ``name`` (a key of :data:`JUDGES`), loaded or trained once.

    ``train_limit`` > 0 fits it on the first that many SciFact train pairs (whole claims): the
    smoke profile's cheaper judge, never the published one.

    Raises:
        ConfigError: unknown name (the message lists the known ones).
    """
    if name not in JUDGES:
        raise ConfigError(f"unknown offline judge {name!r}; known: {sorted(JUDGES)}")
    if train_limit < 0:
        raise ConfigError(f"train_limit must be >= 0 (0: all pairs), got {train_limit}")
    settings = JUDGES[name]
    if train_limit:
        settings = settings.model_copy(update={"train_limit": train_limit})
    return OfflineJudge(settings, embedder=embedder)


__all__ = [
    "DEFAULT_JUDGE",
    "JUDGES",
    "ClaimVerdict",
    "FittedJudge",
    "JudgeVersion",
    "OfflineJudge",
    "OfflineJudgeSettings",
    "artifact_key",
    "cv_groups",
    "embed",
    "feature_names",
    "featurize",
    "first_claims",
    "fit_classifiers",
    "fit_judge",
    "make_offline_judge",
    "read_pairs",
]
