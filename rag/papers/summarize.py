"""Paper summaries: an extractive, section-aware summary offline, an LLM summary on request,
every sentence judged against the paper.

**Input.** The paper's body sentences (:func:`body_sentences`): body blocks of the sections
between the abstract and the references, each section's text cut by the project's one splitter
(:func:`rag.text.sentences.split_sentences`, ``"paper"`` mode). The front matter (title,
authors), the abstract, captions, footnotes, the references and everything after them
(acknowledgements, appendices) are left out, so a summary never copies the abstract and the
abstract can serve as the reference a summary is measured against. Sentences shorter than
:data:`MIN_WORDS` or longer than :data:`MAX_WORDS` words, or mostly symbols (equations, tables
flattened into text), are dropped.

**Sections.** Each top-level heading gets a role by its words (:func:`section_role`):
``intro``, ``method``, ``results`` or ``conclusion``; related work and background get
``related`` and are not summarised (they describe other papers).

**Extractive** (:func:`extractive`): centroid summarisation (Radev et al., 2004, MEAD): a
sentence's centrality is the cosine of its MiniLM vector to the mean vector of all input
sentences. The summary takes the most central sentence of each role present (most central role
first when there are fewer slots than roles), then the most central of the rest, skipping any
sentence whose cosine to one already taken exceeds :data:`REDUNDANCY` (the redundancy test of
MMR, Carbonell & Goldstein 1998) or that would overrun the word budget; the chosen sentences are
given in document order. **Lead** (:func:`lead`): the first sentences of the same input, under
the same budget — the baseline every extractive summariser is compared with.

**LLM** (:func:`llm_summary`): a chat model writes the summary from the extractive selection of
:data:`LLM_INPUT_PER_ROLE` sentences per role, grouped under their section headings; the model
comes from :mod:`rag.llm`, whose wrapper caches and meters the call.

**Judged** (:func:`judge_sentences`): each summary sentence is labelled by a claim judge (the
pinned offline judge by default) against its evidence: the :data:`EVIDENCE_K` input sentences
most similar to it, each with its neighbours, in document order. An extracted sentence is among
its own evidence, so its verdict checks the judge more than the summary; an LLM sentence is
checked for real.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rag.errors import ConfigError, ParseError
from rag.llm.errors import UnusableReply
from rag.llm.model import complete_checked
from rag.text.sentences import split_sentences
from rag.types import ParsedPaper
from rag.verdicts import VERDICT_LABELS, ClaimJudge, Verdict

if TYPE_CHECKING:
    from rag.index.embed import Embedder
    from rag.llm.base import ChatModel

#: Bump when the selection, the input or the output record changes.
SUMMARY_VERSION = "summary-v1"
#: Prompt version of the LLM summary (part of the completion cache key).
PROMPT_VERSION = "paper-summary-v1"
#: Roles summarised, in the order a paper tells them.
ROLES = ("intro", "method", "results", "conclusion")
#: Input sentences shorter or longer than this many words are dropped.
MIN_WORDS, MAX_WORDS = 8, 60
#: A sentence whose cosine to one already chosen exceeds this repeats it and is skipped.
REDUNDANCY = 0.85
#: Evidence sentences per judged summary sentence (each with its two neighbours).
EVIDENCE_K = 3
#: Sentences per role handed to the LLM.
LLM_INPUT_PER_ROLE = 4
#: Default summary size: sentences and a word budget near a typical abstract's length.
DEFAULT_SENTENCES, DEFAULT_MAX_WORDS = 6, 160

_NUMBERING = re.compile(r"^\s*(?:[IVXLC]+|\d+|[A-Z])(?:\.\d+)*\.?\s+")
_SUBSECTION = re.compile(r"^\s*(?:\d+|[IVXLC]+|[A-Z])\.\d")
_ROMAN = re.compile(r"^\s*[IVXLC]+\.\s")
_LETTERED = re.compile(r"^\s*[A-Z][.)]\s")
_STOP = re.compile(
    r"\b(references|bibliography|acknowledge?ments?|appendix|appendices|supplementary)\b", re.I
)
_ROLE_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("related", re.compile(r"related work|background|prior work|previous work|literature", re.I)),
    ("intro", re.compile(r"introduction|motivation|overview", re.I)),
    ("conclusion", re.compile(r"conclu|discussion|summary|future work|limitation|outlook", re.I)),
    ("results", re.compile(r"experiment|result|evaluat|analys|ablation|benchmark|empirical|"
                           r"performance|comparison|case stud|findings", re.I)),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Sentence:
    """One input sentence of a paper.

    Attributes:
        index: position among the paper's input sentences (document order).
        text: the sentence.
        section: the heading of the section it is in.
        role: the role of its top-level section (:data:`ROLES` or ``related``).
        page: 1-based page its first character is on.
    """

    index: int
    text: str
    section: str
    role: str
    page: int

    @property
    def words(self) -> int:
        return len(self.text.split())


def section_role(heading: str) -> str:
    """The role of a top-level section from its heading's words; ``method`` when none match.

    >>> section_role("5 Experimental Results"), section_role("II. RELATED WORK")
    ('results', 'related')
    """
    name = _NUMBERING.sub("", heading)
    for role, pattern in _ROLE_WORDS:
        if pattern.search(name):
            return role
    return "method"


def is_abstract(heading: str) -> bool:
    """Whether a section heading is the abstract's."""
    return _NUMBERING.sub("", heading).strip().lower().rstrip(".:") == "abstract"


