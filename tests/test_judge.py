"""Judges: offline features and classifier, LLM judge on a local server, validation."""

from __future__ import annotations

import json
import pickle
import re

import numpy as np
import pytest
from pydantic import SecretStr

from rag.errors import ConfigError, JudgeError
from rag.evaluation.citations import faithfulness, faithfulness_metrics
from rag.evaluation.judge_validation import balanced_accuracy, validate_judge
from rag.judge import Verdict
from rag.judge.features import (
    FEATURE_NAMES,
    claim_features,
    compute_idf,
    context_units,
    entities,
    numbers,
    window_vectors,
)
from rag.judge.llm_judge import PROMPT_VERSION, LLMJudge, parse_judge_output
from tests.fakeembed import BowEmbedder

# -- deterministic features ---------------------------------------------------------------------


def test_numbers_are_normalised_and_word_numbers_count():
    assert numbers("Accuracy rose from 2.50 to 3 points, two runs, 1,000 samples") == {
        "2.5",
        "3",
        "2",
        "1000",
    }
    assert numbers("BRCA1 mutations") == set()


def test_entities_need_digits_or_inner_capitals():
    assert entities("The BRCA1 gene and mTOR signalling in IL-6 assays") == {"brca1", "mtor", "il6"}
    assert entities("Aspirin reduces pain") == set()


def _features(claim: str, context: str) -> dict[str, float]:
    emb = BowEmbedder()
    units = context_units(context)
    vecs = emb.encode_passages(units.texts)
    feats, _ = claim_features(claim, units, emb.encode_passages([claim])[0], vecs, {})
    assert list(feats) == list(FEATURE_NAMES)
    return feats


def test_claim_features_catch_numbers_negation_and_direction():
    ctx = "Aspirin reduces fever in 40% of adults. The trial enrolled 120 patients."
    same = _features("Aspirin reduces fever in 40% of adults", ctx)
    assert same["cos_max"] == pytest.approx(1.0)
    assert (same["cov_best"], same["num_missing"], same["negation_mismatch"]) == (1.0, 0.0, 0.0)
    assert same["direction_conflict"] == 0.0
    # 55 is not in the context; "increases" opposes "reduces" in the best sentence.
    wrong = _features("Aspirin increases fever in 55% of adults", ctx)
    assert (wrong["num_missing"], wrong["has_number"], wrong["direction_conflict"]) == (
        1.0,
        1.0,
        1.0,
    )
    negated = _features("Aspirin does not reduce fever in adults", ctx)
    assert negated["negation_mismatch"] == 1.0
    # Content stems of the claim: aspirin, reduce, fever, adult -> all in the context.
    assert negated["cov_context"] == 1.0


def test_window_vectors_and_idf():
    v = np.eye(3, dtype=np.float32)
    w = window_vectors(v)
    assert np.allclose(w, np.array([[1, 1, 0], [0, 1, 1]]) / np.sqrt(2))
    assert window_vectors(v[:1]).shape == (0, 3)
    idf = compute_idf(["cats sleep", "cats eat"])
    # log((1+2)/(1+2)) + 1 = 1 for "cat"; log(3/2) + 1 for the others.
    assert idf["cat"] == pytest.approx(1.0)
    assert idf["sleep"] == pytest.approx(np.log(1.5) + 1)


# -- offline judge: train, persist, reload, predict -----------------------------------------------

FACTS = [
    ("Aspirin reduces fever in adults", "Aspirin reduces fever in adults. It was tested in 2010."),
    ("Vitamin D improves bone density", "Vitamin D improves bone density. Trials ran for a year."),
    ("Metformin lowers blood glucose", "Metformin lowers blood glucose. Doses were 500 mg."),
    ("Statins reduce cholesterol levels", "Statins reduce cholesterol levels in most patients."),
    ("Exercise improves sleep quality", "Exercise improves sleep quality in older adults."),
    ("Caffeine increases alertness", "Caffeine increases alertness. Effects last four hours."),
    ("Zinc shortens colds", "Zinc shortens colds by a day. The effect was small."),
    ("Smoking damages lung tissue", "Smoking damages lung tissue. Damage accumulates."),
]


