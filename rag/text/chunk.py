"""Chunking: turn a parsed paper into retrievable chunks, by one of three strategies.

The paper's *chunkable text* (:func:`paper_text`) is its kept blocks joined with ``"\\n\\n"``;
every chunk records ``char_start``/``char_end`` into that text, so any chunk maps back to its
pages and section. Three strategies sit behind one :class:`Chunker` interface:

* ``fixed`` -- windows of ``max_tokens`` tokens of the embedding model's tokenizer, each starting
  ``max_tokens - overlap_tokens`` tokens after the previous one (the classic sliding window of
  early RAG systems, e.g. Lewis et al. 2020, "Retrieval-Augmented Generation", 100-word passages).
* ``sentence`` -- whole sentences packed greedily up to ``max_tokens``; optional overlap of whole
  sentences. Windows may cross sections but never cut a sentence (unless one sentence alone
  exceeds the cap, which is then cut at word boundaries).
* ``section`` -- like ``sentence`` but never crossing a section boundary; the section title is
  prefixed to the chunk text (``text == f"{section}\\n\\n" + slice``) unless the slice already
  starts with it, so every chunk of a long section still names its topic to the embedder.

Token counts use the tokenizer of the default embedder, all-MiniLM-L6-v2, without special tokens.
Its ``max_seq_length`` is 256 *including* ``[CLS]`` and ``[SEP]``, so the default cap is 254 content
tokens: a chunk is never truncated by the embedder. The default overlap of 32 tokens (1/8 of the
window) lets a sentence of up to ~32 tokens (a typical sentence in these papers is 20-35 tokens)
that straddles a window edge survive whole in the next window, at the price of ~14 % more chunks.
For the same reason ``sentence`` and ``section`` repeat one whole sentence by default
(``overlap_sentences=1``). On the 100-paper corpus and its 281 gold quotes, the fraction of
quotes intact in one chunk (fuzzy, ``rag.evaluation.evidence.contains``) rises from 0.89 to 0.99
(fixed), 0.95 to 0.99 (sentence) and 0.97 to 0.99 (section) with these overlaps; 0.996 of the
quotes lie in the chunkable text at all (the rest sit in footnotes).

Each paper is tokenised once; windows are cut from its token offsets, not re-tokenised per window.
Tokenizers live in :mod:`rag.text.tokenize`, sentences in :mod:`rag.text.sentences`, and corpus
chunking with its cache in :mod:`rag.text.chunk_cache`.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rag.errors import ChunkError
from rag.text.sentences import sentence_spans
from rag.text.tokenize import Tokenizer, Tokens, default_tokenizer
from rag.types import BlockKind, Chunk, ParsedPaper

logger = logging.getLogger(__name__)

#: Bumped whenever a change to this module changes the chunks it produces.
CHUNKER_VERSION = "2"
#: Bumped whenever the on-disk layout of saved chunks changes.
FORMAT_VERSION = "1"
#: The separator between blocks in the chunkable text.
BLOCK_SEP = "\n\n"

Strategy = Literal["fixed", "sentence", "section"]


# --------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------


class ChunkSettings(BaseModel):
    """Settings of the chunking stage (one strategy and its sizes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: Strategy = Field("fixed", description="fixed | sentence | section.")
    max_tokens: int = Field(
        254,
        ge=16,
        le=510,
        description="Token cap per chunk, embedder tokenizer, no special tokens. 254 = MiniLM's "
        "max_seq_length 256 minus [CLS] and [SEP].",
    )
    overlap_tokens: int = Field(
        32, ge=0, le=255, description="fixed: tokens shared by consecutive windows (<= max/2)."
    )
    overlap_sentences: int = Field(
        1, ge=0, le=8, description="sentence/section: whole sentences repeated in the next chunk."
    )
    prefix_section_title: bool = Field(
        True, description="section: prefix the section title to the chunk text."
    )
    include_references: bool = Field(False, description="Keep the references section.")
    include_captions: bool = Field(True, description="Keep figure/table captions.")
    include_footnotes: bool = Field(False, description="Keep footnotes.")
    index_hygiene: bool = Field(
        True,
        description="Index only chunks rag.text.hygiene labels body (tables of contents and stray "
        "reference lists stay out of the dense and BM25 indexes). Chunking itself is unchanged: "
        "not part of chunk ids or the chunk fingerprint.",
    )

    @model_validator(mode="after")
    def _check_overlap(self) -> ChunkSettings:
        if self.strategy == "fixed" and self.overlap_tokens * 2 > self.max_tokens:
            raise ValueError(
                f"overlap_tokens={self.overlap_tokens} is more than half of "
                f"max_tokens={self.max_tokens}; lower the overlap or raise max_tokens"
            )
        return self

    def params(self) -> dict[str, Any]:
        """The parameters that change this strategy's output (part of chunk ids).

        ``index_hygiene`` is not one: it chooses which chunks the index build keeps.
        """
        keys = ["max_tokens", "include_references", "include_captions", "include_footnotes"]
        if self.strategy == "fixed":
            keys.append("overlap_tokens")
        else:
            keys.append("overlap_sentences")
        if self.strategy == "section":
            keys.append("prefix_section_title")
        return {k: getattr(self, k) for k in sorted(keys)}


def chunk_settings(values: Mapping[str, Any] | ChunkSettings | None = None) -> ChunkSettings:
    """Validate chunking settings from a mapping (e.g. a params file): called once at each door
    (CLI, service config, notebook cells); the stages inside take the :class:`ChunkSettings`.

    Raises:
        ChunkError: naming the bad key and value (unknown strategy, sizes out of bounds, ...).
    """
    if isinstance(values, ChunkSettings):
        return values
    try:
        return ChunkSettings(**dict(values or {}))
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}={err.get('input')!r}: {err['msg']}"
            if err["loc"]
            else err["msg"]
            for err in e.errors()
        )
        raise ChunkError(
            f"bad chunking settings: {problems}. Valid strategies: fixed, sentence, section."
        ) from e


