"""Paper summaries: the input leaves the abstract out, the selection covers the sections under a
budget, the lead baseline, the LLM path, errors, and the JSON record."""

from __future__ import annotations

import json
import re

import pytest

from rag.errors import ConfigError, LLMError, ParseError
from rag.papers import summarize as S
from rag.papers.summary_eval import aggregate, paper_row, rouge_l
from rag.types import Block, ParsedPaper
from rag.verdicts import Verdict
from tests.fakechat import FakeChatModel
from tests.fakeembed import BowEmbedder

ABSTRACT = "We present the zebra transformer which reads striped tokens with great speed."

SECTIONS = {
    "1 Introduction": [
        "Language models need long contexts for many scientific reading tasks today.",
        "Existing attention layers scale quadratically with the sequence length of inputs.",
    ],
    "2 Method": [
        "Our model splits every input sequence into fixed windows of local attention blocks.",
        "Each window attends to a small global memory that summarises distant window states.",
    ],
    "2.1 Memory Details": [
        "The global memory holds sixty four slots that are updated after every window step.",
    ],
    "3 Related Work": [
        "Sparse attention patterns were studied by many earlier authors in prior years.",
    ],
    "4 Experiments": [
        "On long document classification the model improves accuracy over dense attention.",
        "Training time drops by half compared with the dense attention baseline model.",
    ],
    "5 Conclusion": [
        "Windowed attention with a global memory makes long context reading affordable.",
    ],
}
APPENDIX = "The appendix lists every hyperparameter used in all of our experiment runs here."


class OverlapJudge:
    """A ClaimJudge: ``supported`` when 80 % of the claim's words occur in the context."""

    name = "overlap-test"
    fingerprint = "test:overlap"

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def verdict(self, claim: str, context: str) -> Verdict:
        self.seen.append((claim, context))
        words = re.findall(r"[a-z]+", claim.lower())
        have = set(re.findall(r"[a-z]+", context.lower()))
        share = sum(w in have for w in words) / max(1, len(words))
        label = "supported" if share >= 0.8 else "not_found"
        return Verdict(label, share, f"{share:.2f} of the words in the context")


def _paper(paper_id: str = "2401.00001") -> ParsedPaper:
    blocks = [
        Block(1, "heading", "", "Zebra Transformers"),
        Block(1, "body", "", "Ada Lovelace, Example University, ada@example.org"),
        Block(1, "heading", "Abstract", "Abstract"),
        Block(1, "body", "Abstract", ABSTRACT),
    ]
    page = 1
    for heading, sentences in SECTIONS.items():
        page += 1
        blocks.append(Block(page, "heading", heading, heading))
        blocks.append(Block(page, "body", heading, " ".join(sentences)))
        blocks.append(
            Block(page, "caption", heading, "Figure 1: A caption that is not prose here.")
        )
    blocks += [
        Block(9, "heading", "References", "References"),
        Block(9, "references", "References", "[1] A. Author. Some paper title. 2020."),
        Block(10, "heading", "A Appendix", "A Appendix"),
        Block(10, "body", "A Appendix", APPENDIX),
    ]
    return ParsedPaper(paper_id, 10, blocks)


@pytest.fixture
def run(tmp_cache):
    def _run(**kw):
        pp = kw.pop("parsed", _paper())
        kw.setdefault("judge", OverlapJudge())
        return S.summarize(pp.paper_id, parsed=pp, title="Zebra Transformers",
                           embedder=BowEmbedder(), **kw)  # fmt: skip

    return _run


def test_input_leaves_out_front_matter_abstract_related_captions_references_appendix():
    got = S.body_sentences(_paper())
    texts = [s.text for s in got]
    expected = [s for h, ss in SECTIONS.items() if h != "3 Related Work" for s in ss]
    assert texts == expected
    assert [s.index for s in got] == list(range(len(got)))
    by_text = {s.text: s for s in got}
    first_method = by_text[SECTIONS["2 Method"][0]]
    assert (first_method.section, first_method.role, first_method.page) == ("2 Method", "method", 3)
    # A numbered subsection keeps its parent's role.
    assert by_text[SECTIONS["2.1 Memory Details"][0]].role == "method"
    assert by_text[SECTIONS["4 Experiments"][0]].role == "results"


@pytest.mark.parametrize(
    ("heading", "role"),
    [
        ("1 Introduction", "intro"),
        ("I. INTRODUCTION", "intro"),
        ("3 Our Approach", "method"),
        ("4.2 Experimental Setup", "results"),
        ("V. EVALUATION", "results"),
        ("6 Conclusions and Future Work", "conclusion"),
        ("2 Background", "related"),
        ("II. RELATED WORK", "related"),
    ],
)
def test_section_role(heading, role):
    assert S.section_role(heading) == role


