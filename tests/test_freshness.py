"""The published pages and the README's numbers are true to the code (rag.report.freshness).

Nothing here executes a notebook. A page is checked against its notebook at ``HEAD``: papermill's
inserted ``injected-parameters`` cell is the one difference allowed (and a path literal the
publishing scrub replaced). The tests that show the checks can fail build a page the way the runner
publishes one, minus the kernel (papermill's own parameter injection, the scrub, the nbconvert
rendering), then edit one code cell; and edit one number of a copy of the README.

README numbers not checked, and why (the same for the full table in ``docs/results.md``):

- "BEIR 0.665" and "MTEB 0.645" (the SciFact row; "published 0.665" and "published 0.645" in
  docs/results.md): BM25's and MiniLM's nDCG@10 as published (BEIR, MTEB), literature constants
  with no file of this run behind them.
- "BM25 vs hybrid not distinguishable" (the gaps row) is a verdict, not a number; its difference
  and p-value are in ``04_retrieval/tables/corpus_gold_pairwise.csv`` but neither table states
  them.
- Numbers in backticks (notebook names such as ``01_ingest``) and the notebook each row credits:
  the search row credits ``03_index``, while its hybrid (and, in docs/results.md, HyDE) p50 come
  from ``04_retrieval/metrics.json`` (03 times dense and BM25 only); they are checked there.

Every other number is in :data:`rag.report.readme_claims.README_CLAIMS` (the README's short rows)
or :data:`rag.report.results_claims.RESULTS_CLAIMS` (docs/results.md), and
:func:`test_every_results_number_is_checked_or_listed` fails on a number added without a source.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from rag import paths
from rag.report import freshness, publish, readme_numbers, render
from rag.report.freshness import CodeCell

STEM = "02_chunk"


def publish_unexecuted(nb: dict, out: Path, stem: str = STEM) -> Path:
    """Publish ``nb`` as the runner does, without a kernel: papermill's parameter injection, the
    scrub into ``out``, both renderings, the scrub of each page. Returns the ``.ipynb``."""
    from papermill.iorw import load_notebook_node, write_ipynb
    from papermill.parameterize import parameterize_notebook

    staging = out / "staging"
    staging.mkdir(parents=True, exist_ok=True)
    src = staging / f"{stem}.source.ipynb"
    src.write_text(json.dumps(nb), encoding="utf-8")
    node = parameterize_notebook(
        load_notebook_node(str(src)), {"profile": "fresh", "output_dir": "outputs/fresh"}
    )
    running = staging / f"{stem}.ipynb"
    write_ipynb(node, str(running))
    dst = out / f"{stem}.ipynb"
    publish.publish_file(running, dst)
    for page in render.render_notebook(dst, [stem]):
        publish.scrub_file(page)
    return dst


@pytest.fixture(scope="module")
def head_notebook() -> dict:
    nb = freshness.notebook_at(STEM)
    assert nb is not None, f"notebooks/{STEM}.ipynb is not at HEAD"
    return nb


@pytest.fixture()
def fresh_page(head_notebook, tmp_path) -> Path:
    return publish_unexecuted(head_notebook, tmp_path / "outputs" / "fresh")


def _edit_cell(nb: dict, position: int, old: str, new: str) -> tuple[dict, int]:
    """``nb`` with ``old`` replaced by ``new`` in its ``position``-th code cell (0-based among
    code cells that hold ``old``); returns the copy and that cell's notebook index."""
    nb = json.loads(json.dumps(nb))
    holding = [
        i
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code" and old in "".join(c["source"])
    ]
    i = holding[position]
    src = "".join(nb["cells"][i]["source"]).replace(old, new, 1)
    nb["cells"][i]["source"] = src
    return nb, i


def test_a_page_published_from_the_notebook_is_fresh(fresh_page, head_notebook):
    executed = json.loads(fresh_page.read_text(encoding="utf-8"))
    tags = [c["metadata"].get("tags", []) for c in executed["cells"] if c["cell_type"] == "code"]
    assert ["injected-parameters"] in tags  # papermill's inserted cell is on the page ...
    assert freshness.page_problems(fresh_page, head_notebook) == []  # ... and allowed
    html_cells = freshness.html_code_cells(
        fresh_page.with_name(f"{STEM}.code.html").read_text(encoding="utf-8")
    )
    assert len(html_cells) == len(tags)  # every code cell read back from the rendering


