"""BM25: hand-derived scores, bit-equality with rank-bm25, tokenizer rules, persistence."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from rag.errors import ConfigError, IndexBuildError, RetrievalError
from rag.index.bm25 import (
    BM25Index,
    Tokenizer,
    TokenizerSettings,
    bm25_idf,
    bm25_scores,
    load_or_build,
)

# Tokenizer "none" stopwords keeps the hand derivation simple.
RAW = TokenizerSettings(stopwords="none", drop_question_words=False)


def test_hand_derived_three_doc_corpus():
    # d0 = "cat cat dog" (len 3), d1 = "dog bird" (len 2), d2 = "fish" (len 1); avgdl = 2.
    idx = BM25Index(["d0", "d1", "d2"], ["cat cat dog", "dog bird", "fish"], tokenizer=RAW)
    assert idx.avgdl == 2.0
    # idf(cat) = ln(3 - 1 + .5) - ln(1 + .5) = ln(2.5/1.5)
    idf_cat = math.log(2.5) - math.log(1.5)
    # idf(dog) = ln(3 - 2 + .5) - ln(2 + .5) = ln(1.5/2.5) < 0 -> floored at eps * mean idf.
    # vocabulary in first-occurrence order: cat, dog, bird, fish; idf(bird)=idf(fish)=idf(cat).
    mean_idf = (3 * idf_cat + (math.log(1.5) - math.log(2.5))) / 4
    idf_dog = 0.25 * mean_idf
    # d0 for "cat": tf=2, |d|=3 -> 2*2.5 / (2 + 1.5*(0.25 + 0.75*1.5)) = 5 / 4.0625
    want_d0 = idf_cat * 5 / (2 + 1.5 * (1 - 0.75 + 0.75 * 3 / 2))
    # d0 for "dog": tf=1 -> 2.5 / (1 + 1.5*1.375); d1 for "dog": tf=1, |d|=2 -> 2.5 / 2.5 = 1
    want_d0 += idf_dog * 2.5 / (1 + 1.5 * (1 - 0.75 + 0.75 * 3 / 2))
    want_d1 = idf_dog * 1.0
    got = idx.scores("cat dog")
    assert got[0] == pytest.approx(want_d0, rel=1e-12)
    assert got[1] == pytest.approx(want_d1, rel=1e-12)
    assert got[2] == 0.0
    assert [d for d, _ in idx.search("cat dog", 3)] == ["d0", "d1", "d2"]


def _random_corpus(n_docs: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    common = ["alpha", "beta"]  # in most docs -> negative idf, exercises the epsilon floor
    vocab = [f"w{i}" for i in range(60)]
    docs = []
    for _ in range(n_docs):
        words = rng.choices(vocab, k=rng.randint(0, 25))
        words += [c for c in common if rng.random() < 0.8]
        rng.shuffle(words)
        docs.append(" ".join(words))
    docs[3] = ""  # an empty document: length 0
    return docs


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("k1,b,eps", [(1.5, 0.75, 0.25), (0.9, 0.4, 0.0), (2.0, 1.0, 0.5)])
def test_scores_equal_rank_bm25_exactly(k1, b, eps):
    docs = _random_corpus(300, seed=7)
    tok = Tokenizer(RAW)
    ref = BM25Okapi([tok.document(d) for d in docs], k1=k1, b=b, epsilon=eps)
    idx = BM25Index(
        [f"d{i:03d}" for i in range(len(docs))], docs, k1=k1, b=b, epsilon=eps, tokenizer=RAW
    )
    assert idx.idf[idx.vocab["alpha"]] == ref.idf["alpha"]  # floored negative idf
    assert ref.idf["alpha"] == eps * ref.average_idf
    queries = ["alpha w1 w2", "w5 w5 beta", "unknownword", "w59 alpha beta w0 w3 w3 w3"]
    for q in queries:
        want = ref.get_scores(tok.query(q))
        got = idx.scores(q)
        if b == 1.0:
            # rank-bm25 divides 0 by 0 for the empty document when b = 1 (NaN); we score it 0.
            assert np.isnan(want[3]) and got[3] == 0.0
            want[3] = 0.0
        np.testing.assert_array_equal(got, want)  # bit-identical, not approximately equal


def test_bm25_scores_lucene_idf_by_hand():
    # Same three documents; Lucene's idf never goes negative, so "dog" (in 2 of 3) keeps its own.
    docs = [["cat", "cat", "dog"], ["dog", "bird"], ["fish"]]
    idf_cat = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    idf_dog = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    assert bm25_idf(3, 1, "lucene") == idf_cat and bm25_idf(3, 2, "lucene") == idf_dog
    assert bm25_idf(3, 2, "okapi") == math.log(1.5) - math.log(2.5)  # negative: floored later
    got = bm25_scores(["cat", "dog"], docs, k1=1.2, b=0.75, idf_variant="lucene")
    norm0 = 1.2 * (1 - 0.75 + 0.75 * 3 / 2)
    want0 = idf_cat * 2 * 2.2 / (2 + norm0) + idf_dog * 1 * 2.2 / (1 + norm0)
    want1 = idf_dog * 2.2 / (1 + 1.2 * (1 - 0.75 + 0.75 * 2 / 2))
    assert got.tolist() == pytest.approx([want0, want1, 0.0], rel=1e-12)
    assert bm25_scores(["cat"], [], k1=1.2, b=0.75).shape == (0,)
    assert bm25_scores(["cat"], [[], []], k1=1.2, b=1.0).tolist() == [0.0, 0.0]
    with pytest.raises(ConfigError, match=r"'bm25\+'"):
        bm25_idf(3, 1, "bm25+")  # type: ignore[arg-type]


@pytest.mark.parametrize(("k1", "b"), [(1.5, 0.75), (1.2, 0.3), (0.9, 1.0)])
def test_bm25_scores_okapi_equal_the_index(k1, b):
    """The small-collection function and the index are one formula: same idf, same epsilon
    floor, same per-occurrence query sum (the arithmetic order differs, hence approx)."""
    rng = random.Random(3)
    words = [f"w{i}" for i in range(12)]
    texts = [" ".join(rng.choices(words, k=rng.randint(1, 9))) for _ in range(25)]
    idx = BM25Index([f"d{i}" for i in range(25)], texts, k1=k1, b=b, tokenizer=RAW)
    docs = [idx.tokenizer.document(t) for t in texts]
    for query in (["w1"], ["w2", "w3", "w2"], ["w0", "w11", "nope"]):
        want = idx.scores_terms(query)
        got = bm25_scores(query, docs, k1=k1, b=b, idf_variant="okapi", epsilon=0.25)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_search_topk_sorted_and_ties_by_id():
    # x is in 2 of 5 docs: idf = ln(3.5 / 2.5) > 0
    idx = BM25Index(["b", "a", "c", "e", "d"], ["x y", "x y", "z", "v", "w"], tokenizer=RAW)
    hits = idx.search("x", 4)
    assert [d for d, _ in hits] == ["a", "b", "c", "d"]  # a/b tie, then zero scores by id
    assert hits[0][1] == hits[1][1] > hits[2][1] == 0.0
    assert idx.search("x", 1) == [("a", hits[0][1])]
    assert len(idx.search("x", 10)) == 5


def test_tokenizer_stopwords_and_question_words_query_side_only():
    tok = Tokenizer()
    assert tok.document("The Effect of BM25-based ranking") == [
        "effect",
        "bm25",
        "based",
        "ranking",
    ]
    # question words are kept in documents...
    assert tok.document("How does it work") == ["how", "does", "work"]
    # ...and removed from queries
    assert tok.query("How does retrieval augmentation work?") == [
        "retrieval",
        "augmentation",
        "work",
    ]
    assert Tokenizer(TokenizerSettings(drop_question_words=False)).query("how does x") == [
        "how",
        "does",
        "x",
    ]


def test_question_words_do_not_score():
    idx = BM25Index(["q", "r", "s"], ["how does it work", "retrieval models", "other text"])
    assert idx.scores("how does retrieval work")[0] > 0  # "work" matches
    only_q = idx.scores("what is how")  # nothing but question words
    np.testing.assert_array_equal(only_q, [0.0, 0.0, 0.0])


def test_stemming_with_pystemmer():
    tok = Tokenizer(TokenizerSettings(stemmer="porter"))
    assert tok.document("running studies") == ["run", "studi"]
    idx = BM25Index(
        ["a", "b"], ["he runs daily", "cats"], tokenizer=TokenizerSettings(stemmer="porter")
    )
    assert idx.search("running", 1)[0][0] == "a"


def test_bad_input():
    idx = BM25Index(["a"], ["text here"])
    with pytest.raises(RetrievalError, match="empty query"):
        idx.search("   ", 3)
    with pytest.raises(RetrievalError, match="positive"):
        idx.search("text", 0)
    with pytest.raises(IndexBuildError, match="duplicate"):
        BM25Index(["a", "a"], ["x", "y"])
    with pytest.raises(IndexBuildError, match="empty corpus"):
        BM25Index([], [])
    with pytest.raises(IndexBuildError, match="align"):
        BM25Index(["a"], ["x", "y"])
    with pytest.raises(ValueError):
        TokenizerSettings(stemmer="nope")
    with pytest.raises(ValueError):
        TokenizerSettings(unknown=1)


def test_missing_stemmer_is_a_config_error(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_stemmer(name, *a, **kw):
        if name == "Stemmer":
            raise ImportError("no")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_stemmer)
    with pytest.raises(ConfigError, match="PyStemmer"):
        Tokenizer(TokenizerSettings(stemmer="porter"))


def test_save_load_and_rebuild_on_mismatch(tmp_path):
    docs = _random_corpus(50, seed=1)
    ids = [f"d{i}" for i in range(50)]
    idx = load_or_build(tmp_path / "bm25", ids, docs, k1=1.2)
    again = BM25Index.load(tmp_path / "bm25", {"settings": idx.settings.model_dump()})
    np.testing.assert_array_equal(again.scores("alpha w3"), idx.scores("alpha w3"))
    assert again.ids == ids
    # other parameters: load refuses with the differing key named...
    with pytest.raises(IndexBuildError, match="k1"):
        BM25Index.load(tmp_path / "bm25", {"settings": {**idx.settings.model_dump(), "k1": 1.5}})
    # ...and load_or_build rebuilds
    rebuilt = load_or_build(tmp_path / "bm25", ids, docs, k1=1.5)
    assert rebuilt.settings.k1 == 1.5
    assert BM25Index.load(tmp_path / "bm25").settings.k1 == 1.5
    # a changed corpus is rebuilt too
    docs2 = docs[:-1] + ["brand new words"]
    changed = load_or_build(tmp_path / "bm25", ids, docs2, k1=1.5)
    assert changed.search("brand", 1)[0][0] == "d49"
    with pytest.raises(IndexBuildError, match="no readable"):
        BM25Index.load(tmp_path / "missing")


def test_saved_matrix_is_scipys_layout_and_a_loaded_index_searches_without_scipy(tmp_path):
    import json
    import subprocess
    import sys

    import scipy.sparse as sp

    texts = ["sparse retrieval with bm25", "dense retrieval with vectors", "bm25 and bm25 again"]
    ix = BM25Index(["a", "b", "c"], texts)
    ix.save(tmp_path / "bm25")
    m = sp.load_npz(tmp_path / "bm25" / "tf.npz")
    assert m.format == "csc" and m.shape == ix.tf.shape
    assert np.array_equal(m.toarray()[:, ix.vocab["bm25"]], [1.0, 0.0, 2.0])
    code = (
        "import json, sys\n"
        "from rag.index.bm25 import BM25Index\n"
        f"ix = BM25Index.load({str(tmp_path / 'bm25')!r})\n"
        "hits = ix.search('bm25 retrieval', 3)\n"
        "print(json.dumps([hits, any(m.split('.')[0] == 'scipy' for m in sys.modules)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    hits, scipy_loaded = json.loads(out.stdout)
    assert [tuple(h) for h in hits] == ix.search("bm25 retrieval", 3)
    assert not scipy_loaded
