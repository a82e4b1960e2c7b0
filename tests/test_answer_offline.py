"""Offline answers worth reading: the answer grammar, question forms, the support-based
extractive answerer, the decline gate, the attribution filter, noisy contexts, exact match,
repeated lines, decoding constraints in the cache key, and the per-question traces.

The judge here is a small scripted word-overlap judge (share of the claim's words found in the
premise, "supported" at >= 0.6), so every expected value can be derived by hand.
"""

from __future__ import annotations

import re

import pytest

from rag.answer.base import make_answer
from rag.answer.context import assemble_context
from rag.answer.gate import GatedAnswerer, attribution_filter
from rag.answer.grammar import answer_grammar
from rag.answer.llm import LLMAnswerer
from rag.answer.noise import add_distractors, noisy_hits
from rag.answer.prompts import CONSTRAINED_VERSION, REFUSAL
from rag.answer.questions import declarative_form, is_yes_no_question
from rag.answer.support import resolve_threshold
from rag.answer.support_extractive import SupportExtractiveAnswerer
from rag.errors import ConfigError
from rag.evaluation.answers import exact_match, has_repeated_line, repeated_lines
from rag.evaluation.faithfulness import grade_answerer, trace_records, tradeoff_curve
from rag.evaluation.gold import GoldItem
from rag.judge import Verdict, judge_claims
from rag.llm.cache import cache_key
from rag.types import Chunk, Hit
from tests.fakechat import FakeChatModel

_W = re.compile(r"[a-z0-9]+")
STOP = {"the", "a", "an", "of", "is", "are", "on", "in", "to", "and", "with", "for", "it"}


def _words(t: str) -> set[str]:
    return {w for w in _W.findall(t.lower()) if w not in STOP}


class OverlapJudge:
    """p(supported) = share of the claim's content words present in the premise."""

    name = "overlap"
    fingerprint = "overlap:0.6"

    class fitted:  # noqa: N801 - mimics OfflineJudge.fitted.threshold
        threshold = 0.6

    def verdict(self, claim: str, premise: str) -> Verdict:
        c = _words(claim)
        p = len(c & _words(premise)) / len(c) if c else 0.0
        label = "supported" if p >= 0.6 else ("unsupported" if p >= 0.3 else "not_found")
        return Verdict(label, round(p, 6), f"overlap {p:.2f}")

    def predict(self, pairs):
        return [self.verdict(c, p) for c, p in pairs]

    def entails(self, claim: str, premise: str) -> bool:
        return self.verdict(claim, premise).supported

    def judge_answer(self, answer: str, context: str):
        return judge_claims(self, answer, context)


def hit(cid, score, text, paper="p1", page=1):
    return Hit(chunk_id=cid, paper_id=paper, page=page, section="", text=text, score=score)


TEXT1 = (
    "We extract all character n-grams with lengths from 3 to 6 for every word. "
    "The vectors are trained on Wikipedia dumps in nine languages."
)
TEXT2 = "RoBERTa removes the next sentence prediction objective, and it trains on longer batches."


@pytest.fixture()
def ctx():
    return assemble_context([hit("c1", 0.9, TEXT1), hit("c2", 0.8, TEXT2, paper="p2")])


# ----------------------------------------------------------------------------- grammar


def test_grammar_cites_only_the_given_sources_and_allows_the_refusal():
    g = answer_grammar([2, 1, 2], refusal=REFUSAL)
    assert 'cite ::= "[1]" | "[2]"' in g  # sorted, unique; no [3]
    assert f'refusal ::= "{REFUSAL}"' in g
    assert 'answer ::= sentence (" " sentence){0,2}' in g  # at most 3 sentences
    assert "yn-sentence" not in g.split("answer ::=")[1].splitlines()[0]
    # a body is 3..20 words (first word + 2..19 more), then only the citation may follow
    assert 'body ::= [A-Za-z0-9] wchar{0,29} (" " word){2,19}' in g
    assert "word ::= wchar{1,30}" in g