def test_an_edited_code_cell_in_the_ipynb_is_named(fresh_page, head_notebook):
    executed = json.loads(fresh_page.read_text(encoding="utf-8"))
    edited, index = _edit_cell(executed, 0, "display(", "print(")
    fresh_page.write_text(json.dumps(edited), encoding="utf-8")
    problems = freshness.page_problems(fresh_page, head_notebook, "outputs/fresh/02_chunk.ipynb")
    assert len(problems) == 1, problems
    msg = str(problems[0])
    assert msg.startswith("outputs/fresh/02_chunk.ipynb: ")
    # the cell is numbered as in the notebook at HEAD: the injected cell shifts the page by one
    assert f"code cell {index - 1} differs at line " in msg
    assert "notebook '" in msg and "print(" in msg


def test_an_edited_code_cell_in_the_code_html_is_named(fresh_page, head_notebook, tmp_path):
    edited, index = _edit_cell(head_notebook, 0, "display(", "print(")
    other = publish_unexecuted(edited, tmp_path / "edited")
    shutil.copy(other.with_name(f"{STEM}.code.html"), fresh_page.with_name(f"{STEM}.code.html"))
    problems = freshness.page_problems(fresh_page, head_notebook, "outputs/fresh/02_chunk.ipynb")
    assert [p.where for p in problems] == ["outputs/fresh/02_chunk.code.html"], problems
    assert f"code cell {index} differs at line " in problems[0].what
    assert "print(" in problems[0].what


def test_a_dropped_cell_is_reported_once_not_as_a_shift():
    nb = [CodeCell(0, "a = 1"), CodeCell(2, "b = 2"), CodeCell(3, "c = 3"), CodeCell(5, "d = 4")]
    page = [
        CodeCell(0, "a = 1"),
        CodeCell(1, "a = 9", ("injected-parameters",)),
        CodeCell(2, "c = 3"),
        CodeCell(3, "d = 4"),
    ]
    assert freshness.compare_code_cells(nb, page) == ["code cell 2 is not on the page: 'b = 2'"]
    page.append(CodeCell(4, "e = 5"))
    assert (
        freshness.compare_code_cells(nb, page)[-1] == "page cell 4 is in no notebook cell: 'e = 5'"
    )


def test_only_one_injected_cell_is_allowed():
    nb = [CodeCell(0, "x = 1")]
    once = [CodeCell(0, "x = 1"), CodeCell(1, "p = 1", ("injected-parameters",))]
    twice = [*once, CodeCell(2, "p = 2", ("injected-parameters",))]
    assert freshness.compare_code_cells(nb, once) == []
    assert freshness.compare_code_cells(nb, twice) == [
        "2 cells tagged 'injected-parameters' (papermill inserts one)"
    ]


def test_a_path_the_scrub_replaced_still_matches_but_other_text_does_not():
    nb = [CodeCell(0, 'data = "/home/alice/lab/x.csv"')]
    assert freshness.compare_code_cells(nb, [CodeCell(0, 'data = "<path>"')]) == []
    got = freshness.compare_code_cells(nb, [CodeCell(0, 'data = "y.csv"')])
    assert got == [
        "code cell 0 differs at line 1: notebook 'data = \"/home/alice/lab/x.csv\"', "
        "page 'data = \"y.csv\"'"
    ]


