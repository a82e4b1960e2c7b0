"""Every answerer built by name: one conformance test over all of them, typed settings that
refuse unknown keys, and ``build_answerers`` giving exactly what the hand-built answerers give."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from rag.answer.answerers import (
    ANSWERER_NAMES,
    LOCAL_VARIANTS,
    AnswerSettings,
    build_answerers,
    build_model_answerers,
    local_row,
    model_row,
)
from rag.answer.base import Answer, Answerer
from rag.answer.context import assemble_context
from rag.answer.extractive import ExtractiveAnswerer, ExtractiveSettings
from rag.answer.gate import GatedAnswerer, GateSettings
from rag.answer.llm import LLMAnswerer, LLMSettings
from rag.answer.prompts import REFUSAL
from rag.answer.quote import QuoteAnswerer, QuoteSettings
from rag.answer.support import support_spans
from rag.answer.support_extractive import SupportExtractiveAnswerer, SupportExtractiveSettings
from rag.errors import ConfigError
from rag.verdicts import ClaimJudge, Verdict
from tests.fakechat import FakeChatModel
from tests.test_answer_offline import TEXT1, TEXT2, OverlapJudge, hit


class GrammarChat(FakeChatModel):
    """The suite's fake model, also taking the grammar keywords a llama.cpp model takes."""

    supports_grammar = True

    def complete(self, messages, **kw):
        out = super().complete(
            messages, **{k: v for k, v in kw.items() if k not in ("grammar", "repeat_penalty")}
        )
        self.calls[-1].update({k: kw[k] for k in ("grammar", "repeat_penalty") if k in kw})
        return out


REPLY = "RoBERTa removes the next sentence prediction objective [2]."
QUESTIONS = [
    "Does RoBERTa remove the next sentence prediction objective?",
    "Which character n-gram lengths are extracted for every word?",
    "What is the boiling point of mercury?",
]
SETTINGS = AnswerSettings(
    support_threshold=0.5, local_max_tokens=64, constrained_max_tokens=48, repeat_penalty=1.3
)


@pytest.fixture()
def ctx():
    return assemble_context([hit("c1", 0.9, TEXT1), hit("c2", 0.8, TEXT2, paper="p2")])


def _built(chat=None):
    return build_answerers(ANSWERER_NAMES, SETTINGS, chat or GrammarChat(REPLY), OverlapJudge())


def test_judges_and_answerers_meet_their_protocols():
    assert isinstance(OverlapJudge(), ClaimJudge)
    for a in _built().values():
        assert isinstance(a, Answerer)


@pytest.mark.parametrize("name", ANSWERER_NAMES)
def test_conformance(name, ctx):
    chat = GrammarChat(REPLY, name="tiny")
    a = build_answerers([name], SETTINGS, chat, OverlapJudge())[name]
    assert a.name == ("local[tiny]" if name == "local" else name)
    for q in QUESTIONS:
        ans = a.answer(q, ctx)
        assert isinstance(ans, Answer) and ans.answerer == a.name
        assert set(ans.citations.items()) <= set(ctx.citation_map.items())
        assert ans.refused == (ans.text == REFUSAL)
        assert isinstance(ans.prompt_version, str) and isinstance(ans.trace, dict)
    if name.startswith("extractive"):
        assert chat.calls == []  # no model behind the extractive rows
    # nothing in the sources supports the mercury question: every judge-gated row declines it
    if name == "extractive" or name.endswith("+gate"):
        assert a.answer(QUESTIONS[2], ctx).refused


def test_the_stage_settings_reach_each_answerer(ctx):
    chat = GrammarChat(REPLY)
    built = _built(chat)
    assert built["local"].settings == LLMSettings(max_tokens=64)
    assert built["local+gbnf"].settings == LLMSettings(
        max_tokens=48, constrained=True, repeat_penalty=1.3
    )
    assert built["closed-book"].settings.closed_book and built["closed-book"].settings.constrained
    assert built["local+gbnf+gate"].threshold == 0.5 and built["extractive"].threshold == 0.5
    assert built["extractive-bm25"].settings == ExtractiveSettings()
    assert built["local+quote"].settings == QuoteSettings()
    built["local+gbnf"].answer(QUESTIONS[0], ctx)
    assert chat.calls[-1]["max_tokens"] == 48 and chat.calls[-1]["repeat_penalty"] == 1.3