def abstract_text(parsed: ParsedPaper) -> str:
    """The abstract: the body of the section headed "Abstract", else a front-matter paragraph
    opening with "Abstract" (IEEE's "Abstract—…"); "" when the paper has neither."""
    body = [b.text for b in parsed.blocks if b.kind == "body" and is_abstract(b.section)]
    if body:
        return " ".join(body).strip()
    for b in parsed.blocks:
        if b.section:
            break
        m = re.match(r"\s*abstract\s*[-—–:.]?\s*", b.text, re.I)
        if b.kind == "body" and m and len(b.text.split()) > 20:
            return b.text[m.end() :].strip()
    return ""


def _usable(text: str) -> bool:
    words = text.split()
    if not MIN_WORDS <= len(words) <= MAX_WORDS:
        return False
    letters = sum(c.isalpha() for c in text)
    return letters >= 0.6 * len(text.replace(" ", "")) and text[0].isupper()


def body_sentences(parsed: ParsedPaper) -> list[Sentence]:
    """The paper's input sentences in document order (see the module docstring for what is left
    out and why)."""
    sections: list[tuple[str, str, list[tuple[int, str]]]] = []  # heading, role, (page, text)
    role, top = "", ""
    for b in parsed.blocks:
        if b.kind == "references" or (b.kind == "heading" and _STOP.search(b.section)):
            break
        if not b.section or is_abstract(b.section):
            continue
        if not sections or sections[-1][0] != b.section:
            sub = _SUBSECTION.match(b.section) or (_ROMAN.match(top) and _LETTERED.match(b.section))
            if not sub or not role:
                role, top = section_role(b.section), b.section
            sections.append((b.section, role, []))
        if b.kind == "body" and b.text.strip():
            sections[-1][2].append((b.page, b.text.strip()))
    out: list[Sentence] = []
    for heading, role, blocks in sections:
        if role == "related" or not blocks:
            continue
        text, starts = "", []
        for page, t in blocks:
            starts.append((len(text), page))
            text += t + " "
        pos = 0
        for s in split_sentences(text, mode="paper"):
            at = text.find(s, pos)
            pos = at + len(s) if at >= 0 else pos
            page = max((p for start, p in starts if start <= max(at, 0)), default=blocks[0][0])
            if _usable(s):
                out.append(Sentence(len(out), s, heading, role, page))
    return out


