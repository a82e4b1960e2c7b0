"""The README stays a page a newcomer reads, and every link in it, in docs/ and on the front page
resolves in a clone."""

from __future__ import annotations

import html
import re
from pathlib import Path
from types import SimpleNamespace

from rag import paths
from rag.report import index_page
from rag.report.index_page import DOCS, docs_html

ROOT = paths.project_root()
#: Markdown links ``[text](target)``; external ones (``http:``, ``mailto:``) are skipped.
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _relative_links(md: Path) -> list[str]:
    return [t for t in LINK.findall(md.read_text()) if not re.match(r"^[a-z]+:", t)]


def test_readme_is_short():
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= 120, f"README.md has {n} lines: move detail into docs/ (limit 120)"


def test_readme_and_docs_links_resolve():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    bad = [
        f"{md.relative_to(ROOT)} -> {t}"
        for md in pages
        for t in _relative_links(md)
        if not (md.parent / t.split("#", 1)[0]).exists()
    ]
    assert not bad, f"links to missing files: {bad}"


def test_readme_links_every_docs_page():
    linked = {Path(t.split("#", 1)[0]).name for t in _relative_links(ROOT / "README.md")}
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.name not in linked]
    assert not missing, f"README.md does not link docs/{missing}"


def test_front_page_links_docs_from_outputs_inside_the_project():
    out = ROOT / "outputs" / "default"
    page = docs_html(out)
    hrefs = re.findall(r"href='([^']+)'", page)
    assert [Path(h).name for h in hrefs] == [name for name, _ in DOCS]
    for h in hrefs:
        assert h.startswith("../../docs/"), h
        assert (out / h).resolve().is_file(), h


def test_front_page_links_every_docs_page():
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert sorted(name for name, _ in DOCS) == pages


def _front_page(out: Path, names: list[str]) -> str:
    runs = [
        SimpleNamespace(name=n, status="ok", wall_s=1.0, parameters={}, error=None) for n in names
    ]
    out.mkdir()
    return index_page.write_index(out, "smoke", runs).read_text()


def test_front_page_abstract_and_caveats_name_a_further_notebook_only_when_it_ran(tmp_path):
    more, caveat = index_page.ABSTRACT_MORE["07"], index_page.CANNOT_SEE_MORE["07"]
    with_07 = _front_page(tmp_path / "a", ["01_ingest", "06_conversation", "07_papers"])
    assert html.escape(more) in with_07 and html.escape(caveat) in with_07
    # 06 has no sentence of its own: it is named after the abstract; 07 is described in it
    assert "Further: 06_conversation." in with_07 and "Further: 06_conversation; 07" not in with_07
    without = _front_page(tmp_path / "b", ["01_ingest", "05_faithfulness"])
    assert html.escape(more) not in without and html.escape(caveat) not in without
    assert "Further:" not in without and html.escape(index_page.ABSTRACT_TAIL) in without


def test_front_page_names_no_folder_outside_the_project(tmp_path):
    assert docs_html(tmp_path / "outputs" / "smoke") == ""