def require_settings(value: object, where: str) -> ChunkSettings:
    """``value`` if it is :class:`ChunkSettings` (``None``: the defaults), else a TypeError naming
    its type: stages take settings parsed once at the door, never a raw mapping."""
    if value is None or isinstance(value, ChunkSettings):
        return ChunkSettings() if value is None else value
    raise TypeError(f"{where} takes ChunkSettings, got {type(value).__name__} {value!r}; parse it "
                    "once at the door with rag.text.chunk.chunk_settings(...)")  # fmt: skip


# --------------------------------------------------------------------------------------------
# Chunkable text
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Span:
    """Where one block lies in the chunkable text: ``text[start:end]`` is the block's text."""

    start: int
    end: int
    page: int
    section: str
    kind: BlockKind


def _span_start(s: Span) -> int:
    return s.start


@dataclass(frozen=True, slots=True)
class PaperText:
    """A paper's chunkable text and the block spans that map characters to pages and sections."""

    paper_id: str
    text: str
    spans: tuple[Span, ...]

    def _overlapping(self, start: int, end: int) -> list[Span]:
        i = max(bisect.bisect_right(self.spans, start, key=_span_start) - 1, 0)
        out = []
        for s in self.spans[i:]:
            if s.start >= end:
                break
            if s.end > start:
                out.append(s)
        return out

    def locate(self, start: int, end: int) -> tuple[int, int, str]:
        """Page span and section of the char range ``[start, end)``.

        The section is the one covering the most characters of the range (earliest on ties).

        Raises:
            ChunkError: if the range is empty, out of bounds, or covers no block.
        """
        if not 0 <= start < end <= len(self.text):
            raise ChunkError(
                f"char range [{start}, {end}) is not inside the text of {self.paper_id} "
                f"(length {len(self.text)})"
            )
        spans = self._overlapping(start, end)
        if not spans:
            raise ChunkError(f"char range [{start}, {end}) of {self.paper_id} covers no block")
        cover: dict[str, int] = {}
        for s in spans:
            cover[s.section] = cover.get(s.section, 0) + min(end, s.end) - max(start, s.start)
        section = max(cover, key=lambda k: (cover[k], -list(cover).index(k)))
        return min(s.page for s in spans), max(s.page for s in spans), section


def paper_text(
    parsed: ParsedPaper,
    *,
    include_references: bool = False,
    include_captions: bool = True,
    include_footnotes: bool = False,
) -> PaperText:
    """The chunkable text of a parsed paper: kept blocks joined with ``"\\n\\n"``, with spans.

    ``header_footer`` blocks are always dropped; references (off by default), captions (on) and
    footnotes (off) follow the flags. A heading whose whole section was dropped goes too (the
    "References" title without its entries). Blocks are stripped; empty blocks are skipped.
    """
    drop: set[str] = {"header_footer"}
    if not include_references:
        drop.add("references")
    if not include_captions:
        drop.add("caption")
    if not include_footnotes:
        drop.add("footnote")
    blocks = [b for b in parsed.blocks if b.kind != "header_footer" and b.text.strip()]
    keep: list[bool] = []
    i = 0
    while i < len(blocks):
        j = i
        while j < len(blocks) and blocks[j].section == blocks[i].section:
            j += 1
        run = blocks[i:j]
        kept = [b.kind not in drop for b in run]
        orphan = not any(k and b.kind != "heading" for b, k in zip(run, kept, strict=True)) and any(
            not k for k in kept
        )
        keep.extend(k and not orphan for k in kept)
        i = j
    parts: list[str] = []
    spans: list[Span] = []
    pos = 0
    for b, k in zip(blocks, keep, strict=True):
        if not k:
            continue
        t = b.text.strip()
        if parts:
            pos += len(BLOCK_SEP)
        parts.append(t)
        spans.append(Span(pos, pos + len(t), b.page, b.section, b.kind))
        pos += len(t)
    return PaperText(parsed.paper_id, BLOCK_SEP.join(parts), tuple(spans))


