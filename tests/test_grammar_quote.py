"""The quote grammar and its answerer, the yes/no rule of both grammars, and GBNF escaping.

Which strings a grammar accepts is decided by llama.cpp itself: :func:`accepts` loads only the
SmolLM2 vocabulary (no weights, ~0.1 s), feeds the string's tokens through llama.cpp's grammar
sampler one by one and then asks whether end-of-text is allowed. So "the grammar's language is
exactly these answers" is checked against the engine that decodes under it, not against a
re-implementation of GBNF.
"""

from __future__ import annotations

import ctypes
import math
import re

import pytest

from rag.answer.base import make_answer
from rag.answer.claims import parse_answer
from rag.answer.context import assemble_context
from rag.answer.gate import GatedAnswerer
from rag.answer.grammar import answer_grammar, gbnf_literal, quote_grammar
from rag.answer.prompts import QUOTE_VERSION, REFUSAL
from rag.answer.quote import QuoteAnswerer, quote_candidates
from rag.errors import ConfigError
from rag.types import Hit
from tests.fakechat import FakeChatModel
from tests.test_answer_offline import OverlapJudge


@pytest.fixture(scope="module")
def vocab_model():
    import llama_cpp

    from rag.llm.local import find_gguf

    return llama_cpp.Llama(model_path=str(find_gguf()), vocab_only=True, verbose=False)


@pytest.fixture()
def accepts(vocab_model):
    """``accepts(gbnf, text)``: does llama.cpp's grammar sampler let the model write ``text``
    and then stop?"""
    import llama_cpp

    llm = vocab_model
    eos = llm.token_eos()

    def _accepts(gbnf: str, text: str) -> bool:
        g = llama_cpp.llama_sampler_init_grammar(llm._model.vocab, gbnf.encode(), b"root")
        assert g, f"llama.cpp rejected the grammar:\n{gbnf}"
        try:
            for t in [*llm.tokenize(text.encode(), add_bos=False, special=False), eos]:
                one = (llama_cpp.llama_token_data * 1)()
                one[0].id, one[0].logit, one[0].p = t, 1.0, 0.0
                arr = llama_cpp.llama_token_data_array(data=one, size=1, selected=-1, sorted=False)
                llama_cpp.llama_sampler_apply(g, ctypes.byref(arr))
                if not math.isfinite(one[0].logit):
                    return False
                if t != eos:
                    llama_cpp.llama_sampler_accept(g, t)
            return True
        finally:
            llama_cpp.llama_sampler_free(g)

    return _accepts


def hit(cid, score, text, paper="p1"):
    return Hit(chunk_id=cid, paper_id=paper, page=1, section="", text=text, score=score)


# ----------------------------------------------------------------------------- escaping

NASTY = 'say "hi" \\ back\\slash [1] tab\tnl\nbs\b ff\f café — “q” 𝐀 ﬁ \u00ad'


def test_gbnf_literal_is_ascii_with_code_point_escapes():
    lit = gbnf_literal('a"b\\c\n\u2026\U0001d400\x07\u00e9[]')
    assert lit == r'"a\"b\\c\n\u2026\U0001D400\x07\xE9[]"'
    assert lit.isascii()
    for bad in ("a\x00b", "a\ud835b"):  # NUL and a lone surrogate: nothing can match them
        with pytest.raises(ConfigError, match="U\\+"):
            gbnf_literal(bad)


def test_gbnf_literal_matches_exactly_its_text_in_llama_cpp(accepts):
    # JSON escaping writes \b, \f and UTF-16 surrogate pairs, which
    # llama.cpp rejects or reads as two bogus code points; this text holds all three.
    g = f"root ::= {gbnf_literal(NASTY)}\n"
    assert accepts(g, NASTY)
    assert not accepts(g, NASTY + " ")
    assert not accepts(g, NASTY.replace("𝐀", "A"))


# ----------------------------------------------------------------------------- yes/no


def test_yes_no_grammar_has_no_refusal_branch(accepts):
    yn = answer_grammar([1, 2], refusal=REFUSAL, yes_no=True)
    assert yn.startswith("root ::= answer\n") and "refusal" not in yn
    assert accepts(yn, "No, it removes the objective entirely [2].")
    assert not accepts(yn, REFUSAL)
    assert not accepts(yn, "It removes the objective entirely [2].")  # no Yes/No first
    other = answer_grammar([1, 2], refusal=REFUSAL)  # not yes/no: unchanged, refusal allowed
    assert accepts(other, REFUSAL) and accepts(other, "It removes the objective entirely [2].")


