"""Reference lists: ids found and normalised, entries split, on hand-written reference strings."""

from __future__ import annotations

import pytest

from rag.papers.ids import arxiv_ids, dois, hide_ids, normalise_arxiv_id, via_doi
from rag.papers.references import numbered_count, paper_references, split_references
from rag.types import Block, ParsedPaper


def _block(text: str, x0: float = 72.0, page: int = 9, y0: float = 0.0) -> Block:
    return Block(page, "references", "References", text, (x0, y0, 290.0, y0 + 10.0))


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("arXiv preprint arXiv:1808.04444, 2018.", ["1808.04444"]),
        ("In ICLR. arXiv:1810.04805v2 [cs.CL]", ["1810.04805"]),
        ("Proximal policy optimization. CoRR, abs/1707.06347.", ["1707.06347"]),
        ("URL https://arxiv.org/pdf/2005.11401.pdf", ["2005.11401"]),
        ("doi:10.48550/arXiv.2302.13971.", ["2302.13971"]),
        ("Old: arXiv:cs/0101001v3, arXiv:math.GT/0309136.", ["cs/0101001", "math/0309136"]),
        ("arXiv: 1301.3781 and again arXiv:1301.3781v3", ["1301.3781"]),
        # the scheme: 4 digits until 1412, 5 from 1501, months 01-12, nothing before 0704
        ("arXiv:1412.12345 arXiv:1501.1234 arXiv:1313.01234 arXiv:0703.1234", []),
        ("pages 1638-1649, 2018.1234 and vol. 1706.03762 without context", []),
    ],
)  # fmt: skip
def test_arxiv_ids_are_read_only_in_an_arxiv_context_and_versionless(text, ids):
    assert arxiv_ids(text) == ids


def test_normalise_and_doi_forms():
    assert normalise_arxiv_id("arXiv:1810.04805v3") == "1810.04805"
    assert normalise_arxiv_id("hep-th/9901001v2") == "hep-th/9901001"
    assert normalise_arxiv_id("not an id") == ""
    text = "In NAACL. doi:10.18653/v1/N19-1423. 10.48550/arXiv.1810.04805."
    assert dois(text) == ["10.18653/v1/n19-1423", "10.48550/arxiv.1810.04805"]
    assert via_doi(text, "1810.04805")
    assert not via_doi("arXiv:1810.04805 and 10.48550/arXiv.1810.04805", "1810.04805")


def test_hide_ids_leaves_the_title_and_no_id():
    text = (
        "Rami Al-Rfou. 2018. Character-level language modeling with deeper self-attention. "
        "arXiv preprint arXiv:1808.04444v2. https://arxiv.org/abs/1808.04444 doi:10.1234/xyz"
    )
    hidden = hide_ids(text)
    assert "Character-level language modeling with deeper self-attention" in hidden
    assert "1808" not in hidden and "arxiv" not in hidden.lower() and "10.1234" not in hidden


def test_numbered_list_splits_at_markers_in_sequence_even_mid_block():
    blocks = [
        _block('[1] N. Kandpal, H. Deng, "Large'),
        _block('language models struggle," in ICML, 2023, pp. 15-17. [2] Y. Zhang, "Siren\'s'),
        _block('song," arXiv preprint arXiv:2309.01219, 2023. [3] D. Arora, "Gar [7] meets rag,"'),
        _block("2023. [4] P. Lewis, E. Perez, Retrieval-augmented generation, 2020."),
    ]
    refs = split_references(blocks)
    assert [r.label for r in refs] == ["1", "2", "3", "4"]
    assert refs[1].text == '[2] Y. Zhang, "Siren\'s song," arXiv preprint arXiv:2309.01219, 2023.'
    # "[7]" inside entry 3 is more than 3 above the last marker, so it does not cut
    assert refs[2].text.startswith("[3] D. Arora") and "[7] meets rag" in refs[2].text
    assert numbered_count(blocks) == 7  # the largest [N], by definition of the measurement


def test_markers_of_a_column_read_early_still_open_entries():
    # the reading order put the last entry [12] after [2], and a column holding [10] [11] inside
    # entry [4]; "[14]" inside entry [6] opens nothing (it does not follow a full stop)
    text = (
        "[1] A. 2019. T1. [2] B. 2019. T2. [12] L. 2023. T12. [3] C. 2020. T3. [4] D. Dee, "
        "[10] J. 2022. T10. [11] K. 2022. T11. and E. Eve. 2020. T4. [5] F. 2020. T5. "
        "[6] G. See [14] here. T6. [7] H. T7. [8] I. T8. [9] J. T9."
    )
    refs = split_references([_block(text)])
    assert [r.label for r in refs] == "1 2 12 3 4 10 11 5 6 7 8 9".split()
    assert refs[8].text == "[6] G. See [14] here. T6."
    assert refs[4].text == "[4] D. Dee,"  # the rest of [4] was read after the column: it stays
    assert refs[6].text == "[11] K. 2022. T11. and E. Eve. 2020. T4."


