"""``from rag import Lab``: the paper desk's notebook door, method by method, on the smoke index.

One lab over the smoke profile's five papers (the real MiniLM index from the project's cache, as
``tests/test_cli.py`` builds it; the served index in a temporary folder) serves the module. Each
method's record must give back exactly what the desk returns (the service's JSON), tabulate as a
DataFrame, and show itself as HTML whose citation chips lead to their sources and whose text is
escaped.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from html.parser import HTMLParser

import pytest

from rag.errors import ConfigError
from rag.report.profiles import load_profile
from rag.serve.desk import ToolInputError, UnknownPaperError
from tests import test_browser

SMOKE_PAPERS = set(load_profile("smoke")["all"]["paper_ids"])
FASTTEXT = "1607.04606"
SBERT = "1908.10084"
#: a corpus gold question (a-7) on a smoke paper, and a question no gold item asks
GOLD_QUESTION = (
    "In the skipgram extension that represents each word as a bag of character n-grams, which "
    "n-gram lengths are extracted?"
)
OTHER_QUESTION = "How are subword vectors summed into a word vector?"


@pytest.fixture(scope="module")
def lab(tmp_path_factory, shared_dir):
    from rag import Lab

    return Lab("smoke", index_dir=str(tmp_path_factory.mktemp("lab") / "served"))


class _Page(HTMLParser):
    """What an HTML fragment holds: element ids, local anchors, tags, text."""

    def __init__(self, markup: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.anchors: list[str] = []
        self.tags: list[str] = []
        self.text: list[str] = []
        self.feed(markup)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "a" and (a.get("href") or "").startswith("#"):
            self.anchors.append(a["href"][1:])

    def handle_data(self, data):
        self.text.append(data)


def _no_latency(d: dict) -> dict:
    return {k: v for k, v in d.items() if k != "latency_ms"}


def test_the_lab_is_exported_and_loads_on_first_use(tmp_path, shared_dir):
    import rag
    from rag.lab import Lab

    assert rag.Lab is Lab and "Lab" in rag.__all__
    lab = Lab("smoke", index_dir=str(tmp_path / "served"))
    assert not lab.loaded
    text = repr(lab)
    assert text.startswith("Lab(profile='smoke'): 5 papers of data/manifest.jsonl")
    assert "not loaded yet" in text and not (tmp_path / "served").exists()
    with pytest.raises(ConfigError, match="nosuchprofile"):
        Lab("nosuchprofile")


def test_search_is_the_desks_search_as_a_table(lab):
    hits = lab.search("subword n-grams for rare words", k=4)
    assert lab.loaded and "5 papers" in repr(lab) and "chunks served" in repr(lab)
    d = hits.to_dict()
    assert _no_latency(d) == _no_latency(lab.desk.search("subword n-grams for rare words", k=4))
    assert set(d) == {"query", "hits", "retriever", "latency_ms"} and d["retriever"] == "hybrid"
    assert len(hits.hits) == 4 and hits.hits[0]["arxiv_id"] == FASTTEXT
    assert {h["arxiv_id"] for h in hits.hits} <= SMOKE_PAPERS
    frame = hits.to_frame()
    assert list(frame.columns) == list(hits.columns) and list(frame["rank"]) == [1, 2, 3, 4]
    assert list(frame["chunk_id"]) == [h["chunk_id"] for h in hits.hits]
    page = _Page(hits._repr_html_())
    assert page.tags.count("tr") == 5  # a header and four hits
    assert repr(hits).startswith("hybrid: 4 hits for 'subword n-grams for rare words' in ")
    bm25 = lab.search("subword n-grams", k=2, retriever="bm25")
    assert bm25.retriever == "bm25" and len(bm25.hits) == 2


def test_ask_answers_with_chips_that_lead_to_its_sources_and_a_verdict_per_claim(lab):
    from rag.serve.commands import print_answer

    answer = lab.ask(GOLD_QUESTION, k=3)
    d = answer.to_dict()
    assert _no_latency(d) == _no_latency(lab.desk.ask(GOLD_QUESTION, k=3))
    assert d["answerer"] == "extractive" and not d["refused"] and len(d["citations"]) == 3
    assert answer.judgement["status"] == "scored" and answer.claims
    assert all(c["label"] in ("supported", "unsupported", "not_found") for c in answer.claims)
    html = answer._repr_html_()
    page = _Page(html)
    cited = sorted({int(n) for n in re.findall(r"\[(\d+)\]", answer.answer)})
    assert cited and page.anchors, html
    assert set(page.anchors) <= set(page.ids), "a chip points at no source"
    assert sorted(int(a.rsplit("-", 1)[1]) for a in set(page.anchors)) == cited
    assert html.count('class="rag-v rag-v-') == len(answer.claims)  # one verdict per claim
    assert page.tags.count("li") == len(answer.citations)  # the numbered sources
    # the plain repr is what `rag ask` prints
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_answer(d)
    assert repr(answer) == buf.getvalue().rstrip("\n") and "\nSources:\n" in repr(answer)
    assert list(answer.to_frame()["n"]) == [1, 2, 3]
    with pytest.raises(ToolInputError, match="question"):
        lab.ask("   ")


def test_html_escapes_what_it_shows(lab):
    hits = lab.search("<script>alert(1)</script> n-grams", k=1, retriever="bm25")
    html = hits._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<script" not in lab.ask("<b>n-grams</b>?", k=1, judge=False)._repr_html_()


def test_chat_rewrites_a_follow_up_and_keeps_the_conversation(lab):
    chat = lab.chat(judge=False, k=3)
    assert "no turns yet" in repr(chat)
    first = chat.ask("What is the subword model of fastText?")
    second = chat.ask("How is it trained?")
    assert not first.rewritten and second.rewritten and second.rewriter == "rules"
    assert (
        second.rephrased_query == "How is fastText trained?"
        and second.message == "How is it trained?"
    )
    d = second.to_dict()
    assert {"rephrased_query", "rewritten", "rewriter", "rewrite_reason"} <= set(d)
    assert "message" not in d and d["query"] == second.rephrased_query  # as POST /chat returns
    assert [m["role"] for m in chat.messages] == ["user", "assistant", "user", "assistant"]
    assert chat.messages[3]["content"] == second.answer
    assert chat.to_dict()["turns"][1] == d
    assert list(chat.to_frame()["rewritten"]) == [False, True]
    html = chat._repr_html_()
    assert "How is fastText trained?" in html and "rewritten by rules" in html
    with pytest.raises(ToolInputError, match="message"):
        chat.ask("")
    assert len(chat.turns) == 2


def test_compare_grades_each_retriever_against_the_gold(lab):
    c = lab.compare(GOLD_QUESTION, retrievers=["bm25", "dense", "hybrid"], k=5)
    assert c.gold is not None and c.gold["qid"] == "a-7" and c.gold["papers"] == [FASTTEXT]
    assert c.gold["chunks"], "the gold quote is in no served chunk"
    assert list(c.runs) == ["bm25", "dense", "hybrid"]
    frame = c.to_frame()
    assert len(frame) == 15
    for name, run in c.runs.items():
        assert _no_latency(run) == _no_latency(lab.desk.search(GOLD_QUESTION, k=5, retriever=name))
        rows = frame[frame["retriever"] == name]
        o = c.overlap[name]
        assert o["gold_chunks_found"] == int(rows["gold"].sum())
        assert o["recall@5"] == round(o["gold_chunks_found"] / len(c.gold["chunks"]), 3)
        first = rows[rows["gold"]]["rank"]
        assert o["first_gold_rank"] == (int(first.min()) if len(first) else None)
    assert "★ gold" in c._repr_html_() and "gold a-7" in repr(c)
    plain = lab.compare(OTHER_QUESTION, retrievers=["bm25", "hybrid"], k=3)
    assert plain.gold is None and plain.overlap == {} and plain.to_frame()["gold"].isna().all()
    assert "without grades" in plain._repr_html_()
    with pytest.raises(ToolInputError, match="retriever"):
        lab.compare(OTHER_QUESTION, retrievers=["bm25", "nosuch"])
    with pytest.raises(ToolInputError, match="retrievers"):
        lab.compare(OTHER_QUESTION, retrievers=[])


def test_judge_checks_a_claim_against_a_chunk_or_a_passage(lab):
    hit = lab.search("we extract all the n-grams for n greater or equal to 3", k=1).hits[0]
    v = lab.judge("All character n-grams of length 3 to 6 are extracted.", hit["chunk_id"])
    assert (
        v.chunk_id == hit["chunk_id"]
        and v.source == lab.read(chunk_id=hit["chunk_id"]).chunks[0]["text"]
    )
    assert v.supported and v.judge.startswith("offline-v2") and 0.5 <= v.score <= 1
    off = lab.judge("The model is trained on images of cats.", "fastText learns word vectors.")
    assert off.chunk_id is None and not off.supported
    assert set(v.to_dict()) == {"claim", "source", "chunk_id", "label", "score", "reason", "judge"}
    assert "supported" in v._repr_html_() and len(v.to_frame()) == 1
    with pytest.raises(ToolInputError, match="claim"):
        lab.judge(" ", "text")


def test_paper_and_read_are_the_desks(lab):
    paper = lab.paper(SBERT)
    assert paper.to_dict() == lab.desk.get_paper(SBERT)
    assert paper.title.startswith("Sentence-BERT") and paper.sections[0]["page"] == 1
    assert list(paper.to_frame().columns) == ["section", "page"]
    assert "arxiv.org/abs/1908.10084" in paper._repr_html_()
    page = lab.read(SBERT, page=2)
    assert page.to_dict() == lab.desk.read(SBERT, 2)
    assert page.chunks and all(c["page_start"] <= 2 <= c["page_end"] for c in page.chunks)
    assert len(page.to_frame()) == len(page.chunks) and "p. 2" in repr(page)
    with pytest.raises(UnknownPaperError):
        lab.paper("2501.99999")


def test_citations_and_related_are_tables(lab):
    cites = lab.citations(SBERT)
    assert cites.to_dict() == lab.desk.citations(SBERT)
    assert (cites.n_cites, cites.n_cited_by) == (15, 8)
    frame = cites.to_frame()
    assert (frame["direction"] == "cites").sum() == 15 and (
        frame["direction"] == "cited_by"
    ).sum() == 8
    assert _Page(cites._repr_html_()).tags.count("table") == 2
    related = lab.related(SBERT, k=3)
    assert related.to_dict() == lab.desk.related(SBERT, k=3)
    assert [r["rank"] for r in related.related] == [1, 2, 3]
    assert {r["arxiv_id"] for r in related.related} <= SMOKE_PAPERS - {SBERT}
    assert list(related.to_frame().columns) == ["rank", "score", "arxiv_id", "title"]
    assert _Page(related._repr_html_()).tags.count("tr") == 4
    assert repr(related).startswith(f"related to {SBERT} by fusion:")


def test_summarize_marks_each_sentence_with_its_verdict(lab):
    s = lab.summarize(SBERT, sentences=2)
    assert s.to_dict() == lab.desk.summarize(SBERT, sentences=2)
    assert s.to_dict()["text"] == s.text_ and s.method == "extractive" and len(s.sentences) == 2
    assert list(s.to_frame()["label"]) == [x["verdict"]["label"] for x in s.sentences]
    assert s._repr_html_().count('class="rag-v rag-v-') == 2
    assert repr(s).splitlines()[0] == f"{s.title} ({SBERT}), extractive summary:"


def test_papers_lists_the_served_corpus(lab):
    papers = lab.papers()
    assert papers.to_dict() == lab.desk.list_papers()
    assert papers.n_papers == 5 and set(papers.to_frame()["arxiv_id"]) == SMOKE_PAPERS


def test_rag_ask_prints_only_the_answer_unless_asked_for_logs(lab):
    """The CLI's quiet default, in a real process (logging is configured once per process):
    stdout is the answer, stderr empty; -v (after the command or before it) shows the logs."""
    import os
    import subprocess
    import sys

    where = ["--profile", "smoke", "--index-dir", lab._serve.index_dir]
    lab.search("warm the served index", k=1)

    def rag(*argv: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "rag.cli", *argv]
        return subprocess.run(
            cmd, capture_output=True, text=True, env=dict(os.environ), timeout=300
        )

    quiet = rag("ask", "Which n-gram lengths does the subword skipgram use?", "-k", "2", *where)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == "" and "\nSources:\n" in quiet.stdout
    loud = rag("ask", "-v", "Which n-gram lengths?", "-k", "1", "--json", *where)
    assert loud.returncode == 0 and "INFO rag." in loud.stderr
    assert "faiss.loader" not in loud.stderr and "ModuleNotFoundError" not in loud.stderr
    assert json.loads(loud.stdout)["query"] == "Which n-gram lengths?"
    before = rag("-v", "search", "n-grams", "-k", "1", *where)
    assert "INFO rag." in before.stderr and before.stdout.startswith("hybrid: 1 hits")


EXPLORE = "notebooks/explore.ipynb"
#: Debian's Chromium through Playwright (skipped with the reason where it is not installed)
browser = test_browser.browser


@pytest.fixture(scope="module")
def explore(tmp_path_factory, shared_dir):
    """``notebooks/explore.ipynb`` run headless on the smoke profile and rendered as the report
    renders a page (published and with code): ``(folder, record)``."""
    from rag import paths
    from rag.report import runner

    out = tmp_path_factory.mktemp("explore")
    rec = runner.NotebookRun(name="explore", parameters={"profile": "smoke"})
    nb = paths.resolve(EXPLORE)
    runner.execute_and_render(nb, out / nb.name, rec, runner.ensure_kernel(), pages=["explore"])
    return out, rec


@pytest.mark.notebooks
def test_the_explore_notebook_runs_top_to_bottom(explore):
    import nbformat

    out, rec = explore
    assert rec.status == "ok", rec.error
    nb = nbformat.read(out / "explore.ipynb", as_version=4)
    cells = [c for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    code = [c for c in cells if c.cell_type == "code"]
    assert len(cells) == 10 and "parameters" in code[0].metadata["tags"]
    shown = [
        next((o["data"] for o in c.outputs if o.get("output_type") == "execute_result"), {})
        for c in code
    ]
    assert "not loaded yet" in shown[1]["text/plain"]  # the lab says what it holds, lazily
    for data in shown[2:]:  # search, ask, compare, citations, related, summary
        assert "rag-lab" in data.get("text/html", ""), data.get("text/plain", "")[:200]
    assert "★ gold" in shown[4]["text/html"]  # the compared question is a gold question


@pytest.mark.notebooks
@pytest.mark.browser
def test_the_explore_page_shows_tables_and_an_answer_in_a_browser(explore, browser):
    from tests import pagecheck

    out, _ = explore
    page = out / "explore.html"
    assert pagecheck.check_page(browser, page).problems == []
    assert pagecheck.check_page(browser, out / "explore.code.html", published=False).problems == []
    view = browser.new_page(viewport={"width": pagecheck.WIDTH, "height": 900})
    try:
        view.goto(page.resolve().as_uri(), wait_until="load")
        seen = view.evaluate(
            """() => {
              const shown = e => e.getBoundingClientRect().height > 0;
              const tables = [...document.querySelectorAll('.rag-lab table')].filter(shown);
              const answer = [...document.querySelectorAll('.rag-answer')].filter(shown);
              return {tables: tables.length, rows: tables.map(t => t.rows.length),
                      answer: answer.map(a => a.innerText),
                      chips: [...document.querySelectorAll('a.rag-chip')].filter(shown).length};
            }"""
        )
    finally:
        view.close()
    # search, compare (rankings and grades), citations (two directions), related
    assert seen["tables"] >= 6 and all(n > 1 for n in seen["rows"]), seen
    assert seen["chips"] >= 1 and any("supported" in a for a in seen["answer"]), seen
