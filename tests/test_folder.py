"""A folder of PDFs under any names as a corpus: identity by content, titles from the PDFs,
answers citing the file, citations between the folder's papers, bad files named, growth by the
paper counted from the embedding cache.

The folder holds two corpus PDFs copied under arbitrary names, papers written here with PyMuPDF
(title, authors, a body, a reference list citing another of them) and one file of each bad kind.
Embeddings are the bag-of-words test embedder, so the run is offline and fast.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path

import pymupdf
import pytest

from rag import paths
from rag.cli import main
from rag.corpus import parse as parse_mod
from rag.index.embed_cache import cache_path
from rag.index.folder import build_folder
from tests.fakeembed import BowEmbedder

EMB = "tests.fakeembed:BowEmbedder"
ALPHA = "Gradient Routing in Shallow Lexical Retrievers"
BETA = "Sparse Term Weights for Passage Ranking"
GAMMA = "Über Zettelkasten Retrieval with Margin Notes"
CORPUS = {
    "1607.01759": "Bag of Tricks for Efficient Text Classification",
    "1810.08699": "pioNER: Datasets and Baselines for Armenian Named Entity Recognition",
}


def _paper(path: Path, title: str, authors: str, body: list[str], refs: list[str]) -> Path:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 90), title, fontsize=17, fontname="hebo")
    page.insert_text((72, 120), authors, fontsize=11, fontname="helv")
    page.insert_text((72, 140), "Institute of Test Papers, test@example.org", fontsize=9)
    y = 180
    page.insert_text((72, y), "Abstract", fontsize=11, fontname="hebo")
    for para in body:
        y += 16
        page.insert_text((72, y), para, fontsize=10, fontname="helv")
    y += 30
    page.insert_text((72, y), "References", fontsize=11, fontname="hebo")
    for i, r in enumerate(refs, 1):
        y += 16
        page.insert_text((72, y), f"[{i}] {r}", fontsize=9, fontname="helv")
    doc.save(path)
    doc.close()
    return path


def _alpha(path: Path) -> Path:
    return _paper(path, ALPHA, "Ada Lovelace and Alan Turing", [
        "We route gradients through a shallow lexical retriever with a learned gate.",
        "The gate keeps the quokka vocabulary of the corpus stable during training.",
        "On three benchmarks the routed retriever improves recall by four points.",
    ], [f"Grace Hopper. {BETA}. In Proceedings of the Test Conference, 2021.",
        "John Doe. An Unrelated Study of Bridges. Journal of Bridges, 2019."])  # fmt: skip


def _beta(path: Path) -> Path:
    return _paper(path, BETA, "Grace Hopper", [
        "Sparse term weights rank passages by learned impact scores per term.",
        "Impact scores are predicted by a small encoder over the passage tokens.",
    ], ["Jane Roe. Counting Words in Documents. Journal of Counting, 2010."])  # fmt: skip


def _gamma(path: Path) -> Path:
    return _paper(
        path,
        GAMMA,
        "Émile Zola",
        [
            "Margin notes in a Zettelkasten form links that a retriever can follow.",
        ],
        [],
    )


def _encrypted(path: Path) -> None:
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "secret text")
    doc.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="o", user_pw="u")


def _image_only(path: Path) -> None:
    doc = pymupdf.open()
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 8, 8), False)
    doc.new_page().insert_image(pymupdf.Rect(72, 72, 144, 144), pixmap=pix)
    doc.save(path)


def _thesis(path: Path, pages: int = 500) -> None:
    doc = pymupdf.open()
    for n in range(pages):
        doc.new_page().insert_text((72, 72), f"Chapter page {n + 1}")
    doc.save(path)


@pytest.fixture(scope="module")
def world(tmp_path_factory, shared_dir):
    """The folder, a cache root, and the first build's summary."""
    root = tmp_path_factory.mktemp("folder")
    folder, cache = root / "My Papers", root / "cache"
    (folder / "sub").mkdir(parents=True)
    for aid, name in zip(CORPUS, ("smith2021.pdf", "sub/Armenian NER final (1).pdf"), strict=True):
        shutil.copy(shared_dir / "corpus" / "pdfs" / f"{aid}.pdf", folder / name)
    _alpha(folder / "alpha draft.pdf")
    shutil.copy(folder / "alpha draft.pdf", folder / "sub" / "alpha-copy.PDF")
    _beta(folder / "beta.pdf")
    _gamma(folder / "Über Zettel – v2.pdf")
    (folder / "empty.pdf").write_bytes(b"")
    (folder / "notes.pdf").write_text("these are my notes, not a PDF\n")
    _encrypted(folder / "locked.pdf")
    _image_only(folder / "scan.pdf")
    _thesis(folder / "thesis.pdf")
    os.symlink("loop.pdf", folder / "loop.pdf")
    os.symlink("..", folder / "sub" / "up")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(paths.CACHE_ENV, str(cache))
        build = build_folder(folder, embedder=EMB)
    return {"folder": folder, "cache": cache, "build": build}


@pytest.fixture()
def env(world, monkeypatch):
    monkeypatch.setenv(paths.CACHE_ENV, str(world["cache"]))
    return world