def test_grammar_for_yes_no_and_closed_book():
    g = answer_grammar([1], refusal=REFUSAL, yes_no=True, max_sentences=1)
    assert "answer ::= yn-sentence\n" in g
    assert '("Yes, " | "No, ")' in g
    assert g.startswith("root ::= answer\n") and REFUSAL not in g  # no refusal branch
    closed = answer_grammar([], refusal=REFUSAL)
    assert "cite" not in closed and 'sentence ::= body "."' in closed


@pytest.mark.parametrize(
    "kw",
    [
        {"max_sentences": 0},
        {"max_citations": 9},
        {"max_words": 2},
        {"source_numbers": [0]},
        {"refusal": " "},
    ],
)
def test_grammar_bounds_are_config_errors(kw):
    args = {"source_numbers": [1], "refusal": REFUSAL} | kw
    with pytest.raises(ConfigError):
        answer_grammar(args.pop("source_numbers"), **args)


def test_grammar_parses_in_llama_cpp():
    from rag.llm.local import compile_grammar

    g = compile_grammar(answer_grammar([1, 2, 3], refusal=REFUSAL, yes_no=True))
    assert g._root == "root"


@pytest.mark.slow
def test_fast_greedy_grammar_gives_the_same_text_as_llama_cpp_full_filter():
    from llama_cpp import LlamaGrammar

    from rag.answer.prompts import build_messages
    from rag.llm.local import LocalBackend

    c = assemble_context([hit("c1", 0.9, TEXT1), hit("c2", 0.8, TEXT2)])
    msgs = build_messages("Does RoBERTa keep next sentence prediction?", c)
    g = answer_grammar([1, 2], refusal=REFUSAL, yes_no=True)
    b = LocalBackend("llama_cpp")
    fast, _ = b.generate(msgs, max_tokens=24, grammar=g, repeat_penalty=1.2)
    b._model.reset()
    ref = b._model.create_chat_completion(
        messages=msgs, temperature=0.0, max_tokens=24, seed=0, repeat_penalty=1.2,
        grammar=LlamaGrammar.from_string(g, verbose=False),
    )["choices"][0]["message"]["content"]  # fmt: skip
    assert fast == ref


@pytest.mark.slow
def test_real_smollm2_under_the_grammar_cites_a_given_source_or_refuses():
    from rag.answer.prompts import build_messages
    from rag.llm.local import LocalBackend

    c = assemble_context([hit("c1", 0.9, TEXT1)])
    msgs = build_messages("Which n-gram lengths are extracted?", c)
    text, _ = LocalBackend("llama_cpp").generate(
        msgs, max_tokens=64, grammar=answer_grammar([1], refusal=REFUSAL), repeat_penalty=1.2
    )
    a = make_answer(text, c, "local")
    assert a.refused or (a.citations == {1: "c1"} and not a.unknown_citations), text


# ----------------------------------------------------------------------------- question forms


@pytest.mark.parametrize(
    ("q", "yn"),
    [
        ("Does RoBERTa keep BERT's next sentence prediction objective?", True),
        ("In Lost in the Middle, do extended-context models use context better?", True),
        ("Did the PV-DBOW or the PV-DM variant work better?", False),
        ("Which n-gram lengths are extracted?", False),
    ],
)
def test_yes_no_rule(q, yn):
    assert is_yes_no_question(q) is yn


def test_declarative_form():
    assert (
        declarative_form("Does RoBERTa keep the NSP objective?") == "RoBERTa keep the NSP objective"
    )
    assert declarative_form("Which n-gram lengths are extracted?") == "n-gram lengths are extracted"
    assert declarative_form("How many languages were used?") == "languages were used"


# ----------------------------------------------------------------------------- extractive


