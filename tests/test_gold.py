"""Gold loading and validation, qrels construction from quotes and QASPER paragraphs, paper runs."""

from __future__ import annotations

import json
import re

import pytest

from rag.errors import ConfigError, EvaluationError, GoldError
from rag.evaluation.gold import (
    answer_slice,
    chunk_qrels,
    expected_categories,
    gold_queries,
    gold_summary,
    load_gold,
    paper_qrels,
    question_groups,
)
from rag.evaluation.qasper import clean_qasper, load_qasper, qasper_chunk_qrels, qasper_queries
from rag.ir import paper_run
from rag.types import Chunk


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip().lower()


def substring_contains(quote: str, text: str, threshold: float) -> bool:
    """Exact containment after whitespace/case folding: the fuzzy matcher's strictest case."""
    return _norm(quote) in _norm(text)


def _item(qid: str, **over) -> dict:
    base = {
        "qid": qid,
        "question": f"question {qid}?",
        "answerable": True,
        "answer": "an answer",
        "answer_type": "abstractive",
        "kind": "single-paper",
        "papers": ["1111.11111"],
        "evidence": [{"arxiv_id": "1111.11111", "page": 1, "quote": "alpha beta gamma"}],
        "names_method": False,
    }
    base.update(over)
    return base


UNANSWERABLE = {
    "answerable": False,
    "answer": "",
    "answer_type": "none",
    "kind": "unanswerable",
    "papers": [],
    "evidence": [],
}


def _write(tmp_path, rows: list[dict | str]):
    p = tmp_path / "gold.jsonl"
    p.write_text(
        "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n",
        encoding="utf-8",
    )
    return p


def test_load_valid_file_and_queries_exclude_unanswerable(tmp_path):
    rows = [
        _item("a"),
        _item("b", **UNANSWERABLE),
        _item(
            "c",
            kind="multi-paper",
            papers=["1111.11111", "2222.22222"],
            evidence=[
                {"arxiv_id": "1111.11111", "page": 2, "quote": "q one"},
                {"arxiv_id": "3333.33333", "page": 4, "quote": "q two"},
            ],
        ),
    ]
    items = load_gold(_write(tmp_path, rows + [""]))  # blank lines are skipped
    assert [i.qid for i in items] == ["a", "b", "c"]
    assert gold_queries(items) == {"a": "question a?", "c": "question c?"}
    # a paper is relevant when listed in `papers` or carrying evidence
    assert paper_qrels(items) == {
        "a": {"1111.11111": 1},
        "c": {"1111.11111": 1, "2222.22222": 1, "3333.33333": 1},
    }
    summary = gold_summary(items)
    assert summary["answerable"] == 2 and summary["unanswerable"] == 1
    assert summary["kind:multi-paper"] == 1
    assert question_groups(items, "kind") == {
        "a": "single-paper",
        "b": "unanswerable",
        "c": "multi-paper",
    }
    with pytest.raises(GoldError, match="cannot group"):
        question_groups(items, "colour")


@pytest.mark.parametrize(
    ("rows", "pattern"),
    [
        ([_item("a"), "{not json"], r"line 2: not valid JSON"),
        ([{k: v for k, v in _item("a").items() if k != "question"}], r"line 1.*'question'"),
        ([_item("a", evidence=[])], r"line 1.*at least one evidence"),
        ([_item("a", answerable=False)], r"line 1.*kind is 'single-paper'"),
        ([_item("a", **{**UNANSWERABLE, "papers": ["1111.11111"]})], r"no papers"),
        ([_item("a", kind="two-paper")], r"line 1.*'kind'"),
        (
            [_item("a", evidence=[{"arxiv_id": "1111.11111", "page": 0, "quote": "x"}])],
            r"'evidence\.0\.page'",
        ),
        ([_item("a", evidences=[])], r"'evidences'"),
        ([_item("a"), _item("a")], r"line 2: qid 'a' already used on line 1"),
        ([""], r"holds no questions"),
    ],
)
def test_loader_errors_name_line_and_field(tmp_path, rows, pattern):
    with pytest.raises(GoldError, match=pattern):
        load_gold(_write(tmp_path, rows))


def test_missing_file_is_a_gold_error(tmp_path):
    with pytest.raises(GoldError, match="cannot read"):
        load_gold(tmp_path / "nope.jsonl")


def _chunk(cid: str, paper: str, text: str) -> Chunk:
    return Chunk(cid, paper, "fixed", text, "", 1, 1, 0, len(text), len(text.split()))