def sentence_vectors(sentences: Sequence[Sentence], embedder: Embedder) -> np.ndarray:
    """Unit vectors of the sentences through the project's embedding cache."""
    from rag.index.embed_cache import embed_texts

    texts = [s.text for s in sentences]
    return embed_texts([f"summary:{i}" for i in range(len(texts))], texts, embedder,
                       show_progress=False)  # fmt: skip


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n else v


def extractive(
    sentences: Sequence[Sentence], vectors: np.ndarray, n: int, max_words: int
) -> list[Sentence]:
    """The centroid summary of ``sentences``: at most ``n`` sentences and ``max_words`` words,
    at least one per role while slots last, in document order (module docstring)."""
    if not sentences:
        return []
    central = vectors @ _unit(vectors.mean(axis=0))
    order = sorted(range(len(sentences)), key=lambda i: (-float(central[i]), i))
    best_of_role: dict[str, int] = {}
    for i in order:
        best_of_role.setdefault(sentences[i].role, i)
    firsts = sorted(best_of_role.values(), key=lambda i: (-float(central[i]), i))
    chosen: list[int] = []
    words = 0
    for i in [*firsts, *order]:
        if len(chosen) >= n:
            break
        if i in chosen or words + sentences[i].words > max_words:
            continue
        if chosen and float(np.max(vectors[chosen] @ vectors[i])) > REDUNDANCY:
            continue
        chosen.append(i)
        words += sentences[i].words
    return [sentences[i] for i in sorted(chosen)]


def lead(sentences: Sequence[Sentence], n: int, max_words: int) -> list[Sentence]:
    """The first input sentences, at most ``n`` and ``max_words`` words (the lead baseline)."""
    out: list[Sentence] = []
    words = 0
    for s in sentences:
        if len(out) >= n:
            break
        if words + s.words <= max_words:
            out.append(s)
            words += s.words
    return out


def evidence(
    claim_vectors: np.ndarray, sentences: Sequence[Sentence], vectors: np.ndarray
) -> list[list[int]]:
    """For each claim, the indices of its evidence sentences in document order: the
    :data:`EVIDENCE_K` input sentences nearest to it by cosine, each with its neighbours."""
    out = []
    for sims in claim_vectors @ vectors.T:
        top = np.argsort(-sims, kind="stable")[:EVIDENCE_K]
        keep = {j for i in top for j in (i - 1, i, i + 1) if 0 <= j < len(sentences)}
        out.append(sorted(int(j) for j in keep))
    return out


def judge_sentences(judge: ClaimJudge, claims: Sequence[str], contexts: Sequence[str]) -> list:
    """Verdicts on ``claims`` against their ``contexts``, batched when the judge can batch."""
    predict = getattr(judge, "predict", None)
    pairs = list(zip(claims, contexts, strict=True))
    if callable(predict):
        return list(predict(pairs))
    return [judge.verdict(c, ctx) for c, ctx in pairs]


@functools.cache
def default_judge() -> ClaimJudge:
    """The report's offline judge (the pinned ``data/judge/`` one), loaded once per process."""
    from rag.judge.offline import DEFAULT_JUDGE, make_offline_judge

    return make_offline_judge(DEFAULT_JUDGE)


@functools.cache
def default_embedder() -> Embedder:
    """The default judge's own embedder (fp32 MiniLM), so the sentence vectors and the judge's
    context vectors are one set in the embedding cache; the packaged MiniLM for another judge."""
    from rag.index.embed import minilm

    return getattr(default_judge(), "embedder", None) or minilm()