# ----------------------------------------------------------------------------- quote grammar

QUOTES = [("A is b", 1), ("C “is” d \\ 𝐀", 2), ("E é f", 2)]


def test_quote_grammar_language_is_ordered_distinct_cited_quotes_or_the_refusal(accepts):
    g = quote_grammar(QUOTES, refusal=REFUSAL, max_sentences=2)
    yes = ["A is b [1].", "C “is” d \\ 𝐀 [2].", "A is b [1]. E é f [2].", REFUSAL]
    no = [
        "E é f [2]. A is b [1].",  # out of prompt order
        "A is b [1]. A is b [1].",  # a repeated sentence
        "A is b [1]. C “is” d \\ 𝐀 [2]. E é f [2].",  # three > max_sentences
        "A is b [2].",  # cited to a source it does not come from
        "A is b [1]",  # no closing period
        "A is [1].",  # not the whole quote
        "Yes, A is b [1].",
    ]
    assert all(accepts(g, s) for s in yes), [s for s in yes if not accepts(g, s)]
    assert not any(accepts(g, s) for s in no), [s for s in no if accepts(g, s)]


def test_quote_grammar_yes_no_and_no_quotes(accepts):
    g = quote_grammar(QUOTES, refusal=REFUSAL, max_sentences=1, yes_no=True)
    assert accepts(g, "Yes, E é f [2].") and accepts(g, "No, A is b [1].")
    assert not accepts(g, REFUSAL) and not accepts(g, "A is b [1].")
    assert not accepts(g, "No, A is b [1]. E é f [2].")  # max_sentences=1
    empty = quote_grammar([], refusal=REFUSAL, yes_no=True)
    assert accepts(empty, REFUSAL) and not accepts(empty, "Yes, A is b [1].")


def test_quote_grammar_size_is_linear_in_quotes():
    g = quote_grammar([(f"Sentence number {i} here", 1) for i in range(60)], refusal=REFUSAL,
                      max_sentences=3)  # fmt: skip
    assert len(g.splitlines()) == 2 + 1 + 60 + 3 * 60


@pytest.mark.parametrize(
    "kw",
    [
        {"max_sentences": 0},
        {"max_sentences": 6},
        {"refusal": " "},
        {"quotes": [("x", 0)]},
        {"quotes": [(" ", 1)]},
    ],  # fmt: skip
)
def test_quote_grammar_bounds_are_config_errors(kw):
    args = {"quotes": QUOTES, "refusal": REFUSAL} | kw
    with pytest.raises(ConfigError):
        quote_grammar(args.pop("quotes"), **args)


# ----------------------------------------------------------------------------- candidates

CHUNK1 = (
    "subword units, as shown below. We extract all character n-grams with lengths from 3 to 6 "
    "[12, 14]. 2 Related work Morphological word representations are old. Is this a question? "
    "The vectors are trained on Wikipedia dumps in nine languages, a choice that lets the "
    "evaluation cover languages with rich morphology such as Czech, German and Russian as well "
    "as English, French, Italian, Spanish, Arabic and Swedish overall. Short one. The model "
    "then learns a vector for"
)
CHUNK2 = "We extract all character n-grams with lengths from 3 to 6. It uses “dynamic”\x0cmasking."


@pytest.fixture()
def ctx():
    return assemble_context([hit("c1", 0.9, CHUNK1), hit("c2", 0.8, CHUNK2, paper="p2")])


def test_quote_candidates_offer_whole_cited_sentences_only(ctx):
    quotes, counts = quote_candidates(ctx, max_words=20)
    assert [(q.n, q.text) for q in quotes] == [
        (1, "We extract all character n-grams with lengths from 3 to 6"),  # paper's [12, 14] gone
        (1, "The vectors are trained on Wikipedia dumps in nine languages, a choice that lets "
            "the evaluation cover languages with rich …"),  # cut after 20 words
        (2, "It uses “dynamic” masking"),  # form feed became a space
    ]  # fmt: skip
    # dropped: the lowercase chunk head, the "2 Related work" heading, the question, a
    # 2-word sentence, the chunk tail without a period, and chunk 2's duplicate of a chunk-1 quote
    assert counts == {"sentences": 9, "offered": 3, "truncated": 1, "over_cap": 0}
    assert [q.truncated for q in quotes] == [False, True, False]
    for q in quotes:
        (s,) = parse_answer(f"{q.text} [{q.n}].").sentences
        assert s.citations == (q.n,) and s.claims and not s.refusal
    capped, c2 = quote_candidates(ctx, max_words=20, max_quotes=2)
    assert len(capped) == 2 and c2["over_cap"] == 1


