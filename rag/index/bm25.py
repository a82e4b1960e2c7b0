"""Lexical retrieval: a documented tokenizer and a vectorised BM25Okapi equal to rank-bm25's.

Okapi BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009),
with the idf and epsilon floor of rank-bm25's ``BM25Okapi``::

    idf(t)      = ln(N - n_t + 0.5) - ln(n_t + 0.5)        (n_t: documents containing t)
    idf(t) < 0 -> epsilon * mean_t idf(t)                    (terms in more than half the docs)
    score(q, d) = sum_{t in q} idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))

rank-bm25 scores every document in Python per query (~48 queries/s on SciFact).
Deliberate difference: with b = 1 an empty document makes rank-bm25 divide 0 by 0 (NaN); here it
scores 0. Here the per (document, term) factor is precomputed once in a compressed sparse column
matrix, so a query touches only the postings of its own terms; the arithmetic is done in the same
order as rank-bm25, so the scores are bit-identical (``tests/test_bm25.py`` compares against
rank-bm25 itself).

Query terms are summed once per occurrence (a repeated query word counts twice, as in rank-bm25).
:func:`bm25_scores` is the same formula for a small collection scored once (the extractive
answerer's sentences), with the IDF variant named (:func:`bm25_idf`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version as _dist_version
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from rag.errors import ConfigError, IndexBuildError, RetrievalError
from rag.index.saved import load_saved

logger = logging.getLogger(__name__)

#: Bump when the on-disk layout or the scoring changes; older saved indexes are then rebuilt.
FORMAT_VERSION = 1

#: Lucene's default English stopword set (``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``), the set used
#: by the Anserini BM25 baselines that BEIR reports. Small on purpose: function words only
#: (including "not"/"no"), no content words.
LUCENE_STOPWORDS: frozenset[str] = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)

#: Words that make a sentence a question but carry no topic: removed from queries only, so a
#: question phrased as a question does not score documents for containing "what" or "does".
#: Documents keep them (their lengths, and so BM25's length normalisation, are unchanged).
QUESTION_WORDS: frozenset[str] = frozenset(
    "what which who whom whose when where why how whether does do did is are was were can could "
    "would should shall will has have had be been being explain describe".split()
)

#: A token is a run of letters/digits (Unicode-aware); punctuation and hyphens split tokens.
TOKEN_RE = re.compile(r"[^\W_]+", re.UNICODE)


class TokenizerSettings(BaseModel):
    """How text becomes BM25 terms (the same for documents and queries, except question words)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lowercase: bool = Field(True, description="Lowercase before matching.")
    stopwords: Literal["lucene", "none"] = Field(
        "lucene", description="Stopword list removed from documents and queries."
    )
    stemmer: Literal["none", "porter", "english"] = Field(
        "none",
        description="Snowball stemmer via PyStemmer: 'porter' (original Porter) or 'english' "
        "(Porter2); 'none' keeps surface forms.",
    )
    min_token_len: int = Field(1, ge=1, le=10, description="Drop tokens shorter than this.")
    drop_question_words: bool = Field(
        True, description="Remove QUESTION_WORDS from queries (never from documents)."
    )