def _prompt(title: str, picked: Sequence[Sentence], n: int) -> list[dict[str, str]]:
    lines, heading = [], None
    for s in picked:
        if s.section != heading:
            lines.append(f"\n## {s.section}")
            heading = s.section
        lines.append(s.text)
    system = (
        "You summarise a research paper for a researcher. Use only facts stated in the sentences "
        "given; do not add numbers, names or claims that are not there. Write plain prose, no "
        "lists, no headings, no citations."
    )
    user = (
        f"Paper: {title}\n\nSentences from its sections:\n" + "\n".join(lines).strip()
        + f"\n\nWrite a summary of the paper in at most {n} sentences."
    )  # fmt: skip
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def llm_summary(
    chat_model: ChatModel,
    title: str,
    sentences: Sequence[Sentence],
    vectors: np.ndarray,
    n: int,
) -> tuple[list[str], dict[str, Any]]:
    """The chat model's summary sentences and the call's record (model, tokens, cost, cached).

    Of the reply, headings, repeated sentences and a sentence cut off by the token limit are
    dropped, and at most ``n`` sentences are kept.

    Raises:
        UnusableReply: the model returned no sentence (that reply is not cached).
    """
    picked = extractive(sentences, vectors, LLM_INPUT_PER_ROLE * len(ROLES), 10**9)

    def parse(text: str) -> list[str]:
        out: list[str] = []
        prose = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
        for s in split_sentences(prose, mode="answer"):
            if len(s.split()) >= 3 and s not in out and s[-1] in ".!?\"')" and len(out) < n:
                out.append(s)
        if not out:
            raise UnusableReply(chat_model.name, "no summary sentence", text)
        return out

    # the parser runs before the reply is cached: a reply without a sentence is never stored
    c = complete_checked(
        chat_model,
        _prompt(title, picked, n),
        parse,
        max_tokens=48 * n + 32,
        prompt_version=PROMPT_VERSION,
    )
    out = parse(c.text)
    call = {"model": c.model, "provider": c.provider, "input_tokens": c.input_tokens,
            "output_tokens": c.output_tokens, "cost_usd": c.cost_usd, "cached": c.cached,
            "input_sentences": len(picked)}  # fmt: skip
    return out, call


def _verdict_dict(v: Verdict) -> dict[str, Any]:
    return {"label": v.label, "score": round(float(v.score), 6), "reason": v.reason}


def judged_record(
    claims: Sequence[str],
    sentences: Sequence[Sentence],
    vectors: np.ndarray,
    claim_vectors: np.ndarray,
    judge: ClaimJudge,
) -> list[dict[str, Any]]:
    """One record per claim: its text, the section and page of its nearest input sentence, and
    the judge's verdict against its evidence."""
    ev = evidence(claim_vectors, sentences, vectors)
    contexts = [" ".join(sentences[j].text for j in idx) for idx in ev]
    verdicts = judge_sentences(judge, claims, contexts)
    nearest = np.argmax(claim_vectors @ vectors.T, axis=1)
    out = []
    for claim, i, idx, v in zip(claims, nearest, ev, verdicts, strict=True):
        s = sentences[int(i)]
        out.append({"text": claim, "section": s.section, "role": s.role, "page": s.page,
                    "evidence_pages": sorted({sentences[j].page for j in idx}),
                    "verdict": _verdict_dict(v)})  # fmt: skip
    return out


def _counts(records: Sequence[dict], n_input: int) -> dict[str, Any]:
    labels = [r["verdict"]["label"] for r in records]
    return {
        "sentences": len(records),
        "words": sum(len(r["text"].split()) for r in records),
        **{label: labels.count(label) for label in VERDICT_LABELS},
        "input_sentences": n_input,
        "roles": {role: sum(r["role"] == role for r in records) for role in ROLES},
    }


def _load(paper_id: str, manifest_path: str) -> tuple[str, ParsedPaper]:
    from rag.corpus.manifest import load_manifest
    from rag.corpus.papers import corpus_papers
    from rag.paths import resolve

    titles = {p.arxiv_id: p.title for p in load_manifest(resolve(manifest_path))}
    if paper_id not in titles:
        raise ConfigError(f"paper {paper_id!r} is not in the corpus; list_papers shows the ids")
    _, parsed = corpus_papers(manifest_path, [paper_id])
    if not parsed:
        raise ParseError(f"paper {paper_id!r} could not be fetched; see the ingest summary")
    return titles[paper_id], parsed[0]


