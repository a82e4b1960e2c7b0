"""The answerers by name, built from one stage settings object: what notebook 05 compares.

Every answerer has the same ``answer(question, context) -> Answer`` shape
(:class:`rag.answer.base.Answerer`), so a conformance test runs over all of them. Like
:func:`rag.retrieval.retrievers.build_retriever`, :func:`build_answerers` takes the stage's
settings (:class:`AnswerSettings`) and hands each answerer only its own typed settings.

=====================  ======================================================================
name                   answerer
=====================  ======================================================================
``extractive``         the shortest span the judge says supports the question (no model)
``extractive-bm25``    the best BM25 sentences of the sources (no model, no judge)
``local``              the chat model under the grounded prompt
``local+gbnf``         the same prompt decoded under the answer grammar
``local+gbnf+gate``    ``local+gbnf`` behind the judge's support gate
``local+quote``        the model may only copy whole cited source sentences
``local+quote+gate``   ``local+quote`` behind the support gate
``closed-book``        the chat model under the grammar with no sources (a baseline)
=====================  ======================================================================

More models behind the same local rows (:func:`build_model_answerers`) are named
``"<row> [<model>]"``, e.g. ``local+gbnf [local:qwen2.5-coder-0.5b]``, so the default model's rows
keep their names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from rag.answer.base import Answerer
from rag.answer.extractive import ExtractiveAnswerer, ExtractiveSettings
from rag.answer.gate import GatedAnswerer, GateSettings
from rag.answer.llm import LLMAnswerer, LLMSettings
from rag.answer.quote import QuoteAnswerer, QuoteSettings
from rag.answer.support import threshold_field
from rag.answer.support_extractive import SupportExtractiveAnswerer, SupportExtractiveSettings
from rag.errors import ConfigError
from rag.llm.base import ChatModel
from rag.verdicts import ClaimJudge

#: Names understood by :func:`build_answerers`, in the order notebook 05 shows them.
ANSWERER_NAMES = (
    "extractive",
    "extractive-bm25",
    "local",
    "local+gbnf",
    "local+gbnf+gate",
    "local+quote",
    "local+quote+gate",
    "closed-book",
)
#: Local-model variants as notebook parameters name them, and the answerer each one is.
LOCAL_VARIANTS = {
    "plain": "local",
    "gbnf": "local+gbnf",
    "gbnf+gate": "local+gbnf+gate",
    "quote": "local+quote",
    "quote+gate": "local+quote+gate",
}


class AnswerSettings(BaseModel):
    """Settings of the answer stage (one object, unknown keys refused); each answerer built by
    :func:`build_answerers` receives only its own part."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    support_threshold: float = threshold_field("the extractive answerer and the gates need")
    max_spans: int = Field(1, ge=1, le=3, description="Spans the extractive answerer copies.")
    local_max_tokens: int = Field(
        256, ge=1, le=32768, description="Token budget of the plain-prompt row (local)."
    )
    constrained_max_tokens: int = Field(
        256, ge=1, le=32768, description="Token budget of the grammar rows and closed book."
    )
    repeat_penalty: float = Field(
        1.2, ge=1.0, le=2.0, description="llama.cpp repeat penalty of the answer-grammar rows."
    )
    extractive_bm25: ExtractiveSettings = Field(
        default_factory=ExtractiveSettings, description="The BM25 extractive answerer."
    )
    quote: QuoteSettings = Field(
        default_factory=QuoteSettings, description="The quote-grammar answerer."
    )


def local_row(variant: str) -> str:
    """The answerer name of a local-model variant (:data:`LOCAL_VARIANTS`).

    Raises:
        ConfigError: an unknown variant, naming the known ones.
    """
    try:
        return LOCAL_VARIANTS[variant]
    except KeyError:
        raise ConfigError(
            f"local variant {variant!r}: choose from {list(LOCAL_VARIANTS)}"
        ) from None


def _need(name: str, **parts: object) -> None:
    missing = [k for k, v in parts.items() if v is None]
    if missing:
        raise ConfigError(f"answerer {name!r} needs {missing}; pass them to build_answerers")


