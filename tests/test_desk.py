"""The paper desk's HTTP and CLI doors: the same :class:`rag.serve.desk.Desk` answers behind
``/papers/{arxiv_id}``, ``/citations``, ``/related``, ``/summary`` and ``rag cites``,
``rag related``, ``rag summary``. The MCP door is ``tests/test_mcp.py``; every status the routes
document is provoked in ``tests/test_serve_contract.py``.

Routes run in process over the two-paper test lab; the CLI runs ``rag.cli.main`` on the smoke
profile's real index, built (or found) in the project's cache as ``tests/test_cli.py`` builds it.
"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from rag import paths
from rag.papers.graph import read_citations
from rag.report.profiles import load_profile
from rag.serve.app import create_app
from rag.serve.config import ServeSettings
from rag.serve.desk import Desk, ToolInputError, UnknownPaperError
from rag.types import Block, ParsedPaper
from tests.serve_support import TEXTS, tiny_lab
from tests.test_cli import rag, smoke

FASTTEXT_CLS = "1607.01759"  # served by the test lab: 4 resolved references, cited once
SBERT = "1908.10084"  # a smoke paper: 15 resolved references, cited by 8 corpus papers
SMOKE_PAPERS = set(load_profile("smoke")["all"]["paper_ids"])
OPEN = ServeSettings(allow_network=False, rate_limit_per_minute=0)


def graph_rows():
    return read_citations(paths.resolve("data/citations.jsonl"))


@pytest.fixture()
def lab(tmp_cache, tmp_path):
    return tiny_lab(tmp_path / "served")


@pytest.fixture()
def http(lab):
    with TestClient(create_app(lab, serve=OPEN, api_key="")) as c:
        yield c


def test_routes_answer_what_the_desk_answers(lab, http):
    desk = Desk(lab)
    for path, expected in [
        (f"/papers/{FASTTEXT_CLS}", desk.get_paper(FASTTEXT_CLS)),
        (f"/papers/{FASTTEXT_CLS}/citations", desk.citations(FASTTEXT_CLS)),
        (f"/papers/{FASTTEXT_CLS}/related?k=1&method=text", desk.related(FASTTEXT_CLS, 1, "text")),
    ]:
        r = http.get(path)
        assert r.status_code == 200, r.text
        assert r.json() == expected, path
    listed = http.get("/papers").json()
    assert listed == desk.list_papers()
    assert {p["arxiv_id"] for p in listed["papers"]} == set(TEXTS)
    assert {p["category"] for p in listed["papers"]} == {"cs.CL"}


def test_citations_route_is_the_graph_both_ways(http):
    d = http.get(f"/papers/{FASTTEXT_CLS}/citations").json()
    rows = graph_rows()
    assert [x["arxiv_id"] for x in d["cites"]] == [
        r.cited for r in rows if r.citing == FASTTEXT_CLS
    ]
    assert [x["arxiv_id"] for x in d["cited_by"]] == sorted(
        r.citing for r in rows if r.cited == FASTTEXT_CLS
    )
    assert (d["n_cites"], d["n_cited_by"]) == (4, 1)
    outside = [x for x in d["cites"] if not x["in_corpus"]]
    assert outside and all(x["title"] == "" and x["how"] == "arxiv_id" for x in outside)


def test_get_paper_lists_sections_in_page_order(http):
    d = http.get(f"/papers/{FASTTEXT_CLS}").json()
    assert [s["section"] for s in d["sections"]] == [s for s, _, _ in TEXTS[FASTTEXT_CLS]]
    assert [s["page"] for s in d["sections"]] == [1, 2, 3]
    assert d["version"].startswith("v") and d["url"] == f"https://arxiv.org/abs/{FASTTEXT_CLS}"


def test_bad_paper_and_query_values_are_named(http):
    r = http.get("/papers/2501.99999/related")
    assert r.status_code == 404 and r.json()["error"] == "unknown paper"
    assert "2501.99999" in r.json()["detail"]
    r = http.get(f"/papers/{FASTTEXT_CLS}/related", params={"k": 51})
    assert r.status_code == 422 and r.json()["detail"].startswith("query.k:")
    assert r.json()["detail"].endswith("(got '51')")
    r = http.get(f"/papers/{FASTTEXT_CLS}/related", params={"method": "magic"})
    assert r.status_code == 422 and r.json()["detail"].startswith("query.method:")
    assert "(got 'magic')" in r.json()["detail"]


def test_the_desk_names_a_bad_argument_and_its_value(lab):
    desk = Desk(lab)
    with pytest.raises(UnknownPaperError, match="9999.99999"):
        desk.citations("9999.99999")
    with pytest.raises(ToolInputError, match=r"k=0") as e:
        desk.search("fastText", k=0)
    assert e.value.field == "k"
    with pytest.raises(ToolInputError, match="query"):
        desk.search("   ")
    with pytest.raises(ToolInputError, match="page"):
        desk.read(arxiv_id=FASTTEXT_CLS)
    with pytest.raises(ToolInputError, match="gguf: models are served only") as e:
        desk.summarize(FASTTEXT_CLS, model="gguf:/tmp/any.gguf")  # no file opened by request
    assert e.value.field == "model"
    with pytest.raises(ToolInputError, match="chunk_id alone"):
        desk.read(arxiv_id=FASTTEXT_CLS, page=1, chunk_id="x")


def test_a_paper_added_while_serving_is_on_the_desk(lab):
    desk = Desk(lab)
    assert [r["arxiv_id"] for r in desk.related(FASTTEXT_CLS, method="text")["related"]] == [
        "1810.08699"
    ]
    text = (
        "fastText classifies text with a bag of words and n-grams fed to a linear classifier. "
        "Sentences are represented as averaged word representations for text classification."
    )
    blocks = [
        Block(1, "heading", "", "Introduction"),
        Block(1, "body", "Introduction", text),
        Block(2, "body", "Introduction", text),
    ]
    parsed = ParsedPaper("upload-0123456789ab", 2, blocks)
    assert lab.index.add_paper(parsed, "An uploaded note", "upload") > 0
    paper = desk.get_paper("upload-0123456789ab")
    assert (paper["source"], paper["category"], paper["version"]) == ("upload", "", "")
    assert paper["pages"] == 2 and paper["sections"][0] == {"section": "Introduction", "page": 1}
    ranked = desk.related(FASTTEXT_CLS, method="text")["related"]
    assert {r["arxiv_id"] for r in ranked} == {"1810.08699", "upload-0123456789ab"}
    assert ranked[0]["arxiv_id"] == "upload-0123456789ab"  # it shares fastText's words
    links = desk.citations("upload-0123456789ab")
    assert (links["cites"], links["cited_by"]) == ([], [])


# -- the CLI door ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory, shared_dir):
    return str(tmp_path_factory.mktemp("desk-cli") / "served")


def test_the_desk_commands_load_the_lab_when_they_run(lab, monkeypatch, capsys):
    """The desk commands find ``commands.open_lab`` at call time, as ``rag ask`` does: a lab
    bound when the module was first imported would outlive whoever replaced it then."""
    from rag.serve import commands, desk_commands

    assert desk_commands.add_parsers  # imported before the lab is replaced
    monkeypatch.setattr(commands, "open_lab", lambda args, **kw: lab)
    code, out, err = rag(capsys, "cites", FASTTEXT_CLS, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d == Desk(lab).citations(FASTTEXT_CLS) and len(d["cites"]) == 4


def test_rag_cites_prints_both_directions(index_dir, capsys):
    code, out, err = rag(capsys, "cites", SBERT, "--json", *smoke(index_dir))
    assert code == 0, err
    d = json.loads(out)
    rows = graph_rows()
    assert [x["arxiv_id"] for x in d["cites"]] == [r.cited for r in rows if r.citing == SBERT]
    assert d["n_cited_by"] == 8
    code, out, err = rag(capsys, "cites", SBERT, *smoke(index_dir))
    assert code == 0, err
    assert f"{SBERT} cites (15):" in out and f"{SBERT} is cited by (8):" in out


def test_rag_related_ranks_the_other_smoke_papers(index_dir, capsys):
    code, out, err = rag(capsys, "related", SBERT, "--method", "text", "--json", *smoke(index_dir))
    assert code == 0, err
    d = json.loads(out)
    assert {r["arxiv_id"] for r in d["related"]} == SMOKE_PAPERS - {SBERT}
    code, out, err = rag(capsys, "related", SBERT, "-k", "2", *smoke(index_dir))
    assert code == 0, err
    assert out.startswith(f"related to {SBERT} by fusion:") and out.count("\n") == 3


def test_rag_summary_prints_judged_sentences(index_dir, capsys):
    code, out, err = rag(capsys, "summary", SBERT, "--sentences", "2", "--json", *smoke(index_dir))
    assert code == 0, err
    d = json.loads(out)
    assert d["paper_id"] == SBERT and 1 <= len(d["sentences"]) <= 2
    assert all(s["verdict"]["label"] for s in d["sentences"])
    code, out, err = rag(capsys, "summary", SBERT, "--sentences", "1", *smoke(index_dir))
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0] == f"{d['title']} ({SBERT}), extractive summary:" and len(lines) == 3
    assert lines[2].startswith("  [") and "(p. " in lines[2]


def test_rag_cites_names_an_unknown_paper(index_dir, capsys):
    code, out, err = rag(capsys, "cites", "2501.99999", *smoke(index_dir))
    assert code == 2 and "2501.99999" in err and out == ""


def test_rag_related_refuses_a_bad_k_before_loading(capsys):
    code, out, err = rag(capsys, "related", SBERT, "-k", "0", "--profile", "smoke")
    assert code == 2 and "'0' is not a whole number from 1 to 50" in err
