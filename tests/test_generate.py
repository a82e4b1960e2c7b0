"""Grounded generation: context assembly, the extractive answerer, and an LLM answerer served by
the local OpenAI-compatible test server. Expected values are derived by hand in the comments."""

from __future__ import annotations

import json
import secrets

import numpy as np
import pytest
from pydantic import SecretStr

from rag.answer.claims import is_refusal, parse_answer
from rag.answer.context import Context, assemble_context, edge_positions
from rag.answer.extractive import ExtractiveAnswerer, ExtractiveSettings
from rag.answer.llm import LLMAnswerer
from rag.answer.prompts import PROMPT_VERSION, REFUSAL, build_messages
from rag.answer.run import answer_all
from rag.errors import ConfigError
from rag.llm.cache import CompletionCache
from rag.llm.factory import make_chat_model
from rag.llm.meter import CostMeter
from rag.llm.settings import ApiKeys, LLMSettings
from rag.llm.testing import FakeLLMServer
from rag.types import Hit


def hit(cid: str, score: float, paper: str = "p1", text: str = "some text", page: int = 1) -> Hit:
    return Hit(chunk_id=cid, paper_id=paper, page=page, section="", text=text, score=score)


FIVE = [hit(f"c{i}", s) for i, s in zip(range(1, 6), [0.9, 0.8, 0.7, 0.6, 0.5], strict=True)]


def words(s: str) -> int:
    return len(s.split())


# ----------------------------------------------------------------------------- context assembly


def test_score_order_numbers_sources_by_rank_whatever_the_input_order():
    ctx = assemble_context(list(reversed(FIVE)), order="score")
    assert [s.chunk_id for s in ctx.sources] == ["c1", "c2", "c3", "c4", "c5"]
    assert [s.n for s in ctx.sources] == [1, 2, 3, 4, 5]
    assert ctx.citation_map == {1: "c1", 2: "c2", 3: "c3", 4: "c4", 5: "c5"}


def test_edges_order_puts_strongest_first_and_last():
    # ranks 1,2,3,4,5 -> positions 0,4,1,3,2, so the prompt reads ranks 1,3,5,4,2
    assert edge_positions(5) == [0, 4, 1, 3, 2]
    ctx = assemble_context(FIVE, order="edges")
    assert [s.chunk_id for s in ctx.sources] == ["c1", "c3", "c5", "c4", "c2"]
    assert [s.rank for s in ctx.sources] == [1, 3, 5, 4, 2]
    assert ctx.citation_map == {1: "c1", 2: "c3", 3: "c5", 4: "c4", 5: "c2"}


def test_ties_broken_by_chunk_id():
    ctx = assemble_context([hit("b", 0.5), hit("a", 0.5), hit("c", 0.7)])
    assert [s.chunk_id for s in ctx.sources] == ["c", "a", "b"]


def test_per_paper_cap_keeps_the_best_of_each_paper():
    hits = [hit("c1", 0.9, "p1"), hit("c2", 0.8, "p1"), hit("c3", 0.7, "p2"), hit("c4", 0.6, "p1")]
    one = assemble_context(hits, per_paper_cap=1)
    assert [s.chunk_id for s in one.sources] == ["c1", "c3"]
    assert (one.n_dropped_cap, one.n_dropped_budget, one.n_hits) == (2, 0, 4)
    two = assemble_context(hits, per_paper_cap=2)
    assert [s.chunk_id for s in two.sources] == ["c1", "c2", "c3"]
    assert two.n_dropped_cap == 1


def test_token_budget_drops_and_counts_sources_that_do_not_fit():
    # Header "[n] (untitled) (arXiv:p1, p. 1)" is 5 words; a source costs 5 + its text's words.
    ten = " ".join(["w"] * 10)
    hits = [hit("c1", 0.9, text=ten), hit("c2", 0.8, text=ten), hit("c3", 0.7, text="a b c")]
    ctx = assemble_context(hits, token_budget=23, count_tokens=words)
    # c1 costs 15 (used 15); c2 would make 30 > 23: dropped; c3 costs 8 -> used 23 == budget.
    assert [s.chunk_id for s in ctx.sources] == ["c1", "c3"]
    assert [s.n_tokens for s in ctx.sources] == [15, 8]
    assert (ctx.n_dropped_budget, ctx.n_tokens) == (1, 23)
    assert ctx.citation_map == {1: "c1", 2: "c3"}
    tiny = assemble_context(hits, token_budget=7, count_tokens=words)
    assert tiny.sources == () and tiny.n_dropped_budget == 3


