"""Resolving reference entries: ids first, corpus titles with structural checks, DOIs last."""

from __future__ import annotations

import pytest

from rag.errors import ConfigError
from rag.papers.resolve import (
    TitleMatcher,
    normalise_title,
    resolve_entry,
    stamp_month,
    title_tokens,
)

TITLES = {
    "1706.03762": "Attention Is All You Need",
    "1810.04805": "BERT: Pre-training of Deep Bidirectional Transformers for Language "
    "Understanding",
    "2401.04088": "Mixtral of Experts",
    "1910.01108": "DistilBERT, a distilled version of BERT: smaller, faster, cheaper and lighter",
}


@pytest.fixture(scope="module")
def matcher() -> TitleMatcher:
    return TitleMatcher(TITLES)


def test_title_tokens_mark_boundaries():
    toks, after = title_tokens('Vaswani. "Attention Is All-You Need," NeurIPS')
    assert toks == ["vaswani", "attention", "is", "all", "you", "need", "neurips"]
    assert after == [True, False, False, False, False, True, False]
    assert normalise_title("BERT: Pre-training") == "bert pre training"


def test_stamp_month():
    assert stamp_month("7 Sep 2013") == (2013, 9)
    assert stamp_month(None) is None and stamp_month("sometime") is None


def test_an_arxiv_id_wins_over_a_title_and_ids_outside_the_corpus_are_kept(matcher):
    text = "A. Vaswani. 2017. Attention is all you need. arXiv:1706.03762v5. See arXiv:2001.00001."
    rows = resolve_entry("2005.11401", 4, text, matcher)
    assert [(r.cited, r.in_corpus, r.how, r.score, r.ref_index) for r in rows] == [
        ("1706.03762", True, "arxiv_id", 1.0, 4),
        ("2001.00001", False, "arxiv_id", 1.0, 4),
    ]
    assert rows[0].reference == text


def test_an_arxiv_doi_resolves_as_doi_and_a_self_citation_is_dropped(matcher):
    rows = resolve_entry("2005.11401", 1, "J. Devlin. BERT. doi:10.48550/arXiv.1810.04805", matcher)
    assert [(r.cited, r.how) for r in rows] == [("1810.04805", "doi")]
    assert resolve_entry("1810.04805", 1, "Devlin. BERT. arXiv:1810.04805.", matcher) == []


def test_title_resolution_with_its_structural_checks(matcher):
    ok = "Ashish Vaswani et al. 2017. Attention is all you need. In NeurIPS, pages 5998-6008."
    (row,) = resolve_entry("2005.11401", 2, ok, matcher)
    assert (row.cited, row.how, row.in_corpus, row.score) == ("1706.03762", "title", True, 1.0)
    # commas inside the title do not break it
    dist = "V. Sanh et al. 2019. Distilbert, a distilled version of bert: smaller, faster, " \
        "cheaper and lighter. In NeurIPS EMC2 Workshop."  # fmt: skip
    assert [r.cited for r in resolve_entry("2005.11401", 3, dist, matcher)] == ["1910.01108"]
    # a longer title that merely contains a corpus title is not at a title boundary
    longer = "S. Jain. 2019. Attention is all you need for nothing else. In ACL."
    assert resolve_entry("2005.11401", 5, longer, matcher) == []
    # a near miss: "Mixture of Experts" scores below the threshold against "Mixtral of Experts"
    near = "N. Shazeer. 2017. Outrageously large networks: Mixture of Experts. In ICLR."
    assert resolve_entry("2402.00001", 6, near, matcher) == []
    # a fragment shorter than the title is no evidence
    assert resolve_entry("2005.11401", 7, "Attention is all", matcher) == []


def test_a_paper_cannot_cite_work_posted_more_than_three_months_later(matcher):
    text = "A. Vaswani. 2017. Attention is all you need. In NeurIPS."
    cited = [r.cited for r in resolve_entry("x", 1, text, matcher, citing_month=(2017, 3))]
    assert cited == ["1706.03762"]  # June 2017 is three months after March
    assert resolve_entry("x", 1, text, matcher, citing_month=(2017, 2)) == []
    unchecked = TitleMatcher(TITLES, date_slack_months=None)
    assert resolve_entry("x", 1, text, unchecked, citing_month=(2001, 1))[0].cited == "1706.03762"
    # the slack crosses a year end: November 2016 + 3 months = February 2017
    late = TitleMatcher({"1702.00001": "A Title Of Five Words Here"})
    entry = "B. Author. 2017. A title of five words here. In ICLR."
    assert resolve_entry("x", 1, entry, late, citing_month=(2016, 11))[0].cited == "1702.00001"
    assert resolve_entry("x", 1, entry, late, citing_month=(2016, 10)) == []


def test_a_subtitle_alone_and_a_second_placement_are_found():
    realm = TitleMatcher({"2002.08909": "REALM: Retrieval-Augmented Language Model Pre-Training"})
    text = "K. Guu et al. 2020. Retrieval augmented language model pre-training. In ICML."
    assert [r.cited for r in resolve_entry("x", 1, text, realm)] == ["2002.08909"]
    # a short subtitle is not matched alone
    star = TitleMatcher({"2203.14465": "STaR: Self-Taught Reasoner"})
    assert resolve_entry("x", 1, "E. Z. 2022. Self-taught reasoner. In NeurIPS.", star) == []
    # the first placement (a URL slug) fails the boundary check; the title itself is found next
    cove = TitleMatcher({"1708.00107": "Learned in Translation: Contextualized Word Vectors"})
    slug = (
        "Bryan McCann, James Bradbury, Caiming Xiong, and Richard Socher. Learned in translation: "
        "Contextualized word vectors. In I. Guyon, U. V. Luxburg, S. Bengio, H. Wallach, "
        "R. Fergus, S. Vishwanathan, and R. Garnett (eds.), Advances in Neural Information "
        "Processing Systems "
        "30, pp. 6294-6305. Curran Associates, Inc., 2017. URL http://papers.nips.cc/paper/ "
        "7209-learned-in-translation-contextualized-word-vectors.pdf."
    )
    assert [r.cited for r in resolve_entry("x", 1, slug, cove)] == ["1708.00107"]


def test_a_doi_outside_arxiv_is_kept_when_no_title_matches(matcher):
    text = "K. Lee. 2019. Latent retrieval. In ACL. doi:10.18653/v1/P19-1612."
    rows = resolve_entry("x", 9, text, matcher)
    assert [(r.cited, r.in_corpus, r.how) for r in rows] == [
        ("doi:10.18653/v1/p19-1612", False, "doi")
    ]


def test_bad_inputs_are_named(matcher):
    with pytest.raises(ConfigError, match="150"):
        resolve_entry("x", 1, "text", matcher, threshold=150)
    with pytest.raises(ConfigError, match="at least one"):
        TitleMatcher({})