def summarize(
    paper_id: str,
    *,
    sentences: int = DEFAULT_SENTENCES,
    max_words: int = DEFAULT_MAX_WORDS,
    chat_model: ChatModel | None = None,
    judge: ClaimJudge | None = None,
    embedder: Embedder | None = None,
    parsed: ParsedPaper | None = None,
    title: str = "",
    manifest_path: str = "data/manifest.jsonl",
) -> dict[str, Any]:
    """A judged summary of a corpus paper, as a JSON-able dict.

    Args:
        paper_id: the arXiv id (without version) of a pinned paper.
        sentences: at most this many summary sentences (1-20).
        max_words: word budget of the extractive summary (>= 20).
        chat_model: when given, the summary is this model's (``method`` ``"llm:<name>"``);
            otherwise it is extractive.
        judge: the claim judge (default: the pinned offline judge).
        embedder: the sentence embedder (default: the packaged MiniLM).
        parsed: the parsed paper (default: the project's cached parse of the corpus PDF);
            ``title`` goes with it.
        title: the paper's title when ``parsed`` is given.
        manifest_path: the pinned manifest the id is looked up in.

    Returns:
        ``paper_id``, ``title``, ``method``, ``version``, ``settings``, ``text`` (the summary),
        ``sentences`` (each with ``text``, ``section``, ``role``, ``page``, ``evidence_pages``,
        ``verdict``), ``counts`` and, for an LLM summary, ``llm`` (the call's record).

    Raises:
        ConfigError: an unknown paper id (named), a ``parsed`` paper of another id, or sizes out
            of range.
        ParseError: the paper did not parse or has no body sentences to summarise.
        LLMError: the chat model failed or returned no sentence.
    """
    if not 1 <= sentences <= 20:
        raise ConfigError(f"sentences must lie in 1..20, got {sentences!r}")
    if max_words < 20:
        raise ConfigError(f"max_words must be >= 20, got {max_words!r}")
    if parsed is None:
        title, parsed = _load(paper_id, manifest_path)
    elif parsed.paper_id != paper_id:
        raise ConfigError(f"parsed paper {parsed.paper_id!r} given for paper {paper_id!r}")
    if not parsed.ok:
        raise ParseError(f"paper {paper_id!r} did not parse ({parsed.status}): {parsed.error}")
    inputs = body_sentences(parsed)
    if not inputs:
        raise ParseError(f"paper {paper_id!r} has no body sentences to summarise")
    embedder = embedder or default_embedder()
    judge = judge or default_judge()
    vectors = sentence_vectors(inputs, embedder)
    llm_call = None
    if chat_model is None:
        chosen = extractive(inputs, vectors, sentences, max_words)
        claims, claim_vectors = [s.text for s in chosen], vectors[[s.index for s in chosen]]
        method = "extractive"
    else:
        claims, llm_call = llm_summary(chat_model, title, inputs, vectors, sentences)
        claim_vectors = sentence_vectors([Sentence(i, c, "", "", 0) for i, c in enumerate(claims)],
                                 embedder)  # fmt: skip
        method = f"llm:{chat_model.name}"
    records = judged_record(claims, inputs, vectors, claim_vectors, judge)
    out = {
        "paper_id": paper_id,
        "title": title,
        "method": method,
        "version": SUMMARY_VERSION,
        "settings": {
            "sentences": sentences,
            "max_words": max_words,
            "judge": getattr(judge, "name", type(judge).__name__),
            "embedder": getattr(embedder, "fingerprint", ""),
        },  # fmt: skip
        "text": " ".join(claims),
        "sentences": records,
        "counts": _counts(records, len(inputs)),
    }
    if llm_call is not None:
        out["llm"] = llm_call
    return out


def sentence_dicts(chosen: Sequence[Sentence]) -> list[dict[str, Any]]:
    """Plain dicts of chosen input sentences (for tables and tests)."""
    return [asdict(s) for s in chosen]