def test_numbered_count_is_zero_for_an_unnumbered_list():
    assert numbered_count([_block("A. Author. 2019. A title [1] in a venue.")]) == 0


def test_hanging_indent_starts_and_continues_author_year_entries():
    blocks = [
        _block("Alan Akbik, Duncan Blythe, and Roland Vollgraf.", x0=72, y0=87),
        _block("2018. Contextual string embeddings. In COLING, pages 1638-1649.", x0=83, y0=98),
        _block("Rami Al-Rfou, Dokook Choe, Noah Constant, Mandy", x0=72, y0=155),
        _block("Guo, and Llion Jones. 2018. Character-level language modeling.", x0=83, y0=166),
        _block("Z. Chen, H. Zhang. 2018. Quora question pairs.", x0=72, y0=200),
        # a block that begins on the margin but opens in lower case continues the entry
        _block("and more words of the same entry.", x0=72, y0=212),
    ]
    refs = split_references(blocks)
    assert [r.text[:12] for r in refs] == ["Alan Akbik, ", "Rami Al-Rfou", "Z. Chen, H. "]
    assert refs[0].text.endswith("pages 1638-1649.")
    assert refs[2].text.endswith("of the same entry.")
    assert all(r.label == "" for r in refs)


def test_author_openings_inside_one_block_cut_aaai_and_acl_columns():
    aaai = (
        "AI@Meta. 2024. Llama 3 Model Card. Anschel, O.; Baram, N.; and Shimkin, N. 2017. "
        "Averaged-DQN: Variance Reduction. In ICML. Rogers, A.; Boyd-Graber, J. L.; and "
        "Okazaki, N., eds., Proceedings of ACL."
    )
    refs = split_references([_block(aaai, x0=54)])
    assert [r.text[:10] for r in refs] == ["AI@Meta. 2", "Anschel, O", "Rogers, A."]
    acl = (
        "Andrei Alexandrescu and Katrin Kirchhoff. 2006. Factored neural language models. In "
        "Proc. NAACL. Miguel Ballesteros, Chris Dyer, and Noah A. Smith. 2015. Improved "
        "transition-based parsing. In Proc. EMNLP."
    )
    refs = split_references([_block(acl)])
    assert [r.text[:14] for r in refs] == ["Andrei Alexand", "Miguel Ballest"]


def test_a_name_cut_at_a_block_edge_stays_in_its_entry():
    # MuPDF cut "and Jeffrey | Dean." into two blocks on the margin; an entry never ends on a name
    blocks = [
        _block("Tomas Mikolov, Ilya Sutskever, Anoop Deoras. 2012. Subword models. Report.", y0=1),
        _block("Tomas Mikolov, Kai Chen, Greg D. Corrado, and Jeffrey", y0=20),
        _block(
            "Dean. 2013a. Efficient estimation of word representations. arXiv:1301.3781. Tomas "
            "Mikolov, Ilya Sutskever, Kai Chen, Greg S. Cor- rado, and Jeff Dean. 2013b. "
            "Distributed representations of words. In Adv. NIPS.",
            y0=30,
        ),
    ]
    refs = split_references(blocks)
    assert [r.text[:30] for r in refs] == [
        "Tomas Mikolov, Ilya Sutskever,",
        "Tomas Mikolov, Kai Chen, Greg ",
        "Tomas Mikolov, Ilya Sutskever,",
    ]
    assert refs[1].text.endswith("arXiv:1301.3781.")


def test_label_lists_open_entries_at_bracketed_author_year_labels():
    text = (
        "[Agirre et al.2014] Eneko Agirre. 2014. Semeval-2014 task 10. In SemEval. "
        "[Baroni et al.2014a] Marco Baroni. 2014a. Frege in space. LiLT. "
        "[Bruni et al.2014] Elia Bruni. 2014. Multimodal distributional semantics. JAIR."
    )
    refs = split_references([_block(text)])
    assert [r.text[:8] for r in refs] == ["[Agirre ", "[Baroni ", "[Bruni e"]


def test_paper_references_reads_only_reference_blocks():
    body = Block(3, "body", "Intro", "[1] is cited here [2] and [3].", (72, 0, 290, 10))
    paper = ParsedPaper("x", 9, [body, _block("[1] A. B. 2019. T. [2] C. D. 2020. U. [3] E. V.")])
    refs = paper_references(paper)
    assert [r.text for r in refs] == ["[1] A. B. 2019. T.", "[2] C. D. 2020. U.", "[3] E. V."]
    assert split_references([]) == []