class BM25Settings(BaseModel):
    """BM25Okapi parameters (rank-bm25 defaults) plus the tokenizer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    k1: float = Field(1.5, ge=0.0, le=10.0, description="Term-frequency saturation.")
    b: float = Field(0.75, ge=0.0, le=1.0, description="Length normalisation strength.")
    epsilon: float = Field(
        0.25, ge=0.0, le=1.0, description="Floor for negative idf, as a share of the mean idf."
    )
    tokenizer: TokenizerSettings = Field(default_factory=TokenizerSettings)


class Tokenizer:
    """Text → terms: lowercase, regex word tokens, stopwords, optional Snowball stemming."""

    def __init__(self, settings: TokenizerSettings | None = None) -> None:
        self.settings = settings or TokenizerSettings()
        stemmer = None
        if self.settings.stemmer != "none":
            try:
                import Stemmer  # PyStemmer
            except ImportError as e:
                raise ConfigError(
                    f"stemmer={self.settings.stemmer!r} needs PyStemmer: pip install PyStemmer, "
                    "or set stemmer='none'"
                ) from e
            stemmer = Stemmer.Stemmer(self.settings.stemmer)
        self._stemmer = stemmer
        self._stop = LUCENE_STOPWORDS if self.settings.stopwords == "lucene" else frozenset()

    def _terms(self, text: str, drop: frozenset[str]) -> list[str]:
        s = self.settings
        if s.lowercase:
            text = text.lower()
        toks = [
            t for t in TOKEN_RE.findall(text) if len(t) >= s.min_token_len and t.lower() not in drop
        ]
        stemmer = self._stemmer
        return stemmer.stemWords(toks) if stemmer is not None else toks

    def document(self, text: str) -> list[str]:
        """Terms of a document (stopwords removed, question words kept)."""
        return self._terms(text, self._stop)

    def query(self, text: str) -> list[str]:
        """Terms of a query: as a document, minus question words when enabled."""
        drop = self._stop
        if self.settings.drop_question_words:
            drop = drop | QUESTION_WORDS
        return self._terms(text, drop)


IdfVariant = Literal["okapi", "lucene"]


def bm25_idf(n_docs: int, df: int, variant: IdfVariant = "okapi") -> float:
    """Inverse document frequency of a term found in ``df`` of ``n_docs`` documents.

    ``okapi`` (rank-bm25's ``BM25Okapi``, used by :class:`BM25Index`):
    ``ln(N - df + 0.5) - ln(df + 0.5)``, negative for terms in more than half the documents (the
    caller floors it). ``lucene`` (Lucene's ``BM25Similarity``, Anserini):
    ``ln(1 + (N - df + 0.5) / (df + 0.5))``, never negative, so it suits a handful of short
    documents where a question term easily occurs in half of them.
    """
    if variant == "okapi":
        return math.log(n_docs - df + 0.5) - math.log(df + 0.5)
    if variant == "lucene":
        return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    raise ConfigError(f"BM25 idf variant {variant!r}: use 'okapi' or 'lucene'")


def bm25_scores(
    query_terms: Sequence[str],
    docs: Sequence[Sequence[str]],
    *,
    k1: float,
    b: float,
    idf_variant: IdfVariant = "lucene",
    epsilon: float = 0.25,
) -> np.ndarray:
    """BM25 of tokenized ``query_terms`` against a small tokenized collection ``docs``.

    The formula of the module docstring, with IDF over ``docs`` itself (:func:`bm25_idf`); each
    entry of ``query_terms`` is summed once per occurrence (pass distinct terms to count each once).
    With ``okapi`` a negative IDF is floored at ``epsilon`` times the mean IDF of the collection's
    terms, as :class:`BM25Index` does. For a few dozen sentences per call (the extractive
    answerer) this plain loop is cheaper than building an index; an empty collection scores
    nothing and an all-empty one divides lengths by 1.
    """
    n = len(docs)
    if n == 0:
        return np.zeros(0)
    df: dict[str, int] = {}  # first-occurrence order, as BM25Index's vocabulary
    for d in docs:
        for t in dict.fromkeys(d):
            df[t] = df.get(t, 0) + 1
    avg = sum(len(d) for d in docs) / n or 1.0
    idfs = {t: bm25_idf(n, c, idf_variant) for t, c in df.items()}
    if idf_variant == "okapi" and idfs:
        total = 0.0
        for v in idfs.values():  # sequential sum in vocabulary order, as BM25Index
            total += v
        floor = epsilon * (total / len(idfs))
        idfs = {t: (v if v >= 0 else floor) for t, v in idfs.items()}
    scores = np.zeros(n)
    for j, d in enumerate(docs):
        tf = Counter(d)
        norm = k1 * (1 - b + b * len(d) / avg)
        for t in query_terms:
            if tf[t]:
                scores[j] += idfs[t] * tf[t] * (k1 + 1) / (tf[t] + norm)
    return scores


def _library_versions() -> dict[str, str]:
    return {"numpy": np.__version__, "scipy": _dist_version("scipy")}


@dataclass
class Csc:
    """A compressed sparse column matrix as its three arrays (scipy's CSC layout, row indices
    sorted within each column). Scoring and loading need nothing more, so a search process never
    imports scipy (a third of a second); building uses scipy.sparse to assemble it."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, int]


def corpus_fingerprint(ids: list[str], texts: list[str]) -> str:
    """sha256 over (id, text) pairs in order: changes whenever any document or its order changes."""
    h = hashlib.sha256()
    for i, t in zip(ids, texts, strict=True):
        h.update(i.encode())
        h.update(b"\0")
        h.update(t.encode())
        h.update(b"\1")
    return h.hexdigest()


class BM25Index:
    """BM25Okapi over (ids, texts) with rank-bm25's exact scores and sparse, per-query-term scoring.

    Args:
        ids: document ids (unique strings).
        texts: document texts, aligned with ``ids``.
        k1, b, epsilon: BM25Okapi parameters (rank-bm25 defaults).
        tokenizer: tokenizer settings (see :class:`TokenizerSettings`).
        corpus_fp: fingerprint of the corpus recorded in the saved metadata (default: computed).
    """

    def __init__(
        self,
        ids: list[str],
        texts: list[str],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
        tokenizer: TokenizerSettings | None = None,
        corpus_fp: str | None = None,
    ) -> None:
        self.settings = BM25Settings(
            k1=k1, b=b, epsilon=epsilon, tokenizer=tokenizer or TokenizerSettings()
        )
        if len(ids) != len(texts):
            raise IndexBuildError(f"BM25Index: {len(ids)} ids but {len(texts)} texts; align them")
        if not ids:
            raise IndexBuildError("BM25Index: empty corpus; index at least one document")
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
            raise IndexBuildError(f"BM25Index: duplicate ids {dup}; ids must be unique")
        self.ids = list(ids)
        self.tokenizer = Tokenizer(self.settings.tokenizer)
        self.corpus_fp = corpus_fp or corpus_fingerprint(self.ids, list(texts))
        self._fit([self.tokenizer.document(t) for t in texts])

    # -- building -----------------------------------------------------------------------------

    def _fit(self, docs: list[list[str]]) -> None:
        vocab: dict[str, int] = {}  # first-occurrence order, as rank-bm25's idf dict
        rows: list[int] = []
        cols: list[int] = []
        vals: list[int] = []
        doc_len = np.zeros(len(docs), dtype=np.int64)
        for d, toks in enumerate(docs):
            doc_len[d] = len(toks)
            freqs: dict[str, int] = {}
            for t in toks:
                freqs[t] = freqs.get(t, 0) + 1
            for t, f in freqs.items():
                j = vocab.setdefault(t, len(vocab))
                rows.append(d)
                cols.append(j)
                vals.append(f)
        if not vocab:
            raise IndexBuildError(
                "BM25Index: no document has a single term after tokenization; check the texts "
                "and the tokenizer settings"
            )
        import scipy.sparse as sp

        m = sp.csc_matrix(
            (np.asarray(vals, dtype=np.float64), (rows, cols)), shape=(len(docs), len(vocab))
        )
        m.sort_indices()
        tf = Csc(m.data, m.indices, m.indptr, (int(m.shape[0]), int(m.shape[1])))
        self._set_state(vocab, tf, doc_len)

    def _set_state(self, vocab: dict[str, int], tf: Csc, doc_len: np.ndarray) -> None:
        s = self.settings
        n_docs = tf.shape[0]
        self._ranks: np.ndarray | None = None
        self.vocab = vocab
        self.tf = tf
        self.doc_len = doc_len
        self.avgdl = int(doc_len.sum()) / n_docs
        df = np.diff(tf.indptr)
        idf = np.empty(len(vocab), dtype=np.float64)
        idf_sum = 0.0
        for j in range(len(vocab)):  # sequential sum in vocab order == rank-bm25's average_idf
            v = bm25_idf(n_docs, int(df[j]))
            idf[j] = v
            idf_sum += v
        self.average_idf = idf_sum / len(vocab)
        idf[idf < 0] = s.epsilon * self.average_idf
        self.idf = idf
        # Per posting: tf*(k1+1) / (tf + k1*(1 - b + b*|d|/avgdl)), evaluated in rank-bm25's order.
        norm = s.k1 * (1 - s.b + s.b * doc_len.astype(np.float64) / self.avgdl)
        row_of = tf.indices
        w = tf.data * (s.k1 + 1) / (tf.data + norm[row_of])
        self._weights = Csc(w, tf.indices, tf.indptr, tf.shape)

    # -- querying -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.ids)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (float64, aligned with ``ids``)."""
        if not isinstance(query, str) or not query.strip():
            raise RetrievalError(f"BM25Index: empty query {query!r}; pass some text")
        return self.scores_terms(self.tokenizer.query(query))

    def scores_terms(self, terms: list[str]) -> np.ndarray:
        """Scores for an already tokenized query (each occurrence of a term is summed)."""
        out = np.zeros(len(self.ids), dtype=np.float64)
        w = self._weights
        for t in terms:
            j = self.vocab.get(t)
            if j is None:  # rank-bm25: idf.get(q) or 0 -> contributes exactly 0
                continue
            lo, hi = w.indptr[j], w.indptr[j + 1]
            out[w.indices[lo:hi]] += self.idf[j] * w.data[lo:hi]
        return out

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """Top-``k`` (id, score), best first; ties broken by id. Documents scoring 0 are kept last
        only when fewer than ``k`` documents match (so ``k`` results come back when possible)."""
        if not isinstance(k, int) or k <= 0:
            raise RetrievalError(f"BM25Index.search: k must be a positive int, got {k!r}")
        if self._ranks is None:
            self._ranks = id_ranks(self.ids)
        return top_k(self.ids, self.scores(query), k, self._ranks)

    # -- persistence --------------------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        """What built this index: parameters, corpus fingerprint, versions, format."""
        return {
            "format_version": FORMAT_VERSION,
            "kind": "bm25okapi",
            "settings": self.settings.model_dump(),
            "corpus_fingerprint": self.corpus_fp,
            "n_docs": len(self.ids),
            "versions": _library_versions(),
        }

    def save(self, directory: str | Path) -> Path:
        """Write ids, vocabulary, term frequencies, document lengths and metadata."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        # the layout of scipy.sparse.save_npz, so scipy.sparse.load_npz reads it too
        tf = self.tf
        np.savez(d / "tf.npz", indices=tf.indices, indptr=tf.indptr, format=np.array(b"csc"),
                 shape=np.array(tf.shape), data=tf.data)  # fmt: skip
        np.save(d / "doc_len.npy", self.doc_len)
        terms = sorted(self.vocab, key=self.vocab.__getitem__)
        (d / "vocab.json").write_text(json.dumps(terms, ensure_ascii=False))
        (d / "ids.json").write_text(json.dumps(self.ids, ensure_ascii=False))
        (d / "meta.json").write_text(json.dumps(self.meta(), indent=2, sort_keys=True))
        return d

    @classmethod
    def load(cls, directory: str | Path, expected: dict[str, Any] | None = None) -> BM25Index:
        """Load a saved index; raise IndexBuildError when it is missing, of another format or
        version, or when any key of ``expected`` (e.g. settings, corpus_fingerprint) differs."""
        d = Path(directory)
        try:
            meta = json.loads((d / "meta.json").read_text())
        except (OSError, ValueError) as e:
            raise IndexBuildError(f"no readable BM25 index at {d}: {e}; build it first") from e
        want = {"format_version": FORMAT_VERSION, "versions": _library_versions()}
        want.update(expected or {})
        diff = _meta_diff(meta, want)
        if diff:
            raise IndexBuildError(f"BM25 index at {d} was built differently ({diff}); rebuild it")
        settings = BM25Settings.model_validate(meta["settings"])
        self = cls.__new__(cls)
        self.settings = settings
        self.tokenizer = Tokenizer(settings.tokenizer)
        self.ids = json.loads((d / "ids.json").read_text())
        self.corpus_fp = meta["corpus_fingerprint"]
        terms = json.loads((d / "vocab.json").read_text())
        with np.load(d / "tf.npz", allow_pickle=False) as z:
            if z["format"].item() not in (b"csc", "csc"):
                raise IndexBuildError(f"BM25 index at {d}: tf.npz is not a CSC matrix; rebuild it")
            tf = Csc(z["data"], z["indices"], z["indptr"], tuple(int(x) for x in z["shape"]))
        self._set_state({t: j for j, t in enumerate(terms)}, tf, np.load(d / "doc_len.npy"))
        return self


def load_or_build(
    directory: str | Path, ids: list[str], texts: list[str], **params: Any
) -> BM25Index:
    """Load the BM25 index saved in ``directory`` if it was built from the same corpus with the
    same parameters and library versions; otherwise build it, save it, and return it."""
    settings = BM25Settings(**params)
    expected = {
        "settings": settings.model_dump(),
        "corpus_fingerprint": corpus_fingerprint(ids, texts),
    }
    saved = load_saved(lambda: BM25Index.load(directory, expected), directory, "BM25 index")
    if saved is not None:
        return saved
    idx = BM25Index(ids, texts, **dict(settings), corpus_fp=expected["corpus_fingerprint"])
    idx.save(directory)
    return idx


def _meta_diff(have: dict[str, Any], want: dict[str, Any]) -> str:
    bad = [
        f"{k}: saved {have.get(k)!r} != wanted {v!r}" for k, v in want.items() if have.get(k) != v
    ]
    return "; ".join(bad)


def id_ranks(ids: list[str]) -> np.ndarray:
    """Position of each id in sorted order, used to break score ties by id without string sorts."""
    ranks = np.empty(len(ids), dtype=np.int64)
    ranks[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
    return ranks


def top_k(
    ids: list[str], scores: np.ndarray, k: int, ranks: np.ndarray | None = None
) -> list[tuple[str, float]]:
    """Top-k by score descending, ties by id ascending (deterministic)."""
    ranks = id_ranks(ids) if ranks is None else ranks
    k = min(k, len(ids))
    if k < len(ids):
        kth = np.partition(scores, len(ids) - k)[len(ids) - k]
        cand = np.flatnonzero(scores >= kth)  # every tie at the boundary, then an exact sort
    else:
        cand = np.arange(len(ids))
    order = cand[np.lexsort((ranks[cand], -scores[cand]))][:k]
    return [(ids[i], float(scores[i])) for i in order]
