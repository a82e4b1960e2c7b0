"""Are the published pages true to the code? Stale pages and README numbers, found without running.

Two checks, both cheap (nothing is executed):

**Pages.** Every committed ``outputs/<profile>/NN_name.ipynb`` and its ``NN_name.code.html`` must
hold the code cells of ``notebooks/NN_name.ipynb`` at ``HEAD``, in order. What the runner
legitimately changes is allowed and nothing else: papermill inserts one cell tagged
``injected-parameters`` (the ``parameters`` cell itself stays as written), which is ignored; and
publishing scrubs every string of a page (:func:`rag.scrub.scrub`), so a page cell also matches
when it equals the notebook cell after that scrub (a local path literal becomes ``<path>``). The
``.code.html`` cells are read back from nbconvert's markup: the highlighted ``<pre>`` of each code
cell's input area, tags removed and entities unescaped; Pygments drops a cell's leading and
trailing blank lines, so those are compared without them.

**README.** Every number of the README's "Results of the committed default run" table, and of
the full table in ``docs/results.md``, against the committed file it comes from
(:mod:`rag.report.readme_numbers`).

``python -m rag.report.freshness`` prints what is stale; ``tests/test_freshness.py`` fails on it.
"""

from __future__ import annotations

import argparse
import difflib
import html
import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag import paths
from rag.report.readme_claims import readme_problems, uncovered_numbers
from rag.report.readme_numbers import Problem
from rag.report.results_claims import results_page_problems
from rag.scrub import scrub, strip_ansi

#: The tag papermill gives the cell of parameters it inserts.
INJECTED_TAG = "injected-parameters"
#: A published notebook page: ``NN_name.ipynb`` directly in ``outputs/<profile>/``.
PAGE_GLOB = "[0-9][0-9]_*.ipynb"


@dataclass(frozen=True)
class CodeCell:
    """A code cell: its position among all cells of its notebook or page, source and tags."""

    index: int
    source: str
    tags: tuple[str, ...] = ()