def test_rendered_source_names_title_arxiv_id_page_section():
    h = Hit("ch", "1607.04606", 3, "Model", "We hash n-grams.", 1.0)
    ctx = assemble_context([h], titles={"1607.04606": "Enriching Word Vectors"})
    assert ctx.render() == (
        "[1] Enriching Word Vectors (arXiv:1607.04606, p. 3, section: Model)\nWe hash n-grams."
    )
    assert Context.from_dict(json.loads(json.dumps(ctx.to_dict()))) == ctx


@pytest.mark.parametrize(
    "kw", [{"order": "middle"}, {"per_paper_cap": 0}, {"token_budget": 0}], ids=str
)
def test_bad_settings_are_config_errors(kw):
    with pytest.raises(ConfigError):
        assemble_context(FIVE, **kw)


# ----------------------------------------------------------------------------- prompt


def test_refusal_sentence_is_recognised_and_prompt_is_versioned():
    assert is_refusal(REFUSAL)
    assert parse_answer(REFUSAL).status == "refusal"
    assert PROMPT_VERSION.startswith("grounded-")
    msgs = build_messages("Why?", assemble_context(FIVE[:2]))
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert REFUSAL in msgs[0]["content"]
    assert "[1] (untitled)" in msgs[1]["content"] and "[2] (untitled)" in msgs[1]["content"]
    assert msgs[1]["content"].index("Sources:") < msgs[1]["content"].index("Question: Why?")


# ----------------------------------------------------------------------------- extractive

SRC = [
    Hit(
        "chunk-attn",
        "1706.03762",
        2,
        "Model",
        "The transformer uses multi-head attention over all positions [12]. "
        "It was trained on eight GPUs for twelve hours.",
        0.9,
    ),
    Hit(
        "chunk-ngram",
        "1607.04606",
        3,
        "Model",
        "We extract all character n-grams with lengths between 3 and 6 for every word. "
        "Words are hashed into two million buckets.",
        0.8,
    ),
    Hit(
        "chunk-bert",
        "1810.04805",
        4,
        "Pre-training",
        "BERT is pretrained with masked language modelling on large text corpora.",
        0.7,
    ),
]


@pytest.fixture()
def ctx() -> Context:
    return assemble_context(SRC)


def test_extractive_copies_the_matching_sentence_with_its_citation(ctx):
    a = ExtractiveAnswerer().answer("Which character n-gram lengths are extracted?", ctx)
    # Only source 2's first sentence holds at least half the question's terms
    # (charact, n, gram, length, extract: all five); nothing else reaches 0.5 coverage.
    assert a.text == (
        "We extract all character n-grams with lengths between 3 and 6 for every word [2]."
    )
    assert a.citations == {2: "chunk-ngram"}
    assert not a.refused and a.answerer == "extractive"
    assert (a.tokens_in, a.tokens_out, a.cost_usd) == (0, 0, 0.0)


def test_extractive_drops_paper_citations_from_copied_sentences(ctx):
    a = ExtractiveAnswerer().answer("Does the transformer use multi-head attention?", ctx)
    assert a.text.startswith("The transformer uses multi-head attention over all positions [1].")
    assert "[12]" not in a.text and a.unknown_citations == ()
    assert a.citations == {1: "chunk-attn"}


def test_extractive_declines_an_unrelated_question(ctx):
    a = ExtractiveAnswerer().answer("What is the boiling point of mercury in kelvin?", ctx)
    assert a.text == REFUSAL and a.refused and a.citations == {}