def test_html_code_cells_read_back_escaped_source(tmp_path):
    source = 'x = "<a & b>"  # \'quoted\'\n\n\nif x:\n    print(x, {"k": 1})'
    nb = {
        "cells": [
            {"id": "md", "cell_type": "markdown", "metadata": {}, "source": "# T"},
            {"id": "params", "cell_type": "code", "metadata": {"tags": ["parameters"]},
             "source": "p = 1", "outputs": [], "execution_count": None},
            {"id": "code", "cell_type": "code", "metadata": {}, "source": source, "outputs": [],
             "execution_count": None},
        ],
        "metadata": {"kernelspec": {"name": "python3", "language": "python",
                                    "display_name": "Python 3"},
                     "language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }  # fmt: skip
    page = publish_unexecuted(nb, tmp_path, "01_t")
    cells = freshness.html_code_cells(page.with_name("01_t.code.html").read_text("utf-8"))
    assert [c.source.strip("\n") for c in cells if "injected-parameters" not in c.tags] == [
        "p = 1",
        source,
    ]
    assert cells[0].tags == ("parameters",) and cells[0].index == 1


def test_committed_pages_hold_their_notebooks_code():
    """Every committed ``outputs/<profile>/NN_name`` page was rendered from its notebook at HEAD;
    after a notebook change this fails until the pages are re-rendered (``rag report``)."""
    problems = freshness.stale_pages()
    assert not problems, "stale pages:\n" + "\n".join(map(str, problems))


def test_readme_results_match_the_committed_metrics():
    problems = freshness.readme_problems()
    assert not problems, "\n".join(map(str, problems))


def test_every_results_number_is_checked_or_listed():
    problems = freshness.uncovered_numbers()
    assert not problems, "\n".join(map(str, problems))


def test_every_readme_row_shortens_a_row_of_the_full_table():
    from rag.report import readme_claims, results_claims

    full = {c.row for c in results_claims.RESULTS_CLAIMS}
    assert set(readme_claims.README_ROWS) <= full
    assert [c.row for c in readme_claims.README_CLAIMS] == list(readme_claims.README_ROWS)
    for c in readme_claims.README_CLAIMS:  # every number of a short row has the full row's source
        assert {name for name, _ in c.fields()} <= set(c.values), c.row


def test_the_full_results_table_matches_the_committed_metrics():
    problems = freshness.results_page_problems()
    assert not problems, "\n".join(map(str, problems))


def test_an_edited_number_of_the_full_table_is_reported(tmp_path):
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    for rel in ("outputs", "docs/results.md"):
        src = paths.project_root() / rel
        (root / rel).symlink_to(src, target_is_directory=src.is_dir())
    assert freshness.results_page_problems(root) == []
    page = root / "docs" / "results.md"
    text = page.read_text(encoding="utf-8")
    page.unlink()
    shown = re.search(r"multi-query > HyDE by (\d\.\d{3}) \(", text)  # the number a re-render wrote
    assert shown, "docs/results.md states the multi-query - HyDE gap"
    edited = f"{float(shown.group(1)) + 0.001:.3f}"
    page.write_text(text.replace(shown.group(0), shown.group(0).replace(shown.group(1), edited)))
    problems = [str(p) for p in freshness.results_page_problems(root)]
    assert len(problems) == 1 and "docs/results.md results row 'Which gaps are real'" in problems[0]
    assert f"says {edited} (my)" in problems[0]


@pytest.fixture()
def readme_copy(tmp_path) -> Path:
    path = tmp_path / "README.md"
    shutil.copy(paths.project_root() / "README.md", path)
    return path


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_an_edited_readme_number_is_reported(readme_copy):
    before = freshness.readme_problems(readme_copy)  # empty unless the committed files moved
    text = readme_copy.read_text(encoding="utf-8")
    shown = re.search(r"hybrid (\d\.\d{3}) \(\d\.\d{3}–\d\.\d{3}\) \| 300 queries", text)
    assert shown, "the README states SciFact's hybrid nDCG@10"
    edited = f"{float(shown.group(1)) + 0.001:.3f}"
    _replace(readme_copy, shown.group(0), shown.group(0).replace(shown.group(1), edited, 1))
    problems = [p for p in freshness.readme_problems(readme_copy) if p not in before]
    assert [p.where for p in problems] == ["README results row 'The SciFact table is reproduced'"]
    source = "outputs/default/04_retrieval/metrics.json: "
    assert f"says {edited} (h) where {source}" in problems[0].what
    assert "scifact.hybrid.ndcg@10.mean is 0.6" in problems[0].what
    assert problems[0].what.endswith(f"i.e. {shown.group(1)}")


def test_an_edited_count_a_reworded_claim_and_an_unchecked_number_are_reported(readme_copy):
    _replace(readme_copy, "1,631 pages", "1,632 pages")
    _replace(readme_copy, "declines 9 of 12 unanswerable", "declines 9 out of 12 unanswerable")
    _replace(readme_copy, "| 30 follow-ups,", "| 30 follow-ups (7 with pronouns),")
    whats = [str(p) for p in freshness.readme_problems(readme_copy)]
    assert any("'The corpus arrives intact': says 1,632 (pages)" in w for w in whats), whats
    assert any("'The extractive answerer stays faithful': no text of the form" in w for w in whats)
    unchecked = [str(p) for p in freshness.uncovered_numbers(readme_copy)]
    assert "README results row 'Rewriting follow-ups': 7 is not checked" in unchecked
    # the reworded row's numbers are no longer matched by any claim, so they are listed too
    assert any("'The extractive answerer stays faithful': 9 is not checked" in u for u in unchecked)


@pytest.mark.parametrize(
    ("readme", "value", "spec", "ok"),
    [
        ("0.685", 0.6852516, ".3f", True),
        ("0.686", 0.6852516, ".3f", False),
        ("0.33", 0.32499999999999996, ".2f", True),  # a tie: 0.325 up, its float below down
        ("0.32", 0.32499999999999996, ".2f", True),
        ("0.34", 0.32499999999999996, ".2f", False),
        ("0.3", 0.32499999999999996, ".2f", False),  # fewer digits than the claim states
        ("+0.070", 0.06964285714285713, "+.3f", True),
        ("-0.011", -0.0109386, "+.3f", True),
        ("1,358", 1357.96, ",.0f", True),
        ("9", 0.75 * 12, "d", True),
        ("70", 0.7 * 100, ".0f", True),
    ],
)
def test_a_readme_number_is_a_rounding_of_its_source(readme, value, spec, ok):
    assert readme_numbers.shows(readme, value, spec) is ok