def test_ieee_lettered_subsection_keeps_its_parent_role():
    blocks = [Block(1, "heading", "I. INTRODUCTION", "I. INTRODUCTION")]
    for page, heading in ((1, "IV. EXPERIMENTS"), (2, "A. Datasets Used Here")):
        blocks.append(Block(page, "heading", heading, heading))
        blocks.append(Block(page, "body", heading, SECTIONS["4 Experiments"][page - 1]))
    got = S.body_sentences(ParsedPaper("x", 2, blocks))
    assert [s.role for s in got] == ["results", "results"]


def test_abstract_text_from_its_section_or_an_ieee_front_matter_paragraph():
    assert S.abstract_text(_paper()) == ABSTRACT
    ieee = ParsedPaper("x", 1, [
        Block(1, "heading", "", "Title"),
        Block(1, "body", "", "Abstract—" + ABSTRACT + " " + ABSTRACT),
        Block(1, "heading", "I. INTRODUCTION", "I. INTRODUCTION"),
    ])  # fmt: skip
    assert S.abstract_text(ieee) == ABSTRACT + " " + ABSTRACT
    assert S.abstract_text(ParsedPaper("x", 1, [])) == ""


def test_extractive_summary_covers_every_role_in_document_order_without_the_abstract(run):
    out = run(sentences=4, max_words=200)
    assert out["method"] == "extractive"
    texts = [s["text"] for s in out["sentences"]]
    assert len(texts) == 4
    assert [s["role"] for s in out["sentences"]] == list(S.ROLES)
    assert ABSTRACT not in out["text"] and APPENDIX not in out["text"]
    order = [s.text for s in S.body_sentences(_paper())]
    assert [order.index(t) for t in texts] == sorted(order.index(t) for t in texts)
    assert out["counts"]["roles"] == dict.fromkeys(S.ROLES, 1)


def test_word_budget_and_sentence_count_bound_the_summary(run):
    full = run(sentences=8, max_words=500)
    assert full["counts"]["sentences"] == 8  # every input sentence fits
    small = run(sentences=8, max_words=30)
    assert small["counts"]["words"] <= 30
    assert 1 <= small["counts"]["sentences"] < 8
    assert run(sentences=2, max_words=500)["counts"]["sentences"] == 2


def test_redundant_sentence_is_not_taken_twice():
    sents = [S.Sentence(i, t, "1 Introduction", "intro", 1) for i, t in enumerate(
        [SECTIONS["2 Method"][0], SECTIONS["2 Method"][0] + " Indeed.", SECTIONS["5 Conclusion"][0]]
    )]  # fmt: skip
    vecs = BowEmbedder().encode_passages([s.text for s in sents])
    picked = S.extractive(sents, vecs, 3, 500)
    assert len(picked) == 2
    assert sents[2] in picked


def test_lead_baseline_takes_the_first_sentences_after_the_abstract_under_the_budget():
    sents = S.body_sentences(_paper())
    assert [s.text for s in S.lead(sents, 3, 500)] == [s.text for s in sents[:3]]
    # A sentence that overruns the budget is skipped, a shorter later one still fits.
    got = S.lead(sents, 3, sents[0].words + 1)
    assert [s.text for s in got] == [sents[0].text]


def test_every_sentence_is_judged_against_evidence_from_the_paper(run):
    judge = OverlapJudge()
    out = run(judge=judge, sentences=4)
    assert len(judge.seen) == 4
    for (claim, context), rec in zip(judge.seen, out["sentences"], strict=True):
        assert claim == rec["text"] and claim in context  # an extract is in its own evidence
        assert ABSTRACT not in context
        assert rec["verdict"]["label"] == "supported"
    assert out["counts"]["supported"] == 4 and out["counts"]["not_found"] == 0


def test_output_is_json_able_and_counts_add_up(run):
    out = run()
    back = json.loads(json.dumps(out))
    assert back == out
    c = out["counts"]
    assert c["supported"] + c["unsupported"] + c["not_found"] == c["sentences"]
    assert c["words"] == len(out["text"].split())
    assert c["input_sentences"] == len(S.body_sentences(_paper()))
    assert {"paper_id", "title", "method", "version", "settings"} <= set(out)
    assert out["paper_id"] == "2401.00001" and out["title"] == "Zebra Transformers"