def test_extractive_stitches_up_to_max_sentences(ctx):
    # "BERT masked language modelling attention transformer": terms bert, mask, languag,
    # model, attent, transform. Sentence 1.1 has attent+transform (2/6), 3.1 has bert, mask,
    # languag, model (4/6): only 3.1 passes 0.5; with min_coverage 0.3 both pass, BM25 orders.
    q = "BERT masked language modelling attention transformer"
    one = ExtractiveAnswerer().answer(q, ctx)
    assert one.citations == {3: "chunk-bert"}
    two = ExtractiveAnswerer(ExtractiveSettings(min_coverage=0.3)).answer(q, ctx)
    assert two.citations == {1: "chunk-attn", 3: "chunk-bert"}
    assert two.text.index("[3]") < two.text.index("[1]")
    assert len(parse_answer(two.text).sentences) == 2


class KeywordEmbedder:
    """A deterministic toy embedder: one dimension per keyword present."""

    keys = ("attention", "n-grams", "bert")

    def _vec(self, texts: list[str]) -> np.ndarray:
        v = np.array([[float(k in t.lower()) for k in self.keys] for t in texts]) + 1e-3
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    encode_queries = _vec
    encode_passages = _vec


def test_extractive_with_injected_embedder_ranks_by_cosine(ctx):
    a = ExtractiveAnswerer(embedder=KeywordEmbedder()).answer(
        "Which character n-grams lengths are extracted?", ctx
    )
    assert a.citations == {2: "chunk-ngram"}


def test_extractive_is_deterministic(ctx):
    q = {"a": "Which character n-gram lengths are extracted?", "b": "How hot is the sun?"}
    one = answer_all(ExtractiveAnswerer(), q, {"a": ctx, "b": ctx}, progress=False)
    two = answer_all(ExtractiveAnswerer(), q, {"a": ctx, "b": ctx}, progress=False)
    assert [x.text for x in one.values()] == [x.text for x in two.values()]
    assert one["b"].refused and not one["a"].refused


def test_answer_all_needs_a_context_for_every_question(ctx):
    with pytest.raises(ConfigError, match="no context"):
        answer_all(ExtractiveAnswerer(), {"a": "q", "b": "q"}, {"a": ctx}, progress=False)


# ----------------------------------------------------------------------------- LLM answerer


@pytest.fixture()
def server():
    reply = "Words are hashed into buckets [2]. The model uses attention [1][3]. Also [7]."
    with FakeLLMServer("openai", reply=reply, usage=(1000, 50)) as s:
        yield s


def _model(server, tmp_path, meter=None):
    settings = LLMSettings(openai_base_url=f"{server.url}/v1", max_attempts=1, timeout_s=5)
    keys = ApiKeys(openai=SecretStr("sk-local-" + secrets.token_hex(8)))
    cache = CompletionCache(tmp_path / "llm")
    return make_chat_model("gpt-4o-mini", settings, cache=cache, meter=meter, keys=keys), cache


def test_llm_answerer_sends_numbered_sources_and_maps_citations(server, tmp_path, ctx):
    meter = CostMeter()
    model, cache = _model(server, tmp_path, meter)
    a = LLMAnswerer(model, max_tokens=120).answer("How are n-grams stored?", ctx)
    body = server.bodies[0]
    assert body["temperature"] == 0 and body["max_tokens"] == 120
    user = body["messages"][1]["content"]
    assert "[2] (untitled) (arXiv:1607.04606, p. 3, section: Model)" in user
    assert "Question: How are n-grams stored?" in user
    assert a.citations == {1: "chunk-attn", 2: "chunk-ngram", 3: "chunk-bert"}
    assert a.unknown_citations == (7,)
    # gpt-4o-mini list price: 1000 * 0.15e-6 + 50 * 0.60e-6 = 0.00018 USD
    assert (a.tokens_in, a.tokens_out) == (1000, 50)
    assert a.cost_usd == pytest.approx(0.00018)
    assert not a.cached and not a.refused and a.answerer == "gpt-4o-mini"
    again = LLMAnswerer(model, max_tokens=120).answer("How are n-grams stored?", ctx)
    assert again.cached and again.text == a.text and server.requests == 1
    cache.close()


def test_llm_answerer_refusal(server, tmp_path, ctx):
    server.reply = REFUSAL
    model, cache = _model(server, tmp_path)
    a = LLMAnswerer(model).answer("What is the boiling point of mercury?", ctx)
    assert a.refused and a.citations == {}
    cache.close()