def test_build_answerers_equals_the_hand_built_answerers(ctx):
    """What notebook 05 built by hand, row by row, and what one call builds answer alike."""
    judge = OverlapJudge()
    by_hand_chat, built_chat = GrammarChat(REPLY, name="tiny"), GrammarChat(REPLY, name="tiny")
    c = by_hand_chat
    gbnf = LLMAnswerer(c, max_tokens=48, constrained=True, repeat_penalty=1.3, name="local+gbnf")
    by_hand = {
        "extractive": SupportExtractiveAnswerer(judge, threshold=0.5),
        "extractive-bm25": ExtractiveAnswerer(name="extractive-bm25"),
        "local": LLMAnswerer(c, max_tokens=64, name="local[tiny]"),
        "local+gbnf": gbnf,
        "local+gbnf+gate": GatedAnswerer(gbnf, judge, threshold=0.5, name="local+gbnf+gate"),
        "local+quote": QuoteAnswerer(c, name="local+quote"),
        "local+quote+gate": GatedAnswerer(
            QuoteAnswerer(c, name="local+quote"), judge, threshold=0.5, name="local+quote+gate"
        ),
        "closed-book": LLMAnswerer(
            c, max_tokens=48, constrained=True, closed_book=True, repeat_penalty=1.3,
            name="closed-book",
        ),
    }  # fmt: skip
    built = build_answerers(list(by_hand), SETTINGS, built_chat, judge)
    assert list(built) == list(by_hand)

    def same(a: Answer) -> Answer:
        return dataclasses.replace(a, latency_s=0.0)

    for name in by_hand:
        for q in QUESTIONS:
            assert same(built[name].answer(q, ctx)) == same(by_hand[name].answer(q, ctx)), name
    assert built_chat.calls == by_hand_chat.calls and built_chat.calls


@pytest.mark.parametrize(
    "cls",
    [ExtractiveSettings, SupportExtractiveSettings, LLMSettings, QuoteSettings, GateSettings,
     AnswerSettings],
)  # fmt: skip
def test_typed_settings_refuse_unknown_keys(cls):
    with pytest.raises(ValidationError, match="max_token"):
        cls(max_token=5)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ExtractiveAnswerer(min_coverge=0.5),
        lambda: SupportExtractiveAnswerer(OverlapJudge(), treshold=0.5),
        lambda: LLMAnswerer(GrammarChat("x"), max_token=5),
        lambda: QuoteAnswerer(GrammarChat("x"), max_word=5),
        lambda: GatedAnswerer(ExtractiveAnswerer(), OverlapJudge(), treshold=0.5),
        lambda: LLMAnswerer(GrammarChat("x"), max_tokens=0),
        lambda: SupportExtractiveAnswerer(OverlapJudge(), threshold=1.5),
    ],
)
def test_answerer_keywords_are_validated_settings(make):
    with pytest.raises(ConfigError, match="Settings: "):
        make()


def test_build_answerers_errors_name_the_problem():
    with pytest.raises(ConfigError, match=r"'local\+gbnff'"):
        build_answerers(["local+gbnff"], SETTINGS, GrammarChat("x"), OverlapJudge())
    with pytest.raises(ConfigError, match="chat_model"):
        build_answerers(["local+quote"], SETTINGS, None, OverlapJudge())
    with pytest.raises(ConfigError, match="judge"):
        build_answerers(["local+gbnf+gate"], SETTINGS, GrammarChat("x"), None)
    with pytest.raises(ConfigError, match="more than once"):
        build_answerers(["local", "local"], SETTINGS, GrammarChat("x"), None)
    assert list(build_answerers(["extractive-bm25"])) == ["extractive-bm25"]  # needs neither
    assert [local_row(v) for v in LOCAL_VARIANTS] == list(ANSWERER_NAMES[2:7])
    with pytest.raises(ConfigError, match="'gbnf-gate'"):
        local_row("gbnf-gate")