P1, P2 = "1111.11111", "2222.22222"
CHUNKS = [
    _chunk("c1", P1, "Intro. We found that Alpha  beta\ngamma holds in all cases."),
    _chunk("c2", P1, "The method hashes character n-grams into a fixed"),
    _chunk(
        "c3", P1, "number of buckets using the FNV-1a function to bound memory. Results follow."
    ),
    _chunk("c4", P2, "Nothing relevant here but the phrase never seen anywhere else."),
    _chunk("c5", P2, "Again alpha beta gamma, but in the wrong paper for question g5."),
]


def test_chunk_qrels_place_quotes_and_report_what_is_not_placed():
    items = load_items(
        _item("g1"),  # quote in c1 (case and whitespace differ)
        _item(
            "g2",
            papers=["9999.99999"],
            evidence=[{"arxiv_id": "9999.99999", "page": 1, "quote": "alpha beta gamma"}],
        ),  # paper not in the corpus
        _item("g3", evidence=[{"arxiv_id": P1, "page": 1, "quote": "a sentence that is nowhere"}]),
        _item(
            "g4",
            evidence=[
                {
                    "arxiv_id": P1,
                    "page": 3,
                    "quote": "character n-grams into a fixed number of buckets using the FNV-1a",
                }
            ],
        ),  # cut by the c2/c3 boundary in the middle: both halves found, both chunks relevant
        _item("g5", papers=[P1]),  # the quote also occurs in P2's c5, which must not count
        _item(
            "g6",
            evidence=[
                {"arxiv_id": P1, "page": 3, "quote": "hashes character n-grams into a fixed number"}
            ],
        ),  # cut off-centre: only c2 holds a whole half (4 of 6 words); c3 holds 2 words
        _item("u", **UNANSWERABLE),
    )
    qrels, report = chunk_qrels(items, CHUNKS, substring_contains, 90.0)
    assert qrels == {
        "g1": {"c1": 1},
        "g4": {"c2": 1, "c3": 1},
        "g5": {"c1": 1},
        "g6": {"c2": 1},
    }
    assert report.unknown_papers == {"g2": ["9999.99999"]}
    assert [(q, p) for q, p, _ in report.not_found] == [("g2", "9999.99999"), ("g3", P1)]
    assert [q for q, _, _ in report.found_split] == ["g4", "g6"]
    assert report.no_relevant_chunk == ["g2", "g3"]
    assert report.summary() == {
        "questions": 6,
        "evidence": 6,
        "found_whole": 2,
        "found_split": 2,
        "not_found": 2,
        "unknown_paper_refs": 1,
        "questions_without_relevant_chunk": 2,
    }


def test_chunk_qrels_pass_threshold_to_contains_fn():
    seen = []

    def spy(quote: str, text: str, threshold: float) -> bool:
        seen.append(threshold)
        return substring_contains(quote, text, threshold)

    chunk_qrels(load_items(_item("g1")), CHUNKS, spy, 77.0)
    assert seen and set(seen) == {77.0}


def test_chunk_qrels_with_the_project_fuzzy_matcher():
    from rag.evaluation import evidence

    # PDF text joins a hyphenated line break and writes a ligature differently from the quote.
    chunks = [
        _chunk("c1", P1, "we use a hashing func- tion that maps n-grams to integers in 1 to K")
    ]
    items = load_items(
        _item(
            "g1",
            evidence=[
                {
                    "arxiv_id": P1,
                    "page": 3,
                    "quote": "hashing function that maps n-grams to integers",
                }
            ],
        )
    )
    qrels, report = chunk_qrels(items, chunks, evidence.contains, 90.0)
    assert qrels == {"g1": {"c1": 1}}
    assert report.not_found == []


def load_items(*rows: dict):
    from rag.evaluation.gold import GoldItem

    return [GoldItem.model_validate(r) for r in rows]


def test_to_paper_run_keeps_best_chunk_per_paper():
    run = {"q1": {"c1": 0.2, "c3": 0.9, "c4": 0.5}, "q2": {}}
    c2p = {"c1": P1, "c3": P1, "c4": P2}
    assert paper_run(run, c2p) == {"q1": {P1: 0.9, P2: 0.5}, "q2": {}}
    with pytest.raises(EvaluationError, match="'zz'"):
        paper_run({"q1": {"zz": 1.0}}, c2p)


def test_expected_categories_majority_then_alphabetical():
    items = load_items(
        _item("a", papers=[P1, P2, "3333.33333"]),
        _item("b", papers=[P1, P2]),
        _item("u", **UNANSWERABLE),
    )
    cats = {P1: "cs.LG", P2: "cs.CL", "3333.33333": "cs.CL"}
    assert expected_categories(items, cats) == {"a": "cs.CL", "b": "cs.CL"}


def test_clean_qasper_paragraph_strips_placeholders_and_latex():
    raw = "We use BERT BIBREF3 , see Table TABREF19 and $\\alpha $ = 0.1 ( BIBREF4 ) ."
    assert clean_qasper(raw) == "We use BERT, see Table and = 0.1."