def _train_file(tmp_path):
    rows = []
    for i, (claim, abstract) in enumerate(FACTS):
        rows.append({"claim_id": f"s{i}", "claim": claim, "abstract": abstract, "label": "SUPPORT"})
        other = FACTS[(i + 3) % len(FACTS)][1]
        rows.append(
            {"claim_id": f"s{i}", "claim": claim, "abstract": other, "label": "NOT_ENOUGH_INFO"}
        )
        flipped = claim.replace("reduce", "raise").replace("improve", "worsen")
        rows.append(
            {
                "claim_id": f"c{i}",
                "claim": f"No link: {flipped} never",
                "abstract": abstract,
                "label": "CONTRADICT",
            }
        )
    p = tmp_path / "judge_train.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


def test_offline_judge_trains_persists_and_reloads(tmp_path, tmp_cache, monkeypatch):
    from rag.judge import offline

    settings = offline.OfflineJudgeSettings(
        train_path=str(_train_file(tmp_path)),
        classifiers=("logreg",),
        logreg_c=(1.0,),
        cv_folds=2,
        cv_groups="claim",
    )
    judge = offline.OfflineJudge(settings, embedder=BowEmbedder())
    stored = sorted((tmp_cache / "judge").glob("offline-*.pkl"))
    assert len(stored) == 1
    assert judge.fitted.meta["n_train"] == 3 * len(FACTS)
    assert judge.fitted.meta["chosen"]["model"] == "logreg"

    supported = judge.verdict("Metformin lowers blood glucose", FACTS[2][1])
    unrelated = judge.verdict("Metformin lowers blood glucose", FACTS[4][1])
    assert supported.label == "supported" and supported.score > unrelated.score
    assert unrelated.label in ("unsupported", "not_found")
    assert supported.trace["best_sentence"] == "Metformin lowers blood glucose."

    def _no_refit(*a, **k):
        raise AssertionError("the stored model should have been reused")

    monkeypatch.setattr(offline, "fit_judge", _no_refit)
    again = offline.OfflineJudge(settings, embedder=BowEmbedder())
    assert again.verdict("Metformin lowers blood glucose", FACTS[2][1]) == supported

    strict = offline.OfflineJudge(
        settings.model_copy(update={"strict_numbers": True}), embedder=BowEmbedder()
    )
    assert strict.fitted.meta["key"] == judge.fitted.meta["key"]  # same model, other decision
    # the content key tells the two apart although their names agree; a reload shares it
    assert strict.name == judge.name and strict.fingerprint != judge.fingerprint
    assert again.fingerprint == judge.fingerprint
    claim, ctx = (
        "Metformin lowers blood glucose",
        "Metformin lowers blood glucose. Doses were 500 mg.",
    )
    assert judge.verdict(f"{claim} at 900 mg", ctx).trace["missing_numbers"] == ["900"]
    assert strict.verdict(f"{claim} at 900 mg", ctx).label != "supported"
    assert strict.verdict(f"{claim} at 500 mg", ctx).trace["missing_numbers"] == []

    with pytest.raises(JudgeError, match="empty claim"):
        judge.verdict("  ", FACTS[0][1])

    j = judge.judge_answer(
        "Metformin lowers blood glucose [1]. Zinc cures cancer outright.", FACTS[2][1]
    )
    assert j.status == "scored" and len(j.claims) == 2
    assert faithfulness(j) == 0.5


def test_a_limited_judge_fits_on_whole_claims_under_its_own_key(tmp_path, tmp_cache):
    from rag.judge import offline

    rows = offline.read_pairs(_train_file(tmp_path))
    assert [r["claim_id"] for r in rows[:5]] == ["s0", "s0", "c0", "s1", "s1"]
    assert len(offline.first_claims(rows, 1)) == 2  # s0 kept whole
    assert len(offline.first_claims(rows, 3)) == 3  # the cut falls between claims
    assert len(offline.first_claims(rows, 4)) == 5  # s1 kept whole
    assert offline.first_claims(rows, 0) == rows and offline.first_claims(rows, 10**6) == rows

    settings = offline.OfflineJudgeSettings(
        train_path=str(_train_file(tmp_path)), logreg_c=(1.0,), cv_folds=2, cv_groups="claim"
    )
    limited = settings.model_copy(update={"train_limit": 9})
    full = offline.OfflineJudge(settings, embedder=BowEmbedder())
    small = offline.OfflineJudge(limited, embedder=BowEmbedder())
    assert full.fitted.meta["n_train"] == len(rows)
    assert small.fitted.meta["n_train"] == 9
    assert small.fitted.meta["key"] != full.fitted.meta["key"]
    assert len(list((tmp_cache / "judge").glob("offline-*.pkl"))) == 2
    with pytest.raises(ConfigError, match="train_limit"):
        offline.make_offline_judge("offline-v1", embedder=BowEmbedder(), train_limit=-5)