def _ids(build) -> dict[str, str]:
    return {p.paper_id: p.title for p in build.papers}


def _cached_vectors() -> int:
    with sqlite3.connect(cache_path(BowEmbedder.fingerprint)) as con:
        return con.execute("SELECT COUNT(*) FROM vec").fetchone()[0]


def test_ids_titles_duplicates_and_bad_files(env):
    b = env["build"]
    ids = _ids(b)
    for aid, title in CORPUS.items():  # the stamp gives the arXiv id, page 1 the title
        assert ids[aid] == title
    made = {t: pid for pid, t in ids.items() if pid.startswith("pdf-")}
    assert set(made) == {ALPHA, BETA, GAMMA}
    alpha = next(p for p in b.papers if p.title == ALPHA)
    assert alpha.files == ["alpha draft.pdf", "sub/alpha-copy.PDF"]  # one paper, two names
    assert alpha.authors == ["Ada Lovelace", "Alan Turing"]
    assert len(b.papers) == 5
    bad = {r["file"]: (r["stage"], r["reason"]) for r in b.summary["bad"]}
    assert bad["empty.pdf"] == ("scan", "zero-byte file")
    assert bad["loop.pdf"][1].startswith("symlink loop")
    assert bad["sub/up"][1].startswith("symlink loop")
    assert "not a readable PDF" in bad["notes.pdf"][1]
    assert "encrypted" in bad["locked.pdf"][1]
    assert bad["scan.pdf"][0] == "parse" and bad["scan.pdf"][1].startswith("image_only")
    assert "scan.pdf has only images" in bad["scan.pdf"][1]  # the file, not its link, is named
    assert bad["thesis.pdf"][0] == "parse" and "too_many_pages" in bad["thesis.pdf"][1]
    assert len(bad) == 7
    lines = (b.root / "folder-manifest.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["papers"] == 5 and len(lines) == 6


def test_rename_keeps_ids_and_embeds_nothing(env, tmp_path):
    before = _ids(env["build"])
    moved = tmp_path / "renamed"
    shutil.copytree(env["folder"], moved, symlinks=True)
    (moved / "beta.pdf").rename(moved / "sub" / "Hopper - Sparse weights.pdf")
    n = _cached_vectors()
    b = build_folder(moved, embedder=EMB)
    assert _ids(b) == before
    assert _cached_vectors() == n


def test_ask_cites_the_file_and_citations_resolve(env, capsys):
    folder = str(env["folder"])
    rc = main(["ask", "--pdfs", folder, "--embedder", EMB, "--json", "-k", "3",
               "What keeps the quokka vocabulary stable?"])  # fmt: skip
    assert rc == 0
    out, err = capsys.readouterr()
    d = json.loads(out)
    assert "not indexed: empty.pdf (scan): zero-byte file" in err  # named even when quiet
    cited = [c for c in d["citations"] if c["cited"]] or d["citations"][:1]
    assert cited[0]["file"] == "alpha draft.pdf"

    assert main(["cites", "--pdfs", folder, "--embedder", EMB, "alpha draft.pdf"]) == 0
    out = capsys.readouterr().out
    assert "cites (1):" in out and BETA in out  # the unresolved reference is no link

    from rag import Lab

    lab = Lab(pdfs=folder, embedder=EMB)
    ids = {t: pid for pid, t in _ids(env["build"]).items()}
    links = lab.desk.citations(ids[ALPHA])
    assert [(c["arxiv_id"], c["how"]) for c in links["cites"] if c["in_corpus"]] == [
        (ids[BETA], "title")
    ]
    assert [c["arxiv_id"] for c in lab.desk.citations(ids[BETA])["cited_by"]] == [ids[ALPHA]]
    assert lab.desk.get_paper("beta.pdf")["arxiv_id"] == ids[BETA]  # a file names its paper too
    assert "(alpha draft.pdf, p. 1" in repr(lab.search("quokka vocabulary", k=1))
    record = lab.paper(ids[GAMMA])  # the notebook door: the file, no arXiv link for a content id
    assert f"({ids[GAMMA]}, Über Zettel – v2.pdf)" in repr(record)
    assert "arxiv.org/abs/pdf-" not in record._repr_html_()
    paper = lab.desk.get_paper(ids[GAMMA])
    assert paper["file"] == "Über Zettel – v2.pdf" and paper["url"] == ""
    assert ids[BETA] in {
        r["arxiv_id"] for r in lab.desk.related(ids[ALPHA], method="text")["related"]
    }


def test_adding_a_paper_embeds_only_its_chunks_and_removing_drops_it(env, tmp_path):
    grown = tmp_path / "grown"
    shutil.copytree(env["folder"], grown, symlinks=True)
    build_folder(grown, embedder=EMB)  # the folder's own first run: everything from the caches
    n0 = _cached_vectors()
    body = ["Late interaction scores every query token against every passage token."]
    _paper(grown / "delta.pdf", "Late Interaction for Tiny Indexes", "Ann Other", body, [])
    b = build_folder(grown, embedder=EMB)
    new = [c for c in b.indexed.chunks if c.paper_id not in _ids(env["build"])]
    assert {c.paper_id for c in new} == {
        next(p for p in b.papers if p.file == "delta.pdf").paper_id
    }
    assert _cached_vectors() - n0 == len({c.text for c in new}) > 0
    assert b.summary["changes"]["added"] == [new[0].paper_id]
    body.append("A second version adds a paragraph on pruning the token index.")
    _paper(grown / "delta.pdf", "Late Interaction for Tiny Indexes", "Ann Other", body, [])
    v2 = build_folder(grown, embedder=EMB)  # a changed file: a new version, the old one leaves
    now = next(p for p in v2.papers if p.file == "delta.pdf").paper_id
    assert now != new[0].paper_id and new[0].paper_id not in _ids(v2)
    assert v2.summary["changes"]["file_now_another_paper"] == [
        {"file": "delta.pdf", "was": new[0].paper_id, "now": now}
    ]
    (grown / "delta.pdf").unlink()
    b2 = build_folder(grown, embedder=EMB)
    assert b2.summary["changes"]["removed"] == [now]
    assert _ids(b2) == _ids(env["build"])


def test_a_file_changing_while_indexed_is_named_and_the_rest_indexed(env, tmp_path, monkeypatch):
    folder = tmp_path / "moving"
    folder.mkdir()
    _alpha(folder / "alpha.pdf")
    target = _beta(folder / "beta.pdf")
    real = parse_mod.parse_pdf

    def rewriting(path, settings):
        out = real(path, settings)
        if Path(path).resolve() == target.resolve():
            _gamma(target)  # another program saves the file while it is parsed
        return out

    monkeypatch.setattr(parse_mod, "parse_pdf", rewriting)
    b = build_folder(folder, embedder=EMB)
    assert [p.title for p in b.papers] == [ALPHA]
    assert [(r["file"], r["stage"]) for r in b.summary["bad"]] == [("beta.pdf", "parse")]
    assert "changed on disk" in b.summary["bad"][0]["reason"]
    monkeypatch.setattr(parse_mod, "parse_pdf", real)
    again = build_folder(folder, embedder=EMB)  # the next run indexes the file's new content
    assert sorted(p.title for p in again.papers) == sorted([ALPHA, GAMMA])


def test_a_folder_without_pdfs_is_an_error_naming_it(env, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["search", "--pdfs", str(tmp_path / "empty"), "--embedder", EMB, "x"]) == 2
    assert "holds no .pdf file" in capsys.readouterr().err


def test_mcp_serves_the_folders_papers_as_paper_resources(env, tmp_path):
    from mcp import StdioServerParameters

    from tests.test_mcp import Client

    ids = {t: pid for pid, t in _ids(env["build"]).items()}
    args = ["-m", "rag.cli", "mcp", "--pdfs", str(env["folder"]), "--embedder", EMB]
    params = StdioServerParameters(
        command=sys.executable, args=args, env=dict(os.environ), cwd=str(paths.project_root())
    )
    with (tmp_path / "server.log").open("w") as errlog:
        c = Client(params, errlog)
        try:
            r = c.run(lambda s: s.read_resource(f"paper://{ids[GAMMA]}"))
            d = json.loads(r.contents[0].text)
            listed = c.run(lambda s: s.list_resources())
        finally:
            c.close()
    assert (d["title"], d["file"], d["authors"]) == (GAMMA, "Über Zettel – v2.pdf", ["Émile Zola"])
    assert {f"paper://{pid}" for pid in ids.values()} <= {str(x.uri) for x in listed.resources}


def test_the_folders_arxiv_papers_become_a_manifest_the_report_loads(env, tmp_path):
    from rag.corpus.papers import corpus_papers
    from rag.index.folder_manifest import arxiv_manifest

    r = arxiv_manifest(env["folder"], tmp_path / "mine.jsonl")
    assert sorted(r["papers"]) == sorted(CORPUS)
    left = {row["file"]: row["stage"] for row in r["left_out"]}
    assert left["beta.pdf"] == "manifest" and left["empty.pdf"] == "scan"  # no stamp; bad file
    papers, parsed = corpus_papers(r["manifest"], pdf_mirror=r["mirror"])  # as the notebooks do
    assert {p.arxiv_id: p.title for p in papers} == CORPUS
    assert [p.primary_category for p in papers] == ["cs.CL", "cs.CL"]
    assert all(p.ok for p in parsed) and len(parsed) == 2


def test_a_folders_first_run_is_announced_and_embedder_needs_pdfs(env, tmp_path, capsys):
    folder = tmp_path / "new"
    folder.mkdir()
    _beta(folder / "b.pdf")
    args = ["search", "--pdfs", str(folder), "--embedder", EMB, "--json", "impact scores"]
    assert main(args) == 0
    assert "for the first time" in capsys.readouterr().err
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "for the first time" not in err and json.loads(out)["hits"][0]["file"] == "b.pdf"
    assert main(["search", "--embedder", EMB, "x"]) == 2  # a profile's embedder is its parameter
    assert "--embedder chooses a --pdfs folder's embedder" in capsys.readouterr().err