def build_answerer(
    name: str,
    settings: AnswerSettings,
    chat_model: ChatModel | None,
    judge: ClaimJudge | None,
) -> Answerer:
    """Build one named answerer (one of :data:`ANSWERER_NAMES`).

    Raises:
        ConfigError: an unknown name, or a chat model or judge the answerer needs is missing.
    """
    s = settings
    gate = GateSettings(threshold=s.support_threshold)
    grammar = LLMSettings(
        max_tokens=s.constrained_max_tokens, constrained=True, repeat_penalty=s.repeat_penalty
    )
    if name == "extractive-bm25":
        return ExtractiveAnswerer(s.extractive_bm25, name=name)
    if name == "extractive":
        _need(name, judge=judge)
        ext = SupportExtractiveSettings(threshold=s.support_threshold, max_spans=s.max_spans)
        return SupportExtractiveAnswerer(judge, ext, name=name)  # type: ignore[arg-type]
    if name not in ANSWERER_NAMES:
        raise ConfigError(f"unknown answerer {name!r}; choose one of {list(ANSWERER_NAMES)}")
    _need(name, chat_model=chat_model)
    chat: ChatModel = chat_model  # type: ignore[assignment]
    if name == "local":
        plain = LLMSettings(max_tokens=s.local_max_tokens)
        return LLMAnswerer(chat, plain, name=f"local[{chat.name}]")
    if name == "closed-book":
        return LLMAnswerer(chat, grammar.model_copy(update={"closed_book": True}), name=name)
    if name.startswith("local+quote"):
        inner: Answerer = QuoteAnswerer(chat, s.quote, name="local+quote")
    else:
        inner = LLMAnswerer(chat, grammar, name="local+gbnf")
    if not name.endswith("+gate"):
        return inner
    _need(name, judge=judge)
    return GatedAnswerer(inner, judge, gate, name=name)  # type: ignore[arg-type]


def build_answerers(
    names: Sequence[str],
    settings: AnswerSettings | None = None,
    chat_model: ChatModel | None = None,
    judge: ClaimJudge | None = None,
) -> dict[str, Answerer]:
    """The named answerers ``{name: answerer}`` in the order of ``names``.

    Args:
        names: answerer names (:data:`ANSWERER_NAMES`).
        settings: the stage settings (defaults when None).
        chat_model: the injected model of the ``local*`` and ``closed-book`` rows.
        judge: the injected claim judge of ``extractive`` and the ``+gate`` rows.

    Raises:
        ConfigError: an unknown or repeated name, or a missing chat model or judge.
    """
    s = settings or AnswerSettings()
    dup = sorted({n for n in names if list(names).count(n) > 1})
    if dup:
        raise ConfigError(f"answerers {dup} named more than once; name each once")
    return {n: build_answerer(n, s, chat_model, judge) for n in names}


def model_row(row: str, model: str) -> str:
    """The name of a local ``row`` run by another ``model``: ``"local+gbnf [gguf:qwen.gguf]"``."""
    return f"{row} [{model}]"


def build_model_answerers(
    variants: Sequence[str],
    chat_models: Mapping[str, ChatModel],
    settings: AnswerSettings | None = None,
    judge: ClaimJudge | None = None,
) -> tuple[dict[str, Answerer], dict[str, str]]:
    """The local ``variants`` (:data:`LOCAL_VARIANTS`) once per model, same settings and judge.

    Every variant but ``plain`` decodes under a llama.cpp grammar, so it runs only on a model
    whose ``supports_grammar`` is true (``local:`` and ``gguf:`` models); on any other (an
    Ollama or OpenAI-compatible endpoint, an API) its row is "not run" with the reason.

    Args:
        variants: local variants, e.g. ``["plain", "gbnf", "gbnf+gate"]``.
        chat_models: ``{model label: chat model}``; the label goes into the row name
            (:func:`model_row`).
        settings: the stage settings (defaults when None), shared with the default model's rows.
        judge: the claim judge of the ``+gate`` rows.

    Returns:
        ``({row: answerer}, {row: "run (<label>)" | "not run: <reason>"})`` over every model and
        variant, in that order.

    Raises:
        ConfigError: an unknown or repeated variant, or a ``+gate`` variant without a judge.
    """
    rows = {v: local_row(v) for v in variants}
    dup = sorted({v for v in variants if list(variants).count(v) > 1})
    if dup:
        raise ConfigError(f"local variants {dup} named more than once; name each once")
    s = settings or AnswerSettings()
    built: dict[str, Answerer] = {}
    status: dict[str, str] = {}
    for label, chat in chat_models.items():
        grammar = bool(getattr(chat, "supports_grammar", False))
        for variant, row in rows.items():
            name = model_row(row, label)
            if variant != "plain" and not grammar:
                status[name] = (
                    f"not run: {variant} decodes under a llama.cpp grammar, which {label} does "
                    "not take (local: and gguf: models do)"
                )
                continue
            built[name] = build_answerer(row, s, chat, judge)
            status[name] = f"run ({label})"
    return built, status


__all__ = [
    "ANSWERER_NAMES",
    "LOCAL_VARIANTS",
    "AnswerSettings",
    "build_answerer",
    "build_answerers",
    "build_model_answerers",
    "local_row",
    "model_row",
]