def test_offline_judge_retrains_byte_identically(tmp_path, monkeypatch):
    from rag import paths
    from rag.judge import offline

    settings = offline.OfflineJudgeSettings(
        train_path=str(_train_file(tmp_path)),
        classifiers=("logreg",),
        logreg_c=(1.0,),
        cv_folds=2,
        cv_groups="claim",
    )
    blobs = []
    for run in ("a", "b"):
        monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / run))
        fitted = offline.OfflineJudge(settings, embedder=BowEmbedder()).fitted
        (f,) = (tmp_path / run / "judge").glob("offline-*.pkl")
        meta = {k: v for k, v in fitted.meta.items() if k != "train_seconds"}  # wall time varies
        parts = (fitted.support_model, fitted.kind_model, fitted.threshold, fitted.idf, meta)
        blobs.append((f.name, pickle.dumps(parts, protocol=4)))
    assert blobs[0] == blobs[1]


# -- LLM judge against the local OpenAI-compatible server -----------------------------------------

CONTEXT = "[1] Dense retrieval beats BM25 on NQ by 9 points.\n[2] The index is exact."
ANSWER = "Dense retrieval beats BM25 on NQ [1]. It is trained on MS MARCO [2]."
GOOD = json.dumps(
    {
        "claims": [
            {
                "claim": "Dense retrieval beats BM25 on NQ",
                "verdict": "supported",
                "evidence": "Dense retrieval beats BM25 on NQ",
            },
            {
                "claim": "Dense retrieval is trained on MS MARCO",
                "verdict": "not_found",
                "evidence": "",
            },
        ]
    }
)


@pytest.fixture()
def llm(tmp_path):
    from rag.llm.factory import make_chat_model
    from rag.llm.settings import ApiKeys, LLMSettings
    from rag.llm.testing import FakeLLMServer

    with FakeLLMServer("openai", reply=GOOD) as server:
        settings = LLMSettings(
            openai_base_url=f"{server.url}/v1",
            timeout_s=2.0,
            max_attempts=2,
            backoff_initial_s=0.01,
            backoff_max_s=0.02,
            backoff_jitter_s=0.0,
        )
        keys = ApiKeys(openai=SecretStr("sk-local-test-" + "0" * 16))
        yield server, make_chat_model("gpt-4o-mini", settings, keys=keys)


def test_llm_judge_scores_claims_at_temperature_zero(llm):
    server, chat = llm
    judge = LLMJudge(chat)
    j = judge.judge_answer(ANSWER, CONTEXT)
    assert j.status == "scored"
    assert [c.verdict.label for c in j.claims] == ["supported", "not_found"]
    assert faithfulness(j) == 0.5
    assert j.trace["prompt_version"] == PROMPT_VERSION
    body = server.bodies[-1]
    assert body["temperature"] == 0.0
    assert "SOURCES:\n[1] Dense retrieval" in body["messages"][1]["content"]


def test_llm_judge_records_malformed_output_as_failure(llm):
    server, chat = llm
    server.reply = "Sure! Both claims look fine to me."
    j = LLMJudge(chat).judge_answer(ANSWER, CONTEXT)
    assert j.status == "judge_failure" and j.claims == ()
    assert j.reason.startswith("malformed judge output: judge output is not JSON")
    assert j.trace["raw"] == "Sure! Both claims look fine to me."
    m = faithfulness_metrics([j])
    assert (m["faithfulness"], m["n_judge_failure"], m["n_scored"]) == (None, 1, 0)
    with pytest.raises(JudgeError, match="not JSON"):
        LLMJudge(chat).verdict("Dense retrieval beats BM25", CONTEXT)


def test_llm_judge_records_failed_call_and_skips_refusals(llm):
    server, chat = llm
    server.script(["malformed"])  # a body that is not a chat completion: not retried
    j = LLMJudge(chat).judge_answer(ANSWER, CONTEXT)
    assert j.status == "judge_failure" and j.reason.startswith("judge call failed")
    before = server.requests
    r = LLMJudge(chat).judge_answer("The sources do not contain the answer.", CONTEXT)
    assert r.status == "refusal" and server.requests == before


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"verdicts": []}', 'lacks a "claims" list'),
        ('{"claims": [{"claim": "x", "verdict": "maybe"}]}', "verdict 'maybe'"),
        ('{"claims": [{"claim": "", "verdict": "supported"}]}', "no claim text"),
        ('{"claims": ["x"]}', "not an object"),
        ("[1, 2]", 'lacks a "claims" list'),
    ],
)
def test_parse_judge_output_rejects_bad_shapes(text, message):
    with pytest.raises(JudgeError, match=re.escape(message)):
        parse_judge_output(text)