# --------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------


class Chunker(Protocol):
    """Every strategy: ``chunk(paper_text, paper_id) -> list[Chunk]``, deterministic."""

    name: str
    settings: ChunkSettings

    def chunk(self, paper_text: PaperText, paper_id: str) -> list[Chunk]: ...


def chunk_id(paper_id: str, strategy: str, params: Mapping[str, Any], start: int, end: int) -> str:
    """Stable chunk id: sha1 of (paper id, strategy, parameters, offsets), 16 hex digits."""
    key = json.dumps(
        [paper_id, strategy, dict(sorted(params.items())), start, end], separators=(",", ":")
    )
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:16]


class _Base:
    name = "base"

    def __init__(self, settings: ChunkSettings, tokenizer: Tokenizer | None = None) -> None:
        if settings.strategy != self.name:
            raise ChunkError(
                f"settings.strategy={settings.strategy!r} given to the {self.name!r} chunker; "
                "build chunkers with make_chunker(settings)"
            )
        self.settings = settings
        self.tokenizer = tokenizer if tokenizer is not None else default_tokenizer()
        self._params = {**settings.params(), "tokenizer": self.tokenizer.name}

    def chunk(self, paper_text: PaperText, paper_id: str) -> list[Chunk]:
        if not paper_text.text:
            return []
        toks = self.tokenizer.encode(paper_text.text)
        pieces = self._pieces(paper_text, toks)
        texts = [prefix + paper_text.text[a:b] for a, b, prefix in pieces]
        # Token counts come from the paper's offsets (a prefix ends in "\n\n", a word
        # boundary); only slices cut inside a word are re-tokenised.
        n_prefix = self._prefix_counts({p for _, _, p in pieces})
        counts = [n_prefix[p] + toks.count(a, b) for a, b, p in pieces]
        dirty = [i for i, (a, b, _) in enumerate(pieces) if not toks.clean(a, b)]
        for i, n in zip(dirty, self.tokenizer.count([texts[i] for i in dirty]), strict=True):
            counts[i] = n
        out = []
        for (a, b, _), text, n in zip(pieces, texts, counts, strict=True):
            p0, p1, section = paper_text.locate(a, b)
            out.append(
                Chunk(
                    chunk_id=chunk_id(paper_id, self.name, self._params, a, b),
                    paper_id=paper_id,
                    strategy=self.name,
                    text=text,
                    section=section,
                    page_start=p0,
                    page_end=p1,
                    char_start=a,
                    char_end=b,
                    n_tokens=n,
                )
            )
        return out

    def _pieces(self, pt: PaperText, toks: Tokens) -> list[tuple[int, int, str]]:
        raise NotImplementedError

    def _prefix_counts(self, prefixes: Iterable[str]) -> dict[str, int]:
        todo = sorted(p for p in prefixes if p)
        return {"": 0, **dict(zip(todo, self.tokenizer.count(todo), strict=True))}


def _token_windows(
    toks: Tokens, lo: int, hi: int, size: int, overlap: int
) -> list[tuple[int, int]]:
    """Windows ``[i, j)`` over tokens ``lo..hi`` of at most ``size`` tokens, ``overlap`` shared.

    Cuts are moved back to the nearest word start so no window begins or ends inside a word;
    a single word longer than ``size`` tokens is cut hard. Consecutive windows share at least
    ``overlap`` tokens (more when the start is moved back to a word start).
    """
    out: list[tuple[int, int]] = []
    i = lo
    while i < hi:
        j = min(i + size, hi)
        if j < hi:
            k = j
            while k > i and not toks.word_start[k]:
                k -= 1
            j = k if k > i else j
        out.append((i, j))
        if j >= hi:
            break
        nxt = j - overlap
        k = nxt
        while k > i and not toks.word_start[k]:
            k -= 1
        if k <= i:
            k = nxt
            while k < j and not toks.word_start[k]:
                k += 1
        i = k if k > i else j
    return out


class FixedChunker(_Base):
    """Fixed windows of ``max_tokens`` tokens overlapping by ``overlap_tokens``, across blocks."""

    name = "fixed"

    def _pieces(self, pt: PaperText, toks: Tokens) -> list[tuple[int, int, str]]:
        s = self.settings
        wins = _token_windows(toks, 0, len(toks), s.max_tokens, s.overlap_tokens)
        return [(toks.starts[i], toks.ends[j - 1], "") for i, j in wins]