class CountingJudge(OverlapJudge):
    def __init__(self, fingerprint: str, scale: float = 1.0):
        self.fingerprint, self.scale, self.calls = fingerprint, scale, 0

    def verdict(self, claim: str, premise: str) -> Verdict:
        self.calls += 1
        v = super().verdict(claim, premise)
        return dataclasses.replace(v, score=round(v.score * self.scale, 6))


def test_support_spans_are_memoised_by_the_judges_content(ctx):
    """Two judge objects with one fingerprint share scored spans; a judge of the same name but
    another fingerprint is asked itself (an object id would get both wrong after reuse)."""
    statement = "RoBERTa removes the next sentence prediction objective"
    first, twin = CountingJudge("overlap:memo-a"), CountingJudge("overlap:memo-a")
    spans = support_spans(first, statement, ctx)
    assert first.calls == len(spans) > 0
    assert support_spans(twin, statement, ctx) == spans and twin.calls == 0
    halved = CountingJudge("overlap:memo-a/2", scale=0.5)
    assert halved.name == first.name
    other = support_spans(halved, statement, ctx)
    assert halved.calls == len(spans)
    assert [s.score for s in other] == [round(s.score * 0.5, 6) for s in spans]


def test_more_models_run_the_same_variants_under_the_same_settings(ctx):
    """Each extra model gets the default model's rows, named "<row> [<model>]", answering as the
    default rows would with that model (same settings, same judge, same prompts)."""
    judge = OverlapJudge()
    other, again = GrammarChat(REPLY, name="other"), GrammarChat(REPLY, name="other")
    built, status = build_model_answerers(
        ["plain", "gbnf+gate"], {"gguf:m.gguf": other}, SETTINGS, judge
    )
    assert list(built) == ["local [gguf:m.gguf]", "local+gbnf+gate [gguf:m.gguf]"]
    assert status == dict.fromkeys(built, "run (gguf:m.gguf)")
    assert model_row("local+gbnf", "x") == "local+gbnf [x]"
    same = build_answerers(["local", "local+gbnf+gate"], SETTINGS, again, judge)
    for extra, default in zip(built.values(), same.values(), strict=True):
        for q in QUESTIONS:
            assert dataclasses.replace(extra.answer(q, ctx), latency_s=0.0) == dataclasses.replace(
                default.answer(q, ctx), latency_s=0.0
            )
    assert other.calls == again.calls and other.calls[-1]["repeat_penalty"] == 1.3
    assert build_model_answerers(["gbnf"], {}, SETTINGS, judge) == ({}, {})
    with pytest.raises(ConfigError, match="'gbnff'"):
        build_model_answerers(["gbnff"], {"m": other}, SETTINGS, judge)
    with pytest.raises(ConfigError, match="more than once"):
        build_model_answerers(["gbnf", "gbnf"], {"m": other}, SETTINGS, judge)
    with pytest.raises(ConfigError, match="judge"):
        build_model_answerers(["gbnf+gate"], {"m": other}, SETTINGS, None)


def test_an_endpoint_model_runs_only_the_plain_row(ctx):
    """A model without llama.cpp grammars (an Ollama endpoint) runs the plain row; its grammar
    rows are "not run" with the reason, never an error mid-report."""
    plain_only = FakeChatModel(REPLY, name="ollama")
    built, status = build_model_answerers(
        ["plain", "gbnf", "quote+gate"], {"ollama:qwen2.5:7b": plain_only}, SETTINGS, OverlapJudge()
    )
    assert list(built) == ["local [ollama:qwen2.5:7b]"]
    assert status["local [ollama:qwen2.5:7b]"] == "run (ollama:qwen2.5:7b)"
    for row in ("local+gbnf [ollama:qwen2.5:7b]", "local+quote+gate [ollama:qwen2.5:7b]"):
        assert status[row].startswith("not run: ") and "grammar" in status[row]
    built["local [ollama:qwen2.5:7b]"].answer(QUESTIONS[0], ctx)
    assert "grammar" not in plain_only.calls[-1]