def test_parse_judge_output_accepts_fences_and_verdict_spellings():
    text = '```json\n{"claims": [{"claim": "A is B", "verdict": "Not Found"}]}\n```'
    (cv,) = parse_judge_output(text)
    assert (cv.claim, cv.verdict.label, cv.verdict.score) == ("A is B", "not_found", 0.0)


# -- validation against human labels --------------------------------------------------------------


class KeywordJudge:
    """Supported when the abstract contains the claim's first word; fails on claims with '??'."""

    name = "keyword"
    fingerprint = "keyword:first-word"

    def verdict(self, claim: str, context: str) -> Verdict:
        if "??" in claim:
            raise JudgeError("unreadable")
        ok = claim.split()[0].lower() in context.lower()
        return Verdict("supported" if ok else "not_found", float(ok), "keyword")


def test_validate_judge_balanced_accuracy_confusion_and_failures(tmp_path):
    rows = [
        ("alpha is good", "alpha is good", "SUPPORT"),  # supported, correct
        ("beta is good", "beta is good", "SUPPORT"),  # supported, correct
        ("gamma is good", "nothing here", "SUPPORT"),  # missed support
        ("delta is bad", "delta is good", "CONTRADICT"),  # wrongly supported
        ("eps is x", "nothing", "NOT_ENOUGH_INFO"),  # correct reject
        ("zeta is y", "nothing", "NOT_ENOUGH_INFO"),  # correct reject
        ("?? broken", "x", "NOT_ENOUGH_INFO"),  # judge failure, excluded
    ]
    p = tmp_path / "dev.jsonl"
    p.write_text(
        "".join(
            json.dumps({"claim_id": str(i), "claim": c, "abstract": a, "label": lab}) + "\n"
            for i, (c, a, lab) in enumerate(rows)
        )
    )
    metrics, table = validate_judge(KeywordJudge(), p, n_resamples=200)
    # SUPPORT recall 2/3, not-SUPPORT recall 2/3 -> balanced accuracy 2/3.
    assert metrics["balanced_accuracy"] == pytest.approx(2 / 3)
    assert (metrics["n"], metrics["n_failures"]) == (6, 1)
    assert metrics["confusion"]["SUPPORT"] == {
        "supported": 2,
        "unsupported": 0,
        "not_found": 1,
        "judge_failure": 0,
    }
    assert metrics["confusion"]["CONTRADICT"]["supported"] == 1
    assert metrics["confusion"]["NOT_ENOUGH_INFO"]["judge_failure"] == 1
    assert metrics["ci_low"] <= metrics["balanced_accuracy"] <= metrics["ci_high"]
    assert len(table) == 7 and table.loc[6, "judge"] == "judge_failure"


def test_balanced_accuracy_by_hand():
    y = np.array([True, True, False, False, False])
    p = np.array([True, False, False, False, True])
    assert balanced_accuracy(y, p) == pytest.approx((1 / 2 + 2 / 3) / 2)


@pytest.mark.slow
def test_offline_judge_on_scifact_dev(shared_dir):
    from rag.judge.offline import OfflineJudge

    metrics, table = validate_judge(OfflineJudge())
    assert metrics["n"] == 340 and metrics["n_failures"] == 0
    # offline-v2 measured 0.769 (95% CI 0.722-0.814), CONTRADICT 45/71 not passed; the bound
    # leaves ~4 pairs of slack for float noise in cold-cache embeddings. The references on this
    # set: MiniLM max-cosine 0.682, 5-feature logistic regression 0.717, offline-v1 0.750.
    assert metrics["balanced_accuracy"] >= 0.76
    assert metrics["class_recall"]["CONTRADICT"]["k"] >= 40
    assert metrics["ci_low"] > 0.682
    assert sum(metrics["confusion"]["SUPPORT"].values()) == 138
    again, table2 = validate_judge(OfflineJudge())
    assert again["balanced_accuracy"] == metrics["balanced_accuracy"]
    assert table.equals(table2)
