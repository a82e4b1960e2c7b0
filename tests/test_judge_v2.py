"""offline-v2's contradiction cues, the judge registry, multi-judge validation, LLM agreement and
repeats (against the local OpenAI- and Anthropic-dialect servers on 127.0.0.1)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import SecretStr

from rag.errors import ConfigError, JudgeError
from rag.evaluation.judge_validation import (
    judge_card,
    validate_judge,
    validate_judges,
    validate_repeats,
)
from rag.judge import Verdict
from rag.judge.contrast import (
    CONTRAST_NAMES,
    antonym_conflict,
    comparatives,
    contrast_features,
    direction,
    flip_claim,
    is_negated,
    number_conflict,
)
from rag.judge.llm_judge import AgreementJudge, JudgeDisagreement, LLMJudge
from tests.fakeembed import BowEmbedder

# -- contradiction cues on hand-written pairs -----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "negated"),
    [
        ("Aspirin reduces fever.", False),
        ("Aspirin does not reduce fever.", True),
        ("Aspirin never reduces fever.", True),
        ("Aspirin fails to reduce fever.", True),
        ("Aspirin doesn't reduce fever.", True),
        ("Aspirin is ineffective against fever.", True),
        ("There is no known link between A and B.", True),
        ("It is not true that aspirin never works.", False),  # two negations cancel
    ],
)
def test_negation_parity(text, negated):
    assert is_negated(text) is negated


def test_antonyms_only_across_claim_and_sentence():
    assert antonym_conflict(
        "Patients show decreased levels of hypocretin.",
        "Moreover, patients have elevated levels of hypocretin.",
    ) == [("decreased", "elevated")]
    assert antonym_conflict(
        "Birth weight is negatively associated with cancer.",
        "Birth weight was positively associated with cancer risk.",
    ) == [("negatively", "positively")]
    pairs = antonym_conflict("Drug X promotes growth.", "Drug X inhibits growth.")
    assert pairs == [("promotes", "inhibits")]
    # Same words on both sides, and look-alikes (moreover, hypocretin) are no conflict.
    assert antonym_conflict("X increases Y.", "X increases Y more than Z.") == []
    assert antonym_conflict("Moreover, hypocretin rose.", "Hypocretin rose.") == []
    assert antonym_conflict("The drug is effective.", "The drug is ineffective.") == [
        ("effective", "ineffective")
    ]


def test_signed_direction_and_comparatives():
    assert direction("Exercise increases mortality.") == 1
    assert direction("Exercise reduces mortality.") == -1
    assert direction("Exercise does not reduce mortality.") == 1  # negated down = up
    assert direction("Exercise affects mortality.") == 0
    assert comparatives("Incidence is lower than in controls.") == {-1}
    assert comparatives("Rates were 2 times higher than those of DSM-IV.") == {1}
    assert comparatives("Rates are low.") == set()


def test_number_conflict_needs_numbers_on_both_sides():
    assert number_conflict("1 in 5 million are positive.", "493 per million were positive.")
    assert not number_conflict("493 per million.", "Prevalence was 493 per million (n=16).")
    assert not number_conflict("Prevalence is low.", "Prevalence was 493 per million.")


@pytest.mark.parametrize(
    ("claim", "flipped"),
    [
        (
            "Physical activity does not improve cognition.",
            "Physical activity does improve cognition.",
        ),
        ("Exercise increases cancer mortality.", "Exercise decreases cancer mortality."),
        ("Higher doses help.", "Lower doses help."),
        ("ART has no effect on HIV.", "ART has effect on HIV."),
        ("Headaches are correlated with pain.", "Headaches are not correlated with pain."),
        ("Mutations in RIM1 matter", "It is not true that mutations in RIM1 matter"),
    ],
)
def test_flip_claim(claim, flipped):
    assert flip_claim(claim) == flipped


def test_contrast_features_fire_on_the_aligned_sentence():
    sents = ["Subjects with anxiety had elevated ORX levels.", "The study enrolled 50 people."]
    sims = np.array([0.9, 0.1])
    feats, trace = contrast_features(
        "Subjects with anxiety show decreased ORX levels.", sents, sims, np.array([0.95, 0.1])
    )
    assert list(feats) == list(CONTRAST_NAMES)
    assert feats["antonym_best"] == 1.0 and feats["direction_flip_best"] == 1.0
    assert feats["flip_gain"] == pytest.approx(0.05)
    assert feats["cue_any_x_cos"] == pytest.approx(0.9)
    assert any("antonyms" in c for c in trace["contradiction_cues"])
    same, _ = contrast_features(sents[0], sents, sims, np.array([0.5, 0.1]))
    assert same["antonym_best"] == same["direction_flip_best"] == same["neg_mismatch_best"] == 0
    neg, _ = contrast_features(
        "Subjects with anxiety do not have elevated ORX levels.", sents, sims, sims
    )
    assert neg["claim_negated"] == 1.0 and neg["neg_mismatch_best"] == 1.0


# -- the offline judges by name -------------------------------------------------------------------

FACTS = [
    ("Aspirin reduces fever in adults", "Aspirin reduces fever in adults. It was tested in 2010."),
    ("Vitamin D improves bone density", "Vitamin D improves bone density. Trials ran a year."),
    ("Metformin lowers blood glucose", "Metformin lowers blood glucose. Doses were 500 mg."),
    ("Statins reduce cholesterol levels", "Statins reduce cholesterol levels in most patients."),
    ("Exercise improves sleep quality", "Exercise improves sleep quality in older adults."),
    ("Caffeine increases alertness", "Caffeine increases alertness. Effects last four hours."),
    ("Zinc shortens colds", "Zinc shortens colds by a day. The effect was small."),
    ("Smoking damages lung tissue", "Smoking damages lung tissue. Damage accumulates."),
]


def _rows():
    rows = []
    for i, (claim, abstract) in enumerate(FACTS):
        rows.append(
            {
                "claim_id": f"s{i}",
                "doc_id": f"d{i}",
                "claim": claim,
                "abstract": abstract,
                "label": "SUPPORT",
            }
        )
        j = (i + 3) % len(FACTS)
        rows.append(
            {
                "claim_id": f"s{i}",
                "doc_id": f"d{j}",
                "claim": claim,
                "abstract": FACTS[j][1],
                "label": "NOT_ENOUGH_INFO",
            }
        )
        flipped = flip_claim(claim)
        rows.append(
            {
                "claim_id": f"c{i}",
                "doc_id": f"d{i}",
                "claim": flipped,
                "abstract": abstract,
                "label": "CONTRADICT",
            }
        )
    return rows


def _write(tmp_path, rows, name="pairs.jsonl"):
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


def test_v1_and_v2_are_separate_cached_models(tmp_path, tmp_cache):
    from rag.judge import offline

    train = _write(tmp_path, _rows())
    base = {"train_path": str(train), "logreg_c": (1.0,), "cv_folds": 2, "cv_groups": "claim"}
    v1 = offline.OfflineJudge(
        offline.OfflineJudgeSettings(version="offline-v1", contradiction_veto=False, **base),
        embedder=BowEmbedder(),
    )
    v2 = offline.OfflineJudge(offline.OfflineJudgeSettings(**base), embedder=BowEmbedder())
    assert v1.name.startswith("offline-v1:") and v2.name.startswith("offline-v2:")
    assert v1.fitted.meta["key"] != v2.fitted.meta["key"]
    assert len(list((tmp_cache / "judge").glob("offline-*.pkl"))) == 2
    assert len(v2.fitted.meta["features"]) == len(v1.fitted.meta["features"]) + len(CONTRAST_NAMES)
    assert v2.fitted.meta["train_seconds"] >= 0 and v2.fitted.meta["veto_cv"] is not None
    v = v2.verdict("Caffeine decreases alertness", FACTS[5][1])
    assert v.trace["judge_version"] == "offline-v2"
    assert "antonyms" in " ".join(v.trace["contradiction_cues"])
    # A vetoed claim scores below the threshold: score >= threshold still means supported.
    verdicts = v2.predict([(r["claim"], r["abstract"]) for r in _rows()])
    assert all((v.score >= v2.fitted.threshold) == v.supported for v in verdicts)

    table, metrics = validate_judges(
        [v1, v2], _write(tmp_path, _rows(), "dev.jsonl"), n_resamples=100
    )
    assert list(table.index) == ["offline-v1", "offline-v2"]
    for col in (
        "balanced accuracy",
        "CI",
        "n",
        "CONTRADICT recall",
        "CONTRADICT k/n",
        "SUPPORT recall",
        "NOT_ENOUGH_INFO recall",
    ):
        assert col in table.columns
    assert set(table["CONTRADICT k/n"].str.split("/").str[1]) == {"8"}
    card = judge_card(metrics)
    assert card["offline-v2"]["contradict_n"] == 8 and card["offline-v2"]["n"] == 24


def test_make_offline_judge_rejects_unknown_names():
    from rag.judge.offline import JUDGES, make_offline_judge

    assert set(JUDGES) == {"offline-v1", "offline-v2"}
    with pytest.raises(ConfigError, match="offline-v3"):
        make_offline_judge("offline-v3")


def test_claim_document_groups_join_claims_that_share_an_abstract():
    from rag.judge.offline import cv_groups

    rows = [
        {"claim_id": "1", "doc_id": "a", "abstract": "x"},
        {"claim_id": "2", "doc_id": "a", "abstract": "x"},
        {"claim_id": "3", "doc_id": "b", "abstract": "y"},
    ]
    g = cv_groups(rows, "claim+document")
    assert g[0] == g[1] != g[2]
    assert list(cv_groups(rows, "claim")) == ["1", "2", "3"]


# -- multi-judge validation table on a tiny set ---------------------------------------------------


class WordJudge:
    """Supported when every claim word is in the context (a judge that cannot see negation)."""

    def __init__(self, name, strict_negation=False):
        self.name = name
        self.fingerprint = f"{name}:strict={strict_negation}"
        self.strict = strict_negation

    def verdict(self, claim, context):
        ok = all(w in context.lower() for w in claim.lower().split())
        if self.strict and "not" in claim.lower().split() and "not" not in context.lower():
            ok = False
        return Verdict("supported" if ok else "not_found", float(ok), "words")


def test_validate_judges_table_shape_and_recalls(tmp_path):
    rows = [
        ("a b", "a b c", "SUPPORT"),
        ("b c", "a b c", "SUPPORT"),
        ("a x", "a b c", "NOT_ENOUGH_INFO"),
        ("not a", "a b c not", "CONTRADICT"),  # both pass it
        ("not b", "a b c", "CONTRADICT"),  # words missing: both reject
    ]
    p = _write(
        tmp_path,
        [
            {"claim_id": str(i), "claim": c, "abstract": a, "label": lab}
            for i, (c, a, lab) in enumerate(rows)
        ],
    )
    table, metrics = validate_judges(
        {"old": WordJudge("w1"), "new": WordJudge("w2", True)}, p, n_resamples=100
    )
    assert table.shape[0] == 2 and list(table.index) == ["old", "new"]
    assert table.loc["old", "CONTRADICT k/n"] == "1/2"
    assert table.loc["old", "CONTRADICT recall"] == 0.5
    assert table.loc["old", "SUPPORT k/n"] == "2/2"
    assert table.loc["old", "NOT_ENOUGH_INFO k/n"] == "1/1"
    # Not-SUPPORT recall 2/3 -> balanced accuracy (1 + 2/3) / 2.
    assert metrics["old"]["balanced_accuracy"] == pytest.approx(5 / 6)
    assert table.loc["old", "n"] == 5
    with pytest.raises(ConfigError):
        validate_judges({}, p)


class SaysJudge(WordJudge):
    """WordJudge that also passes the claims in ``passes`` (a judge fooled by them)."""

    def __init__(self, name, passes):
        super().__init__(name)
        self.passes = passes

    def verdict(self, claim, context):
        if claim in self.passes:
            return Verdict("supported", 1.0, "fooled")
        return super().verdict(claim, context)


def test_validate_judges_pairs_each_judge_with_the_baseline_and_tallies_groups(tmp_path):
    rows = [
        ("a b", "a b c", "SUPPORT"),
        ("not a", "a b c", "CONTRADICT"),  # only the strict judge rejects it
        ("not b", "a b c", "CONTRADICT"),  # likewise
        ("a x", "a b c", "NOT_ENOUGH_INFO"),
    ]
    p = _write(
        tmp_path,
        [
            {"claim_id": str(i), "claim": c, "abstract": a, "label": lab}
            for i, (c, a, lab) in enumerate(rows)
        ],
    )
    judges = {"old": SaysJudge("old", {"not a", "not b"}), "new": SaysJudge("new", set())}
    groups = ["para", "negation", "negation", "extra"]
    table, metrics = validate_judges(judges, p, baseline="old", groups=groups, n_resamples=100)
    # old: SUPPORT 1/1, not-SUPPORT 1/3 -> 2/3; new: 1/1 and 3/3 -> 1.
    assert metrics["new"]["paired"]["diff"] == pytest.approx(1 - 2 / 3)
    assert metrics["new"]["paired"]["baseline"] == "old" and "paired" not in metrics["old"]
    assert table.loc["new", "paired diff"] == "+0.333" and table.loc["old", "paired diff"] == ""
    assert metrics["old"]["right_by_group"] == {"extra": "1/1", "negation": "0/2", "para": "1/1"}
    assert metrics["new"]["right_by_group"]["negation"] == "2/2"
    with pytest.raises(ConfigError, match="baseline 'gone'"):
        validate_judges(judges, p, baseline="gone")
    with pytest.raises(ConfigError, match="3 groups for 4 pairs"):
        validate_judges(judges, p, groups=groups[:3])


# -- LLM judges: agreement rule and repeats on local servers --------------------------------------


def _reply(verdict):
    return json.dumps({"claims": [{"claim": "c", "verdict": verdict, "evidence": ""}]})


@pytest.fixture()
def two_families(tmp_path):
    from rag.llm.cache import CompletionCache
    from rag.llm.factory import make_chat_model
    from rag.llm.settings import ApiKeys, LLMSettings
    from rag.llm.testing import FakeLLMServer

    with (
        FakeLLMServer("openai", reply=_reply("supported")) as oai,
        FakeLLMServer("anthropic", reply=_reply("supported")[1:]) as anth,
    ):
        settings = LLMSettings(
            openai_base_url=f"{oai.url}/v1",
            anthropic_base_url=anth.url,
            timeout_s=2.0,
            max_attempts=2,
            backoff_initial_s=0.01,
            backoff_max_s=0.02,
            backoff_jitter_s=0.0,
        )
        keys = ApiKeys(
            openai=SecretStr("sk-local-test-" + "0" * 16),
            anthropic=SecretStr("sk-local-an-" + "0" * 16),
        )
        cache = CompletionCache(tmp_path / "llm-cache")
        yield (
            oai,
            anth,
            make_chat_model("gpt-4o-mini", settings, keys=keys, cache=cache),
            make_chat_model("claude-3-5-haiku", settings, keys=keys, cache=cache),
        )
        cache.close()


def test_agreement_rule_accepts_only_shared_decisions(two_families, tmp_path):
    oai, anth, gpt, claude = two_families
    judge = AgreementJudge(LLMJudge(gpt), LLMJudge(claude))
    v = judge.verdict("Dense retrieval beats BM25", "[1] Dense retrieval beats BM25.")
    assert v.label == "supported" and judge.stats()["disagreement_rate"] == 0.0
    anth.reply = _reply("unsupported")[1:]  # the client prefills "{"
    with pytest.raises(JudgeDisagreement, match="says supported.*says unsupported"):
        judge.verdict("Sparse retrieval beats BM25", "[1] Dense retrieval beats BM25.")
    assert judge.stats() == {
        "n_agree": 1,
        "n_disagree": 1,
        "n_failed": 0,
        "disagreement_rate": 0.5,
    }
    j = judge.judge_answer("Sparse retrieval beats BM25 on NQ.", "[1] Dense retrieval wins.")
    assert j.status == "judge_failure" and "says" in j.reason
    with pytest.raises(JudgeError, match="two different judges"):
        AgreementJudge(LLMJudge(gpt), LLMJudge(gpt))

    # In validation a disagreement is a failure (excluded and counted), never a guess: pair 0's
    # calls are cached while both judges say supported, then the GPT server turns to not_found.
    rows = [
        {"claim_id": "0", "claim": "A holds", "abstract": "A holds.", "label": "SUPPORT"},
        {"claim_id": "1", "claim": "B holds", "abstract": "A holds.", "label": "CONTRADICT"},
    ]
    anth.reply = _reply("supported")[1:]
    warm = AgreementJudge(LLMJudge(gpt), LLMJudge(claude))
    assert warm.verdict("A holds", "A holds.").supported
    oai.reply = _reply("not_found")
    fresh = AgreementJudge(LLMJudge(gpt), LLMJudge(claude))
    m, table = validate_judge(fresh, _write(tmp_path, rows), n_resamples=50)
    assert (m["n"], m["n_failures"]) == (1, 1)
    assert table.loc[1, "judge"] == "judge_failure" and "says not_found" in table.loc[1, "reason"]
    assert fresh.stats()["disagreement_rate"] == 0.5


def test_repeats_are_cached_per_index(two_families, tmp_path):
    oai, _, gpt, _ = two_families
    rows = [
        {"claim_id": "0", "claim": "A holds", "abstract": "A holds.", "label": "SUPPORT"},
        {"claim_id": "1", "claim": "B holds", "abstract": "A holds.", "label": "NOT_ENOUGH_INFO"},
    ]
    p = _write(tmp_path, rows)
    table, summary = validate_repeats(lambda r: LLMJudge(gpt, repeat=r), 3, p, n_resamples=50)
    assert oai.requests == 6  # 3 repeats x 2 pairs: each repeat is its own call
    assert [b["seed"] for b in oai.bodies] == [0, 0, 1, 1, 2, 2]
    assert list(table.index) == [0, 1, 2] and summary["n_repeats"] == 3
    assert summary["ba_sd"] == 0.0 and summary["ba_min"] == summary["ba_max"] == 0.5
    again, _ = validate_repeats(lambda r: LLMJudge(gpt, repeat=r), 3, p, n_resamples=50)
    assert oai.requests == 6  # warm: zero calls
    assert again.equals(table)
    assert LLMJudge(gpt, repeat=2).name.endswith("#r2")
    with pytest.raises(ConfigError):
        validate_repeats(lambda r: LLMJudge(gpt, repeat=r), 0, p)