def test_llm_summary_prompts_with_section_sentences_and_judges_each_reply_sentence(run):
    reply = (
        "The paper splits inputs into windows of local attention blocks with a global memory. "
        "It wins the Turing award for quantum banana farming."
    )
    chat = FakeChatModel(reply)
    judge = OverlapJudge()
    out = run(chat_model=chat, judge=judge, sentences=3)
    assert out["method"] == "llm:scripted"
    assert len(chat.calls) == 1
    call = chat.calls[0]
    prompt = " ".join(m["content"] for m in call["messages"])
    assert call["prompt_version"] == S.PROMPT_VERSION
    assert "## 2 Method" in prompt and SECTIONS["5 Conclusion"][0] in prompt
    assert ABSTRACT not in prompt and "Sparse attention" not in prompt
    assert "at most 3 sentences" in prompt
    labels = [s["verdict"]["label"] for s in out["sentences"]]
    assert labels == ["supported", "not_found"]
    # Each reply sentence is placed at its nearest input sentence's section and page.
    inputs = {x.section: x.page for x in S.body_sentences(_paper())}
    for rec in out["sentences"]:
        assert inputs[rec["section"]] == rec["page"]
    assert out["llm"]["model"] == "scripted" and out["llm"]["cached"] is False
    assert json.loads(json.dumps(out)) == out


def test_empty_llm_reply_is_a_named_error(run):
    with pytest.raises(LLMError, match="scripted"):
        run(chat_model=FakeChatModel("   "))


def test_llm_reply_loses_headings_repeats_a_cut_off_tail_and_extra_sentences(run):
    one = "The model splits inputs into windows of local attention blocks."
    two = "Training time drops by half compared with dense attention."
    reply = f"## 1 Summary\n{one} {one} {two} {SECTIONS['5 Conclusion'][0]} The global memory"
    out = run(chat_model=FakeChatModel(reply), sentences=2)
    assert [s["text"] for s in out["sentences"]] == [one, two]
    cut = run(chat_model=FakeChatModel(f"{one} The global memory"), sentences=3)
    assert [s["text"] for s in cut["sentences"]] == [one]


def test_unknown_paper_id_is_a_config_error_naming_it():
    with pytest.raises(ConfigError, match=r"'9999\.99999'"):
        S.summarize("9999.99999", judge=OverlapJudge(), embedder=BowEmbedder())


def test_bad_inputs_are_named(run):
    with pytest.raises(ConfigError, match="2401.00002"):
        S.summarize("2401.00002", parsed=_paper(), judge=OverlapJudge(), embedder=BowEmbedder())
    with pytest.raises(ConfigError, match="sentences"):
        run(sentences=0)
    with pytest.raises(ConfigError, match="max_words"):
        run(max_words=5)
    empty = ParsedPaper("2401.00001", 1, _paper().blocks[:4])
    with pytest.raises(ParseError, match="no body sentences"):
        run(parsed=empty)
    failed = ParsedPaper("2401.00001", 0, [], status="corrupt", error="bad xref")
    with pytest.raises(ParseError, match="corrupt"):
        run(parsed=failed)


def test_rouge_l_and_the_measure_rows(tmp_cache):
    assert rouge_l("the cat sat", "the cat sat") == pytest.approx(1.0)
    # LCS "the sat" = 2 of 3 tokens each side: P = R = F = 2/3.
    assert rouge_l("the cat sat", "the dog sat") == pytest.approx(2 / 3)
    long_abstract = ParsedPaper("2401.00001", 10, [
        *(_paper().blocks[:3]), Block(1, "body", "Abstract", " ".join([ABSTRACT] * 3)),
        *(_paper().blocks[4:]),
    ])  # fmt: skip
    row = paper_row(long_abstract, BowEmbedder(), OverlapJudge(), n=3, max_words=200)
    assert row is not None and set(row) >= {"extractive", "lead"}
    assert row["lead"]["sentences"] == 3 and row["lead"]["faithfulness"] == 1.0
    assert paper_row(_paper(), BowEmbedder(), OverlapJudge()) is None  # abstract too short
    agg = aggregate([row, row])
    assert agg["extractive"]["rouge_l"]["n"] == 2
    assert agg["extractive_vs_lead"]["rouge_l"]["n"] == 2


def test_a_real_corpus_paper(tmp_cache):
    from rag.corpus.papers import corpus_papers

    papers, parsed = corpus_papers("data/manifest.jsonl", ["1301.3781"])
    out = S.summarize("1301.3781", parsed=parsed[0], title=papers[0].title,
                      judge=OverlapJudge(), embedder=BowEmbedder())  # fmt: skip
    abstract = S.abstract_text(parsed[0])
    assert len(abstract.split()) > 50
    for s in out["sentences"]:
        assert s["text"] not in abstract
        assert s["page"] >= 1 and s["section"]
    assert set(out["counts"]["roles"]) == set(S.ROLES)
    assert sum(v > 0 for v in out["counts"]["roles"].values()) >= 3
    assert out["counts"]["words"] <= S.DEFAULT_MAX_WORDS
