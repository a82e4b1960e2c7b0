"""The report on papers no gold question covers (``params/nogold.yaml``) completes and says so.

Three corpus papers with no gold and no QASPER question, and the hand-written questions of
``data/questions/nogold.jsonl``: every notebook must run through the same runner as the smoke
report, each section graded against gold must show the skip note and record ``{"skipped": ...}``
(never a 0), and what needs no gold must carry real values (chunks, index costs, SciFact, retriever
agreement, judged faithfulness of answers to the user's questions). The rendered pages are then
loaded in Chromium: the notes are visible, and no error cell or traceback is shown.

The gold-coverage decision, the questions loader and retriever agreement are tested offline below
on hand-made inputs, with values derived by hand. The report run (about 3 minutes with a warm
cache, seven notebook kernels) is in the ``slow`` tier: ``make test-slow`` or
``pytest -m slow tests/test_nogold.py``.
"""

from __future__ import annotations

import json
import re

import pytest

from rag.errors import ConfigError, GoldError
from rag.evaluation.agreement import agreement_table, named_paper_table, overlap_at_k
from rag.evaluation.gold import GoldItem
from rag.evaluation.own_questions import (
    NO_GOLD,
    gold_coverage,
    gold_free,
    load_questions,
    questions_without_gold,
)
from rag.report import profiles
from rag.report.readings import SKIP_NOTE
from rag.report.readings.nogold import PARTIAL_NOTE, SECTION_NOTES, section_note, skip_text
from rag.report.recorder import read_metrics
from tests import pagecheck

PROFILE = "nogold"


def _gold(qid: str, papers: list[str]) -> GoldItem:
    return GoldItem(
        qid=qid,
        question=f"question {qid}?",
        answerable=True,
        answer="a",
        answer_type="extractive",
        kind="single-paper" if len(papers) == 1 else "multi-paper",
        papers=papers,
        evidence=[{"arxiv_id": p, "page": 1, "quote": f"quote {qid}"} for p in papers],
        names_method=False,
    )


UNANSWERABLE = GoldItem(
    qid="u",
    question="unanswerable?",
    answerable=False,
    answer="",
    answer_type="none",
    kind="unanswerable",
    papers=[],
    evidence=[],
    names_method=False,
)


def test_gold_coverage_counts_what_a_slice_can_be_graded_on():
    gold = [_gold("a", ["p1"]), _gold("b", ["p1", "p2"]), _gold("c", ["p3"]), UNANSWERABLE]
    c = gold_coverage(gold, ["p1"])
    # "b" needs p2 too, so only "a" is gradable; its quote and b's quote on p1 fall on the slice
    assert (c.papers, c.questions, c.evidence, c.unanswerable, c.qasper) == (1, 1, 2, 1, 0)
    assert c.covers("questions") and c.covers("evidence") and not c.covers("qasper")
    none = gold_coverage(gold, ["p9"])
    assert (none.questions, none.evidence) == (0, 0)
    assert not none.covers() and not none.covers("any_evidence")  # unanswerable ones grade nothing
    assert none.skipped() == {
        "skipped": NO_GOLD,
        "needs": "answerable gold questions whose papers are all in this slice",
        "papers": 1,
    }
    with pytest.raises(GoldError, match="unknown gold need 'answers'"):
        none.covers("answers")


def test_the_skip_note_names_what_is_missing():
    c = gold_coverage([_gold("a", ["p1"])], ["p8", "p9"])
    text = skip_text(c, "evidence", shows="Chunk sizes need none.")
    assert text.startswith(f"**{SKIP_NOTE}**")
    assert "gold evidence quotes on the papers of this slice, and these 2 papers have 0" in text
    assert text.endswith("Chunk sizes need none.")
    assert skip_text(c, partial=True).startswith(f"**{PARTIAL_NOTE}**")


def test_a_section_note_is_worded_for_whether_the_gold_covers_the_slice():
    gold = [_gold("a", ["p1"])]
    covered, uncovered = gold_coverage(gold, ["p1"]), gold_coverage(gold, ["p9"])
    with_gold, without = SECTION_NOTES["faithfulness.tradeoff"]
    assert section_note("faithfulness.tradeoff", covered).data == with_gold
    assert section_note("faithfulness.tradeoff", uncovered).data == without
    assert "shown beside it" in with_gold and "shown beside it" not in without
    assert section_note("retrieval.qrels", uncovered) is None  # the skip note says it all
    with pytest.raises(ConfigError, match="unknown section note 'retrieval.qrel'"):
        section_note("retrieval.qrel", covered)


#: ``readings.section_note("name", ...)`` in a notebook's code.
NOTE_CALL = re.compile(r"section_note\(\s*[\"']([^\"']+)[\"']")