def _qasper(qid: str, paper: str, evidence: list[list[str]]) -> dict:
    return {
        "qid": qid,
        "arxiv_id": paper,
        "question": f"qasper {qid}?",
        "answers": [{"answer": "x"}],
        "evidence": evidence,
    }


def test_qasper_qrels_from_paragraphs(tmp_path):
    p = tmp_path / "qasper.jsonl"
    rows = [
        # paragraph (after cleaning) inside chunk c1
        _qasper("q1", P1, [["We found BIBREF2 that alpha beta gamma holds in all cases."], []]),
        # chunk c4 lies inside a longer paragraph; a second annotator repeats it
        _qasper(
            "q2",
            P2,
            [
                ["Context first. Nothing relevant here but the phrase never seen anywhere else."],
                ["Context first. Nothing relevant here but the phrase never seen anywhere else."],
            ],
        ),
        _qasper("q3", P1, [[], []]),  # annotators gave no evidence: not a retrieval question
        _qasper("q4", P1, [["a paragraph about something the paper never says at all"]]),
    ]
    p.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    items = load_qasper(p)
    assert qasper_queries(items) == {"q1": "qasper q1?", "q2": "qasper q2?", "q4": "qasper q4?"}
    assert items[1].paragraphs == [rows[1]["evidence"][0][0]]
    qrels, report = qasper_chunk_qrels(items, CHUNKS, substring_contains, 85.0)
    assert qrels == {"q1": {"c1": 1}, "q2": {"c4": 1}}
    assert report.n_evidence == 3
    assert [q for q, _, _ in report.not_found] == ["q4"]


def test_qasper_loader_names_bad_line(tmp_path):
    p = tmp_path / "qasper.jsonl"
    p.write_text(json.dumps({"qid": "x", "arxiv_id": P1}) + "\n", encoding="utf-8")
    with pytest.raises(GoldError, match="line 1.*'question'"):
        load_qasper(p)


def test_shared_gold_and_qasper_load(shared_dir):
    items = load_gold(shared_dir / "gold" / "dev.jsonl")
    s = gold_summary(items)
    assert s["total"] == 170 and s["unanswerable"] == 12 and s["answerable"] == 158
    assert len(gold_queries(items)) == 158
    qasper = load_qasper(shared_dir / "datasets" / "qasper" / "corpus_questions.jsonl")
    assert len(qasper) == 28
    assert len(qasper_queries(qasper)) == 14


@pytest.mark.slow
def test_shared_gold_quotes_land_in_real_chunks(shared_dir):
    """Real corpus: nearly every gold quote is found in a default chunk of its paper."""
    from rag.corpus.parse import ParseSettings, load_parsed
    from rag.evaluation.evidence import contains
    from rag.text.chunk import ChunkSettings
    from rag.text.chunk_cache import chunk_corpus

    manifest = [
        json.loads(line)
        for line in (shared_dir / "corpus" / "manifest.jsonl").read_text().splitlines()
        if line.strip()
    ]
    pdfs = shared_dir / "corpus" / "pdfs"
    parsed = [
        load_parsed(pdfs / f"{m['arxiv_id']}.pdf", m["sha256"], ParseSettings()) for m in manifest
    ]
    chunks = chunk_corpus(parsed, ChunkSettings())
    items = load_gold(shared_dir / "gold" / "dev.jsonl")
    qrels, report = chunk_qrels(items, chunks, contains, 90.0)
    s = report.summary()
    assert s["unknown_paper_refs"] == 0
    assert s["found_whole"] + s["found_split"] >= 0.97 * s["evidence"]
    assert len(qrels) >= 0.97 * len(gold_queries(items))
    qasper = load_qasper(shared_dir / "datasets" / "qasper" / "corpus_questions.jsonl")
    qq, qreport = qasper_chunk_qrels(qasper, chunks, contains, 85.0)
    assert len(qq) >= 12 and qreport.summary()["unknown_paper_refs"] == 0


def test_answer_slice_keeps_gold_order_and_caps_the_unanswerable(tmp_path):
    rows = [_item("a"), _item("u1", **UNANSWERABLE), _item("b"), _item("u2", **UNANSWERABLE)]
    items = load_gold(_write(tmp_path, rows))
    assert [g.qid for g in answer_slice(items, 1)] == ["a", "u1", "u2"]
    assert [g.qid for g in answer_slice(items, 5, max_unanswerable=1)] == ["a", "b", "u1"]
    assert [g.qid for g in answer_slice(items, 2, include_unanswerable=False)] == ["a", "b"]
    with pytest.raises(ConfigError, match="max_unanswerable=-1"):
        answer_slice(items, 1, max_unanswerable=-1)