def test_support_extractive_copies_the_supported_clause_with_its_citation(ctx):
    a = SupportExtractiveAnswerer(OverlapJudge()).answer(
        "Does RoBERTa remove the next sentence prediction objective?", ctx
    )
    # statement words {roberta, remove, next, sentence, prediction, objective}; the clause
    # "RoBERTa removes the next sentence prediction objective" has 5/6 (not "remove") = 0.833,
    # as does the whole sentence, and ties go to the shorter span: the clause.
    assert a.text == "Yes, RoBERTa removes the next sentence prediction objective [2]."
    assert a.citations == {2: "c2"} and a.support == pytest.approx(5 / 6, abs=1e-6)
    assert a.trace["decision"] == "yes"


def test_support_extractive_declines_when_nothing_is_supported(ctx):
    a = SupportExtractiveAnswerer(OverlapJudge()).answer("What optimizer schedules are used?", ctx)
    assert a.refused and a.text == REFUSAL


def test_support_extractive_says_no_when_sources_speak_to_but_do_not_support(ctx):
    # statement "vectors trained on Wikipedia dumps in twelve languages": 5 of 6 content words
    # present would pass, so use a question sharing only half: {vectors, trained, books, corpora}
    a = SupportExtractiveAnswerer(OverlapJudge()).answer(
        "Are the vectors trained on books corpora?", ctx
    )
    assert a.text.startswith("No, ") and a.citations == {1: "c1"}


def test_threshold_minus_one_is_the_judges_own():
    assert resolve_threshold(OverlapJudge(), -1.0) == 0.6
    assert resolve_threshold(OverlapJudge(), 0.25) == 0.25
    with pytest.raises(ConfigError):
        resolve_threshold(object(), -1.0)
    with pytest.raises(ConfigError):
        resolve_threshold(OverlapJudge(), 1.5)


# ----------------------------------------------------------------------------- gate, filter, LLM


def test_gate_declines_without_calling_the_model_and_passes_otherwise(ctx):
    chat = FakeChatModel("RoBERTa removes the NSP objective [2].")
    gated = GatedAnswerer(LLMAnswerer(chat), OverlapJudge())
    no = gated.answer("What optimizer schedules are used?", ctx)
    assert no.refused and chat.calls == []
    yes = gated.answer("Does RoBERTa remove the next sentence prediction objective?", ctx)
    assert not yes.refused and len(chat.calls) == 1 and yes.citations == {2: "c2"}
    assert yes.prompt_version.startswith("gate+")


def test_constrained_llm_answerer_sends_the_grammar_and_versions_it(ctx):
    seen = {}

    class Recording(FakeChatModel):
        def complete(self, messages, **kw):
            seen.update(kw)
            return super().complete(messages, **{k: v for k, v in kw.items() if k in (
                "temperature", "max_tokens", "prompt_version")})  # fmt: skip

    a = LLMAnswerer(Recording("Yes, it does [2]."), constrained=True, max_tokens=96).answer(
        "Does RoBERTa drop NSP?", ctx
    )
    assert seen["prompt_version"] == CONSTRAINED_VERSION
    assert '("Yes, " | "No, ")' in seen["grammar"] and '"[2]"' in seen["grammar"]
    assert seen["repeat_penalty"] == 1.2 and a.prompt_version == CONSTRAINED_VERSION


def test_attribution_filter_drops_unsupported_sentences(ctx):
    text = (
        "RoBERTa removes the next sentence prediction objective [2]. "
        "The model was trained on eleven thousand unpublished books [1]."
    )
    out = attribution_filter(
        {"q": make_answer(text, ctx, "x")}, {"q": ctx}, OverlapJudge(), name="x+f"
    )
    assert out["q"].text == "RoBERTa removes the next sentence prediction objective [2]."
    assert out["q"].trace["filter_dropped"] == [
        "The model was trained on eleven thousand unpublished books [1]."
    ]
    all_bad = make_answer("Eleven thousand unpublished books were used [1].", ctx, "x")
    assert attribution_filter({"q": all_bad}, {"q": ctx}, OverlapJudge(), name="f")["q"].refused


