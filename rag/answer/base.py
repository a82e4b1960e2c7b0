"""The answer record, the one interface every answerer has, and how answerers take settings.

Every answerer answers ``answer(question, context) -> Answer`` (STYLE.md §6), so a notebook A/B
swaps only the answerer and one conformance test runs over all of them. :func:`make_answer`
parses an answer's text once and resolves its ``[n]`` citations against the context's sources.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

from rag.answer.claims import parse_answer
from rag.answer.context import Context
from rag.errors import ConfigError
from rag.llm.base import Completion


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer with its citations resolved to chunk ids and its usage.

    Attributes:
        citations: ``{n: chunk_id}`` for every cited number that is a source of the context.
        unknown_citations: cited numbers that are not sources (hallucinated ids).
        refused: the answer makes no claim and says the sources lack the answer
            (:attr:`rag.answer.claims.ParsedAnswer.status` == "refusal").
        prompt_version: the prompt / rule version that produced it.
        support: the judge's best p(supported) of the question's statement over the context's
            spans, where an answerer or gate computed it (None otherwise).
        trace: what the answerer decided and why (chosen span, gate decision, dropped sentences).
    """

    text: str
    citations: dict[int, str]
    answerer: str
    refused: bool
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    cached: bool = False
    unknown_citations: tuple[int, ...] = field(default_factory=tuple)
    prompt_version: str = ""
    support: float | None = None
    trace: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (citation keys become strings in JSON)."""
        return asdict(self)

    def usage(self) -> dict[str, Any]:
        """What producing it took (tokens in and out, cost, latency, cache state), as the
        keywords of :func:`make_answer`: an answer rebuilt from this one keeps them."""
        return {
            f: getattr(self, f)
            for f in ("tokens_in", "tokens_out", "cost_usd", "latency_s", "cached")
        }


def make_answer(text: str, context: Context, answerer: str, **usage: Any) -> Answer:
    """Parse ``text`` and resolve its ``[n]`` citations against ``context``."""
    parsed = parse_answer(text)
    cmap = context.citation_map
    cited = sorted({n for s in parsed.sentences for n in s.citations})
    return Answer(
        text=text,
        citations={n: cmap[n] for n in cited if n in cmap},
        answerer=answerer,
        refused=parsed.status == "refusal",
        unknown_citations=tuple(n for n in cited if n not in cmap),
        **usage,
    )


def answer_from_completion(
    c: Completion, context: Context, answerer: str, prompt_version: str, **extra: Any
) -> Answer:
    """:func:`make_answer` of a model's reply, with its tokens, cost, latency and cache state."""
    return make_answer(
        c.text.strip(),
        context,
        answerer,
        tokens_in=c.input_tokens,
        tokens_out=c.output_tokens,
        cost_usd=c.cost_usd,
        latency_s=c.latency_s,
        cached=c.cached,
        prompt_version=prompt_version,
        **extra,
    )


@runtime_checkable
class Answerer(Protocol):
    """Anything that answers a question from a context."""

    name: str

    def answer(self, question: str, context: Context) -> Answer: ...


S = TypeVar("S", bound=BaseModel)


def settings_with(cls: type[S], settings: S | None, overrides: Mapping[str, Any]) -> S:
    """``settings`` (default: ``cls()``) with keyword ``overrides`` applied, validated by ``cls``.

    Answerers take their typed settings object and/or its fields as keywords
    (``LLMAnswerer(chat, max_tokens=96)``); both pass through here, so bounds and the refusal of
    unknown keys hold either way.

    Raises:
        ConfigError: an unknown key or a value out of bounds, naming it.
    """
    values = {**(settings.model_dump() if settings is not None else {}), **overrides}
    try:
        return cls.model_validate(values)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}={err.get('input')!r}: {err['msg']}"
            for err in e.errors()
        )
        raise ConfigError(f"{cls.__name__}: {problems}") from e


__all__ = ["Answer", "Answerer", "make_answer", "settings_with"]