def _sentence_units(pt: PaperText, spans: Sequence[Span]) -> list[tuple[int, int]]:
    """Sentences of the given blocks; a block end always ends a sentence."""
    units: list[tuple[int, int]] = []
    for sp in spans:
        for a, b in sentence_spans(pt.text[sp.start : sp.end]):
            units.append((sp.start + a, sp.start + b))
    return units


def _pack(
    units: Sequence[tuple[int, int]], toks: Tokens, cap: int, overlap: int
) -> list[tuple[int, int]]:
    """Greedily pack consecutive sentences into char ranges of at most ``cap`` tokens.

    A sentence longer than ``cap`` becomes its own word-boundary token windows. With
    ``overlap`` > 0 the last ``overlap`` sentences of a chunk open the next one, as long as
    that still moves forward by at least one sentence and fits the cap.
    """
    out: list[tuple[int, int]] = []
    i, n = 0, len(units)
    while i < n:
        a = units[i][0]
        if toks.count(a, units[i][1]) > cap:
            lo = bisect.bisect_left(toks.starts, a)
            hi = bisect.bisect_right(toks.ends, units[i][1])
            for ti, tj in _token_windows(toks, lo, hi, cap, 0):
                out.append((toks.starts[ti], toks.ends[tj - 1]))
            i += 1
            continue
        j = i + 1
        while j < n and toks.count(a, units[j][1]) <= cap:
            j += 1
        out.append((a, units[j - 1][1]))
        if j >= n:
            break
        nxt = max(j - overlap, i + 1)
        # The overlapped sentences plus the next one must fit, else drop the overlap.
        while nxt < j and toks.count(units[nxt][0], units[j][1]) > cap:
            nxt += 1
        i = nxt
    return out


class SentenceChunker(_Base):
    """Whole sentences packed up to ``max_tokens``, optionally overlapping by whole sentences."""

    name = "sentence"

    def _pieces(self, pt: PaperText, toks: Tokens) -> list[tuple[int, int, str]]:
        s = self.settings
        units = _sentence_units(pt, pt.spans)
        return [(a, b, "") for a, b in _pack(units, toks, s.max_tokens, s.overlap_sentences)]


def _section_runs(spans: Sequence[Span]) -> list[list[Span]]:
    """Consecutive blocks of the same section (a section that reappears later is a new run)."""
    runs: list[list[Span]] = []
    for sp in spans:
        if runs and runs[-1][-1].section == sp.section:
            runs[-1].append(sp)
        else:
            runs.append([sp])
    return runs


class SectionChunker(_Base):
    """Sentence windows that never cross a section boundary and carry the section title.

    With ``prefix_section_title`` the chunk text is ``f"{section}\\n\\n" + slice`` (the cap
    counts the prefix), except when the slice already starts with the title (the chunk that
    holds the heading block) or the section is untitled ("" before the first heading). A section
    made only of headings (a parent title directly followed by its first subsection) gets no
    chunk of its own: it would be a few tokens of title and no content.
    """

    name = "section"

    def _pieces(self, pt: PaperText, toks: Tokens) -> list[tuple[int, int, str]]:
        s = self.settings
        out: list[tuple[int, int, str]] = []
        runs = _section_runs(pt.spans)
        prefixes = [
            f"{r[0].section.strip()}{BLOCK_SEP}" if s.prefix_section_title else "" for r in runs
        ]
        n_prefix = self._prefix_counts(prefixes)
        for run, prefix in zip(runs, prefixes, strict=True):
            if all(sp.kind == "heading" for sp in run):
                continue  # a bare title ("5 Results" right before "5.1 Setup") holds no content
            title = run[0].section.strip()
            prefix = prefix if title else ""
            cap = s.max_tokens - n_prefix[prefix]
            if cap < s.max_tokens // 2:
                # An absurdly long "title" is a parse error; do not let it eat the chunk.
                prefix, cap = "", s.max_tokens
            units = _sentence_units(pt, run)
            for a, b in _pack(units, toks, cap, s.overlap_sentences):
                p = "" if pt.text.startswith(title, a) else prefix
                out.append((a, b, p))
        return out


_CHUNKERS: dict[str, type[_Base]] = {
    c.name: c for c in (FixedChunker, SentenceChunker, SectionChunker)
}


def make_chunker(settings: ChunkSettings, tokenizer: Tokenizer | None = None) -> Chunker:
    """The chunker for ``settings.strategy`` (tokenizer defaults to the embedder's).

    Raises:
        TypeError: ``settings`` is not :class:`ChunkSettings` (see :func:`chunk_settings`).
    """
    s = require_settings(settings, "make_chunker")
    return _CHUNKERS[s.strategy](s, tokenizer)