def test_decoding_constraints_change_the_cache_key_only_when_set():
    base = dict(provider="local", model="m", messages=[{"role": "user", "content": "hi"}],
                temperature=0.0, max_tokens=8, stop=None, seed=0, json_mode=False,
                prompt_version="v")  # fmt: skip
    assert cache_key(**base) == cache_key(**base, decoding=None)
    g1 = cache_key(**base, decoding={"grammar": 'root ::= "a"'})
    g2 = cache_key(**base, decoding={"grammar": 'root ::= "b"'})
    assert len({cache_key(**base), g1, g2}) == 3


# ----------------------------------------------------------------------------- noise


def _chunk(cid, paper):
    return Chunk(chunk_id=cid, paper_id=paper, strategy="fixed", text=f"text {cid}", section="",
                 page_start=2, page_end=2, char_start=0, char_end=5, n_tokens=2)  # fmt: skip


def test_distractors_come_from_other_papers_below_every_hit_and_are_seeded():
    hits = [hit("a1", 0.9, "x", paper="A"), hit("a2", 0.5, "y", paper="A")]
    pool = [_chunk(f"a{i}", "A") for i in range(5)] + [_chunk(f"b{i}", "B") for i in range(5)]
    out = add_distractors("q1", hits, pool, 2, seed=0)
    assert [h.chunk_id for h in out[:2]] == ["a1", "a2"]
    assert all(h.paper_id == "B" and h.score < 0.5 for h in out[2:]) and len(out) == 4
    assert out == add_distractors("q1", hits, pool, 2, seed=0)
    dropped = noisy_hits({"q1": hits}, pool, 1, relevant={"q1": {"a1": 1, "a2": 0}})["q1"]
    assert [h.chunk_id for h in dropped][0] == "a2" and len(dropped) == 2
    with pytest.raises(ConfigError):
        add_distractors("q1", hits, pool, 9)


# ----------------------------------------------------------------------------- metrics, traces


def test_exact_match_and_repeated_lines():
    assert exact_match("The answer, [1].", "the answer") == 1.0
    assert exact_match("An answer here", "the answer") == 0.0
    assert has_repeated_line("The answer is: one.\nThe answer is: one.")
    assert not has_repeated_line("It is one [1]. It is two [2].")


def _gold(qid, answer="RoBERTa removes the next sentence prediction objective", kind="abstractive"):
    return GoldItem(qid=qid, question="q?", answerable=True, answer=answer, answer_type=kind,
                    kind="single-paper", papers=["p2"],
                    evidence=[{"arxiv_id": "p2", "page": 1, "quote": "RoBERTa removes"}],
                    names_method=False)  # fmt: skip


def test_traces_and_tradeoff_from_one_grade(ctx):
    judge = OverlapJudge()
    ans = {
        "g1": SupportExtractiveAnswerer(judge, threshold=0.0).answer(
            "What does RoBERTa remove from the next sentence prediction objective?", ctx
        )
    }
    items = [_gold("g1")]
    g = grade_answerer("extractive", ans, {"g1": ctx}, items, judge)
    assert repeated_lines(ans, items).value == 0.0
    (rec,) = trace_records(g, {"g1": ctx}, items)
    assert rec["sources"][1] == {"n": 2, "chunk_id": "c2", "paper": "p2", "page": 1}
    assert rec["claims"][0]["label"] == "supported" and rec["citations"][0]["supported"]
    assert rec["exact_match"] == 1.0 and rec["answer_f1"] == 1.0
    assert rec["prompt_version"] == "support-extractive-v1"
    curve = tradeoff_curve(g, [0.0, 0.99])
    assert curve["n_answered"].tolist() == [1, 0] and curve["faithfulness"].tolist()[0] == 1.0
    # the one answerable question: answered (F1 1.0) at 0, declined (F1 0, false rejection) at 0.99
    assert curve["answer_f1"].tolist() == [1.0, 0.0]
    assert curve["false_rejection"].tolist() == [0.0, 1.0]
    assert curve["negative_rejection"].isna().all()