def test_every_section_note_a_notebook_prints_exists_and_each_is_printed():
    used = {
        name
        for nb in profiles.notebook_paths()
        for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"]
        for name in NOTE_CALL.findall("".join(cell["source"]))
    }
    assert used, "no notebook prints a section note"
    assert used <= set(SECTION_NOTES), f"unknown notes: {sorted(used - set(SECTION_NOTES))}"
    assert set(SECTION_NOTES) <= used, (
        f"notes no notebook prints: {sorted(set(SECTION_NOTES) - used)}"
    )


def test_gold_free_replaces_only_the_gold_graded_metrics():
    block = {
        "faithfulness": {"mean": 0.5},
        "citation_recall": {"mean": 0.25},
        "answer_f1": {"mean": None},
        "negative_rejection": None,
        "cost_usd": 0.0,
    }
    out = gold_free(block)
    assert out["faithfulness"] == {"mean": 0.5} and out["citation_recall"] == {"mean": 0.25}
    assert out["cost_usd"] == 0.0
    assert out["answer_f1"]["skipped"] == NO_GOLD
    assert out["negative_rejection"]["skipped"] == NO_GOLD


def test_own_questions_file(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text(
        '{"question": "What is X?", "papers": ["1310.4546"]}\n'
        '{"question": "And Y?", "qid": "mine"}\n',
        encoding="utf-8",
    )
    qs = load_questions(p)
    assert list(qs) == ["own-1", "mine"]
    assert qs["own-1"].papers == ["1310.4546"] and qs["mine"].papers == []
    p.write_text('{"question": "What is X?", "answer": "x"}\n', encoding="utf-8")
    with pytest.raises(GoldError, match="line 1.*answer"):
        load_questions(p)
    with pytest.raises(GoldError, match="not found"):
        load_questions(tmp_path / "missing.jsonl")
    uncovered = gold_coverage([_gold("a", ["p1"])], ["p9"])
    with pytest.raises(ConfigError, match="set questions_path"):
        questions_without_gold(uncovered, "", required=True)
    assert questions_without_gold(uncovered, "") == {}
    covered = gold_coverage([_gold("a", ["p1"])], ["p1"])
    assert questions_without_gold(covered, str(p)) == {}  # the gold wins: its questions are graded


def test_the_committed_questions_file_is_valid_and_on_the_profile_papers():
    qs = load_questions("data/questions/nogold.jsonl")
    papers = set(profiles.resolve_parameters(PROFILE, "outputs/nogold")["01_ingest"]["paper_ids"])
    assert len(qs) >= 4
    assert all(q.papers and set(q.papers) <= papers for q in qs.values())


def test_retriever_agreement_by_hand():
    a = {"q1": {"c1": 3.0, "c2": 2.0, "c3": 1.0}, "q2": {"c1": 1.0, "c2": 0.5}}
    b = {"q1": {"c3": 3.0, "c1": 2.0, "c9": 1.0}, "q2": {"c1": 1.0, "c2": 0.9}}
    assert overlap_at_k(a["q1"], b["q1"], 2) == 0.5  # {c1, c2} vs {c3, c1}: c1 only
    assert overlap_at_k(a["q1"], b["q1"], 3) == pytest.approx(2 / 3)  # c1 and c3
    t = agreement_table({"a": a, "b": b}, k=2)
    # q1: top-2 {c1, c2} vs {c3, c1} share c1 -> 1/2; q2: the same two chunks -> 2/2
    assert t.loc[0, "overlap@2"] == pytest.approx(0.75) and t.loc[0, "n"] == 2
    named = named_paper_table(
        {"a": a}, {"c1": "p1", "c2": "p1", "c3": "p2"}, {"q1": ["p2"], "q2": []}, k=2
    )
    # q2 names no paper (left out); q1's top-2 (c1, c2) are both from p1, not the named p2
    assert named.loc[0, "n"] == 1 and named.loc[0, "named_paper@2"] == 0.0


# --- the whole report on the profile ---------------------------------------------------------


@pytest.fixture(scope="module")
def nogold_run(tmp_path_factory, shared_dir):
    """One run of every notebook on the nogold profile (the smoke profile's runner)."""
    from rag.report import runner

    root = tmp_path_factory.mktemp("outputs")
    runs = runner.run_report(PROFILE, output_root=str(root))
    return root / PROFILE, runs


#: Each notebook's gold-graded metrics, which must be recorded as skipped.
SKIPPED = {
    "01_ingest": [("evidence_found",), ("evidence_found_all",)],
    "04_retrieval": [("corpus_gold",), ("qasper",), ("category_precision@5",)],
    "05_faithfulness": [("examples",), ("yes_no_rule_vs_gold",), ("questions", "gold")],
    "06_conversation": [("retrieval",)],
}


@pytest.mark.slow
@pytest.mark.notebooks
def test_every_notebook_completes_and_records_the_skips(nogold_run):
    out, runs = nogold_run
    assert [r.status for r in runs] == ["ok"] * len(profiles.notebook_paths())
    for nb, keys in SKIPPED.items():
        m = read_metrics(out, nb)
        for path in keys:
            v = m
            for k in path:
                v = v[k]
            assert v["skipped"] == NO_GOLD, (nb, path, v)
    m02 = read_metrics(out, "02_chunk")
    for s in m02["strategies"].values():
        assert s["chunks"] > 10 and s["evidence_intact"]["skipped"] == NO_GOLD


@pytest.mark.slow
@pytest.mark.notebooks
def test_what_needs_no_gold_has_real_values(nogold_run):
    out, _ = nogold_run
    m01 = read_metrics(out, "01_ingest")
    assert m01["papers"]["parsed"] == 3 and m01["pages"] > 0
    m03 = read_metrics(out, "03_index")
    assert m03["chunks"] > 10 and m03["growth"][0]["dense_p50_ms"] > 0
    m04 = read_metrics(out, "04_retrieval")
    assert 0 < m04["scifact"]["bm25"]["ndcg@10"]["mean"] <= 1
    pairs = m04["agreement"]["overlap@10"]
    assert m04["agreement"]["questions"] == 6 and len(pairs) == 6  # 4 retrievers: 6 pairs
    assert all(p["n"] == 6 and 0 <= p["overlap@10"] <= 1 for p in pairs)
    assert any(p["overlap@10"] < 1 for p in pairs)  # the retrievers do not all agree
    assert all(r["n"] == 6 for r in m04["agreement"]["named_paper@10"])
    assert m04["latency_ms"]
    m05 = read_metrics(out, "05_faithfulness")
    assert m05["questions"]["n"] == 6
    ext = m05["answerers"]["extractive"]
    scored = [a for a in m05["answerers"].values() if a["faithfulness"]["n_scored"] > 0]
    assert scored and all(0 <= a["faithfulness"]["mean"] <= 1 for a in scored)
    assert ext["answer_f1"]["skipped"] == NO_GOLD and ext["negative_rejection"]["skipped"]
    assert 0 <= ext["faithfulness"]["answered_rate"] <= 1
    assert not any("noisy-gold" in n for n in m05["answerers"])
    traces = (out / "05_faithfulness" / "traces.jsonl").read_text().splitlines()
    assert all(json.loads(t)["question"] for t in traces)


def _shown_text(ipynb) -> str:
    """Every markdown cell and every text or markdown output of an executed notebook."""
    import nbformat

    nb = nbformat.read(ipynb, as_version=4)
    parts = []
    for c in nb.cells:
        if c.cell_type == "markdown":
            parts.append(c.source)
        for o in c.get("outputs", []):
            data = o.get("data", {})
            parts.append(str(data.get("text/markdown", "")) + str(o.get("text", "")))
    return " ".join(" ".join(parts).split())


@pytest.mark.slow
@pytest.mark.notebooks
def test_no_section_note_describes_gold_the_papers_lack(nogold_run):
    out, _ = nogold_run
    shown = {nb: _shown_text(out / f"{nb}.ipynb") for nb in ("04_retrieval", "05_faithfulness")}
    for name, (with_gold, without) in SECTION_NOTES.items():
        nb = "04_retrieval" if name.startswith("retrieval.") else "05_faithfulness"
        assert with_gold is None or with_gold not in shown[nb], (nb, name)
        assert without is None or without in shown[nb], (nb, name)


@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.browser
def test_the_skip_notes_are_visible_in_a_browser(nogold_run, tmp_path_factory):
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install)")
    if pagecheck.chromium_path() is None:
        pytest.skip("chromium is not installed here: apt-get install -y chromium (.ci/run does)")
    out, runs = nogold_run
    shots = tmp_path_factory.mktemp("nogold_screenshots")
    #: notebooks with a gold section (03 has none: its latency queries need no labels)
    with_note = {"01_ingest", "02_chunk", "04_retrieval", "05_faithfulness", "06_conversation"}
    problems = {}
    with pagecheck.browser() as b:
        for r in runs:
            page = out / f"{r.name}.html"
            res = pagecheck.check_page(b, page, screenshot=shots / f"{r.name}.png")
            bad = list(res.problems)
            ctx = b.new_context(viewport={"width": pagecheck.WIDTH, "height": 900})
            p = ctx.new_page()
            p.goto(page.resolve().as_uri(), wait_until="load")
            notes = p.get_by_text(SKIP_NOTE)
            visible = [notes.nth(i).is_visible() for i in range(notes.count())]
            n_errors = p.locator("[data-mime-type='application/vnd.jupyter.stderr']").count()
            ctx.close()
            if r.name in with_note and not any(visible):
                bad.append("no visible skip note")
            if r.name not in with_note and visible:
                bad.append("a skip note on a notebook without gold sections")
            if n_errors:
                bad.append(f"{n_errors} error output(s) shown")
            if bad:
                problems[r.name] = bad
    print(f"screenshots: {shots}")
    assert not problems, json.dumps(problems, indent=1)