def _source(cell: Mapping[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def notebook_code_cells(nb: Mapping[str, Any]) -> list[CodeCell]:
    """The code cells of a notebook (its JSON as a dict), in order."""
    return [
        CodeCell(i, _source(c), tuple(c.get("metadata", {}).get("tags", [])))
        for i, c in enumerate(nb.get("cells", []))
        if c.get("cell_type") == "code"
    ]


_CELL_START = re.compile(r'<div class="jp-Cell ([^"]*)"')
_INPUT_PRE = re.compile(
    r'<div class="jp-InputArea[^"]*">.*?<div class="highlight[^"]*"><pre>(.*?)</pre>', re.DOTALL
)
_TAG = re.compile(r"<[^>]+>")


def html_code_cells(text: str) -> list[CodeCell]:
    """The code cells of an nbconvert page (``NN_name.code.html``): source and ``celltag_`` tags.

    The source is the text of the highlighted ``<pre>`` in the cell's input area, with markup
    removed and entities unescaped; a code cell whose input is not shown reads as ``""``.
    """
    starts = list(_CELL_START.finditer(text))
    cells = []
    for i, m in enumerate(starts):
        classes = m.group(1).split()
        if "jp-CodeCell" not in classes:
            continue
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        pre = _INPUT_PRE.search(text, m.end(), end)
        source = html.unescape(_TAG.sub("", pre.group(1))) if pre else ""
        tags = tuple(c.removeprefix("celltag_") for c in classes if c.startswith("celltag_"))
        cells.append(CodeCell(i, source, tags))
    return cells


def _same(expected: str, got: str, *, blank_edges: bool) -> bool:
    def norm(s: str) -> str:
        return s.strip("\n") if blank_edges else s

    if norm(expected) == norm(got):
        return True
    published, _ = scrub(strip_ansi(expected), env={})
    return norm(published) == norm(got)


def _first_difference(expected: str, got: str) -> str:
    a, b = expected.splitlines(), got.splitlines()
    for n, (x, y) in enumerate(zip(a, b, strict=False), start=1):
        if x != y:
            return f"line {n}: notebook {x!r}, page {y!r}"
    n = min(len(a), len(b)) + 1
    if len(a) > len(b):
        return f"line {n}: notebook {a[n - 1]!r}, page ends"
    if len(b) > len(a):
        return f"line {n}: page {b[n - 1]!r}, notebook ends"
    return "whitespace only (leading or trailing blank lines)"


def compare_code_cells(
    notebook: Sequence[CodeCell], page: Sequence[CodeCell], *, blank_edges: bool = False
) -> list[str]:
    """What differs between a notebook's code cells and a page's, beyond papermill's change.

    The page's ``injected-parameters`` cell is dropped (more than one is a difference); the rest
    are aligned with the notebook's by :class:`difflib.SequenceMatcher`, so one inserted or
    removed cell is reported once rather than shifting every later cell. Each message names the
    notebook cell (its position among all cells, as Jupyter numbers them from 0) and the first
    differing line.
    """
    injected = [c for c in page if INJECTED_TAG in c.tags]
    problems = []
    if len(injected) > 1:
        problems.append(f"{len(injected)} cells tagged {INJECTED_TAG!r} (papermill inserts one)")
    rest = [c for c in page if INJECTED_TAG not in c.tags]

    def key(s: str) -> str:
        return s.strip("\n") if blank_edges else s

    matcher = difflib.SequenceMatcher(
        a=[key(c.source) for c in notebook], b=[key(c.source) for c in rest], autojunk=False
    )
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        pairs = list(zip(range(i1, i2), range(j1, j2), strict=False))
        for i, j in pairs:
            nb_cell, pg_cell = notebook[i], rest[j]
            if not _same(nb_cell.source, pg_cell.source, blank_edges=blank_edges):
                problems.append(
                    f"code cell {nb_cell.index} differs at "
                    f"{_first_difference(key(nb_cell.source), key(pg_cell.source))}"
                )
        for i in range(i1 + len(pairs), i2):
            first = notebook[i].source.splitlines()[:1] or [""]
            problems.append(f"code cell {notebook[i].index} is not on the page: {first[0]!r}")
        for j in range(j1 + len(pairs), j2):
            first = rest[j].source.splitlines()[:1] or [""]
            problems.append(f"page cell {rest[j].index} is in no notebook cell: {first[0]!r}")
    return problems


def notebook_at(stem: str, root: Path | None = None, ref: str = "HEAD") -> dict[str, Any] | None:
    """``notebooks/<stem>.ipynb`` as committed at ``ref`` (None when it is not there).

    Outside a git checkout (an unpacked archive) the working tree's file stands in for ``ref``.
    """
    root = root or paths.project_root()
    rel = f"notebooks/{stem}.ipynb"
    try:
        inside = subprocess.run(
            ["git", "rev-parse", "--is-inside-work-tree"],
            cwd=root, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        if inside.returncode == 0:
            shown = subprocess.run(
                ["git", "show", f"{ref}:{rel}"],
                cwd=root, capture_output=True, text=True, timeout=30,
            )  # fmt: skip
            return json.loads(shown.stdout) if shown.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        pass
    path = root / rel
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def page_problems(ipynb: Path, notebook: Mapping[str, Any], where: str = "") -> list[Problem]:
    """Problems of one published notebook (``ipynb``) and its ``.code.html`` beside it."""
    where = where or ipynb.as_posix()
    want = notebook_code_cells(notebook)
    out = []
    if ipynb.exists():
        got = notebook_code_cells(json.loads(ipynb.read_text(encoding="utf-8")))
        out += [Problem(where, p) for p in compare_code_cells(want, got)]
    else:
        out.append(Problem(where, "missing"))
    code_html = ipynb.with_name(f"{ipynb.stem}.code.html")
    code_where = where.removesuffix(".ipynb") + ".code.html"
    if code_html.exists():
        got = html_code_cells(code_html.read_text(encoding="utf-8"))
        out += [Problem(code_where, p) for p in compare_code_cells(want, got, blank_edges=True)]
    else:
        out.append(Problem(code_where, "missing"))
    return out


def published_pages(root: Path | None = None) -> list[Path]:
    """Every ``outputs/<profile>/NN_name.ipynb`` under ``root`` (default: the project root)."""
    root = root or paths.project_root()
    return sorted((root / "outputs").glob(f"*/{PAGE_GLOB}"))


def stale_pages(root: Path | None = None, ref: str = "HEAD") -> list[Problem]:
    """Every published page whose code cells are not those of its notebook at ``ref``."""
    root = root or paths.project_root()
    out = []
    for page in published_pages(root):
        where = page.relative_to(root).as_posix()
        nb = notebook_at(page.stem, root, ref)
        if nb is None:
            out.append(Problem(where, f"no notebooks/{page.stem}.ipynb at {ref}"))
            continue
        out += page_problems(page, nb, where)
    return out


def report(root: Path | None = None, ref: str = "HEAD") -> list[Problem]:
    """Stale pages, then README and docs/results.md numbers that differ from their source or
    are not checked."""
    root = root or paths.project_root()
    readme = root / "README.md"
    return [
        *stale_pages(root, ref),
        *readme_problems(readme, root),
        *uncovered_numbers(readme),
        *results_page_problems(root),
    ]


def main(argv: list[str] | None = None) -> int:
    """Print what of the published pages and README numbers is stale; exit 1 if anything is."""
    ap = argparse.ArgumentParser(prog="python -m rag.report.freshness", description=main.__doc__)
    ap.add_argument("--ref", default="HEAD", help="git revision the notebooks are read at")
    args = ap.parse_args(argv)
    problems = report(ref=args.ref)
    by_where: dict[str, list[str]] = {}
    for p in problems:
        by_where.setdefault(p.where, []).append(p.what)
    for where, whats in by_where.items():
        print(where)
        for w in whats:
            print(f"  {w}")
    print(f"{len(problems)} problem(s) in {len(by_where)} place(s)" if problems else "all fresh")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