# ----------------------------------------------------------------------------- answerer


class Recording(FakeChatModel):
    def __init__(self, reply):
        super().__init__(reply)
        self.kw: list[dict] = []

    def complete(self, messages, **kw):
        self.kw.append(kw)
        keep = {k: v for k, v in kw.items() if k in ("temperature", "max_tokens", "prompt_version")}
        return super().complete(messages, **keep)


def test_quote_answerer_sends_the_quote_grammar_and_a_budget_no_quote_can_exceed(ctx):
    chat = Recording("It uses “dynamic” masking [2].")
    a = QuoteAnswerer(chat, max_words=20).answer("What masking does it use?", ctx)
    (kw,) = chat.kw
    assert kw["prompt_version"] == QUOTE_VERSION == a.prompt_version
    assert kw["grammar"] == quote_grammar(
        [(q.text, q.n) for q in quote_candidates(ctx, max_words=20)[0]], refusal=REFUSAL,
        max_sentences=2,
    )  # fmt: skip
    # the two longest "text [n]." in UTF-8 bytes, a space for each, one spare token
    lengths = sorted(
        len(f"{q.text} [{q.n}].".encode()) for q in quote_candidates(ctx, max_words=20)[0]
    )
    assert kw["max_tokens"] == lengths[-1] + lengths[-2] + 2 + 1
    assert kw["repeat_penalty"] == 1.0 and kw["temperature"] == 0.0
    assert a.citations == {2: "c2"} and not a.refused
    assert a.trace["quotes"]["offered"] == 3 and a.trace["yes_no_question"] is False


def test_quote_answerer_yes_no_grammar_and_no_quote_declines_without_a_call(ctx):
    chat = Recording("No, It uses “dynamic” masking [2].")
    QuoteAnswerer(chat).answer("Does it use static masking?", ctx)
    assert chat.kw[0]["grammar"].startswith("root ::= answer\n")
    assert '("Yes, " | "No, ")' in chat.kw[0]["grammar"]
    bare = assemble_context([hit("c9", 0.5, "a table 1 2 3")])
    a = QuoteAnswerer(chat).answer("What masking?", bare)
    assert a.refused and len(chat.kw) == 1
    assert a.trace["decision"] == "declined: no source sentence to quote"


def test_gate_around_the_quote_answerer(ctx):
    chat = Recording("We extract all character n-grams with lengths from 3 to 6 [1].")
    gated = GatedAnswerer(QuoteAnswerer(chat), OverlapJudge(), name="local+quote+gate")
    assert gated.answer("What optimizer schedules are used?", ctx).refused and chat.kw == []
    a = gated.answer("Which character n-grams lengths are extracted?", ctx)
    assert a.citations == {1: "c1"} and a.prompt_version == f"gate+{QUOTE_VERSION}"


@pytest.mark.parametrize("kw", [{"max_sentences": 0}, {"max_words": 4}, {"min_words": 0},
                                {"max_quotes": 0}, {"repeat_penalty": 0.5}])  # fmt: skip
def test_quote_answerer_bounds(kw):
    with pytest.raises(ConfigError):
        QuoteAnswerer(FakeChatModel("x"), **kw)


@pytest.mark.slow
def test_real_smollm2_quotes_a_source_sentence_verbatim_or_refuses(ctx):
    from rag.llm.factory import make_chat_model

    chat = make_chat_model("smollm2-135m")
    qa = QuoteAnswerer(chat, max_words=20)
    offered = {f"{q.text} [{q.n}]." for q in quote_candidates(ctx, max_words=20)[0]}
    for question in ("Which n-gram lengths are extracted?", "Does it use dynamic masking?"):
        a = qa.answer(question, ctx)
        body = a.text.removeprefix("Yes, ").removeprefix("No, ")
        if question.startswith("Does"):
            assert a.text.startswith(("Yes, ", "No, ")), a.text
        if not a.refused:
            sentences = re.findall(r".+? \[\d+\]\.(?= |$)", body)
            assert sentences and set(s.strip() for s in sentences) <= offered, a.text
            assert make_answer(a.text, ctx, "x").citations == a.citations
