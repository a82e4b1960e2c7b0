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

**README.** Every number of the README's "Results of the committed default run" table is compared
with the committed file it comes from (:data:`README_CLAIMS`: the cell text as a template whose
fields name a metrics key and the README's rounding). A README number passes when it is a correct
rounding of the source value to the digits the README shows (either way at an exact tie, which
binary floats blur); :func:`uncovered_numbers` lists any number of the table that no claim checks
and :data:`UNCHECKED` does not explain, so a new number cannot slip in unchecked.

``python -m rag.report.freshness`` prints what is stale; ``tests/test_freshness.py`` fails on it.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import functools
import html
import json
import re
import string
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag import paths
from rag.errors import ConfigError
from rag.scrub import scrub, strip_ansi

#: The tag papermill gives the cell of parameters it inserts.
INJECTED_TAG = "injected-parameters"
#: A published notebook page: ``NN_name.ipynb`` directly in ``outputs/<profile>/``.
PAGE_GLOB = "[0-9][0-9]_*.ipynb"
#: The README section whose table is checked.
RESULTS_HEADING = "## Results of the committed default run"


@dataclass(frozen=True)
class Problem:
    """One thing that is stale: where (a page or a README row) and what."""

    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


# ---------------------------------------------------------------------------------------------
# Pages


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


# ---------------------------------------------------------------------------------------------
# README numbers


def _walk(value: Any, path: str) -> Any:
    for part in path.split("."):
        select = re.fullmatch(r"(.*)\[(.+)\]", part)
        if select:  # a list item by field values: key[a=text,b=fusion]
            items = value[select.group(1)] if select.group(1) else value
            want = dict(kv.split("=", 1) for kv in select.group(2).split(","))
            found = [x for x in items if all(str(x.get(k)) == v for k, v in want.items())]
            if len(found) != 1:
                raise KeyError(f"{len(found)} items of {select.group(1)!r} match {want}")
            value = found[0]
        elif isinstance(value, list):
            value = value[int(part)]
        else:
            value = value[part]
    return value


@dataclass(frozen=True)
class Json:
    """A number in a committed JSON file: ``file`` (from the project root) and a dotted ``path``
    (``key.0`` indexes a list, ``key[a=x,b=y]`` picks the one list item with those fields);
    ``scale`` converts it as the README states it (-1: the difference the other way round, 100:
    a percentage)."""

    file: str
    path: str
    scale: float = 1.0

    def value(self, root: Path) -> float:
        return float(_walk(_read_json(root / self.file), self.path)) * self.scale

    def __str__(self) -> str:
        return f"{self.file}: {self.path}" + (f" x {self.scale:g}" if self.scale != 1 else "")


def _read_json(path: Path) -> Any:
    return _cached(path, path.stat().st_mtime_ns, "json")


def _rows(root: Path, file: str) -> list[dict[str, str]]:
    path = root / file
    return _cached(path, path.stat().st_mtime_ns, "csv")


@functools.lru_cache(maxsize=32)
def _cached(path: Path, mtime_ns: int, kind: str) -> Any:
    # keyed by modification time, so an edited file is read again
    with path.open(encoding="utf-8", newline="") as f:
        return json.load(f) if kind == "json" else list(csv.DictReader(f))


@dataclass(frozen=True)
class CsvCell:
    """A number in a committed CSV table: the ``column`` of the one row whose fields are
    ``where`` (``scale`` as in :class:`Json`)."""

    file: str
    where: tuple[tuple[str, str], ...]
    column: str
    scale: float = 1.0

    def value(self, root: Path) -> float:
        rows = [r for r in _rows(root, self.file) if all(r[k] == v for k, v in self.where)]
        if len(rows) != 1:
            raise KeyError(f"{len(rows)} rows match {dict(self.where)}")
        return float(rows[0][self.column]) * self.scale

    def __str__(self) -> str:
        sel = ",".join(f"{k}={v}" for k, v in self.where)
        scaled = f" x {self.scale:g}" if self.scale != 1 else ""
        return f"{self.file}: [{sel}].{self.column}{scaled}"


@dataclass(frozen=True)
class CsvAgg:
    """An aggregate of a committed CSV table: ``min``/``max`` of a column, ``count`` of rows or
    ``distinct`` values of a column."""

    file: str
    column: str
    how: str

    def value(self, root: Path) -> float:
        col = [r[self.column] for r in _rows(root, self.file)]
        if self.how == "count":
            return float(len(col))
        if self.how == "distinct":
            return float(len(set(col)))
        return float({"min": min, "max": max}[self.how](float(x) for x in col))

    def __str__(self) -> str:
        return f"{self.file}: {self.how}({self.column})"


@dataclass(frozen=True)
class Product:
    """The product of two numbers (a count stated from a rate and its denominator)."""

    a: Json
    b: Json

    def value(self, root: Path) -> float:
        return self.a.value(root) * self.b.value(root)

    def __str__(self) -> str:
        return f"({self.a}) x ({self.b})"


Source = Json | CsvCell | CsvAgg | Product

#: A number as the README writes it: ``1,631``, ``0.975``, ``-0.011``, ``+0.070``.
NUMBER = r"[+\-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
#: A number standing alone in README text (not part of ``nDCG@10``, ``SmolLM2-135M``, ``v2``).
_LONE_NUMBER = re.compile(rf"(?<![\w@.]){NUMBER}(?![\w.]\d|\w)")


@dataclass(frozen=True)
class Claim:
    """Numbers of one README table row: ``text`` as the row writes it, each number a format field
    (``{name:.3f}``) whose value comes from ``values[name]`` and is rounded by its format spec."""

    row: str
    text: str
    values: Mapping[str, Source] = field(default_factory=dict)

    def fields(self) -> list[tuple[str, str]]:
        return [(n, spec or "") for _, n, spec, _ in string.Formatter().parse(self.text) if n]

    def pattern(self) -> re.Pattern[str]:
        parts = []
        for literal, name, _, _ in string.Formatter().parse(self.text):
            parts.append(re.escape(literal))
            if name:
                parts.append(f"(?P<{name}>{NUMBER})")
        return re.compile("".join(parts))


def _fmt(value: float, spec: str) -> str:
    if spec.endswith("d"):
        if abs(value - round(value)) > 1e-9:
            return f"{value!r} (not a whole number)"
        return format(int(round(value)), spec)
    return format(value, spec)


def results_rows(readme_text: str) -> dict[str, str]:
    """``{finding: the rest of the row}`` of the README's results table, minus signs as ``-``."""
    if RESULTS_HEADING not in readme_text:
        raise ConfigError(f"README has no {RESULTS_HEADING!r} section")
    section = readme_text.split(RESULTS_HEADING, 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")][2:]  # header, separator
    rows = {}
    for ln in lines:
        cells = ln.strip().strip("|").split("|")
        rows[cells[0].strip()] = "|" + "|".join(cells[1:]).replace("\u2212", "-") + "|"
    return rows


def claim_problems(claim: Claim, rows: Mapping[str, str], root: Path) -> list[Problem]:
    """What of one claim the README does not state as its source says."""
    where = f"README results row {claim.row!r}"
    if claim.row not in rows:
        return [Problem(where, "no such row")]
    m = claim.pattern().search(rows[claim.row])
    if m is None:
        return [Problem(where, f"no text of the form {claim.text!r}")]
    out = []
    for name, spec in claim.fields():
        src = claim.values[name]
        try:
            value = src.value(root)
        except (OSError, KeyError, IndexError, ValueError, TypeError) as e:
            out.append(Problem(where, f"{name}: cannot read {src}: {e!r}"))
            continue
        readme = m.group(name)
        if not shows(readme, value, spec):
            out.append(
                Problem(
                    where,
                    f"says {readme} ({name}) where {src} is {value!r}, i.e. {_fmt(value, spec)}",
                )
            )
    return out


def shows(readme: str, value: float, spec: str) -> bool:
    """``readme`` shows ``value`` as ``spec`` rounds it, or as the other rounding of a tie."""
    expected = _fmt(value, spec)
    if readme == expected or readme.lstrip("+") == expected.lstrip("+"):
        return True
    digits = len(readme.split(".")[1]) if "." in readme else 0
    try:
        shown = float(readme.replace(",", ""))
    except ValueError:
        return False
    return abs(shown - value) <= 0.5 * 10**-digits + 1e-9 and digits == _digits(expected)


def _digits(formatted: str) -> int:
    return len(formatted.split(".")[1]) if "." in formatted else 0


def readme_problems(
    readme: Path | None = None,
    root: Path | None = None,
    claims: Sequence[Claim] | None = None,
) -> list[Problem]:
    """README results numbers that differ from their committed source (:data:`README_CLAIMS`)."""
    root = root or paths.project_root()
    text = (readme or root / "README.md").read_text(encoding="utf-8")
    rows = results_rows(text)
    return [
        p
        for c in (README_CLAIMS if claims is None else claims)
        for p in claim_problems(c, rows, root)
    ]


def uncovered_numbers(
    readme: Path | None = None, claims: Sequence[Claim] | None = None
) -> list[Problem]:
    """Numbers of the results table that no claim checks and :data:`UNCHECKED` does not explain
    (a number inside backticks, such as a notebook name, is no claim)."""
    text = (readme or paths.project_root() / "README.md").read_text(encoding="utf-8")
    claims = README_CLAIMS if claims is None else claims
    out = []
    for row, rest in results_rows(text).items():
        covered: list[tuple[int, int]] = []
        for c in claims:
            if c.row == row and (m := c.pattern().search(rest)):
                covered += [m.span(name) for name, _ in c.fields()]
        for snippet in UNCHECKED.get(row, {}):
            covered += [m.span() for m in re.finditer(re.escape(snippet), rest)]
        masked = re.sub(r"`[^`]*`", lambda m: " " * len(m.group()), rest)
        for m in _LONE_NUMBER.finditer(masked):
            if not any(a <= m.start() and m.end() <= b for a, b in covered):
                out.append(Problem(f"README results row {row!r}", f"{m.group()} is not checked"))
    return out


# The README table's numbers and where each comes from. Numbers are rounded by the format spec of
# their field; a field's source is the committed file the notebook (or bench) wrote.
_D = "outputs/default"
_I, _C, _X, _R, _F, _V, _P = (
    f"{_D}/{nb}/metrics.json"
    for nb in (
        "01_ingest",
        "02_chunk",
        "03_index",
        "04_retrieval",
        "05_faithfulness",
        "06_conversation",
        "07_papers",
    )
)
_PAIRS = f"{_D}/04_retrieval/tables/corpus_gold_pairwise.csv"
_SUMMARIES = "outputs/bench/summaries.json"
_SWEEP = "outputs/sweeps/chunk_embedder"


def _ci(file: str, path: str, name: str) -> dict[str, Json]:
    """``{name, name_lo, name_hi}`` of a ``{mean, ci_low, ci_high}`` block."""
    return {
        name: Json(file, f"{path}.mean"),
        f"{name}_lo": Json(file, f"{path}.ci_low"),
        f"{name}_hi": Json(file, f"{path}.ci_high"),
    }


def _ci_list(file: str, path: str, name: str) -> dict[str, Json]:
    """``{name, name_lo, name_hi}`` of a ``{mean, ci: [low, high]}`` block."""
    return {
        name: Json(file, f"{path}.mean"),
        f"{name}_lo": Json(file, f"{path}.ci.0"),
        f"{name}_hi": Json(file, f"{path}.ci.1"),
    }


def _pair(a: str, b: str, name: str, *, flip: bool = False) -> dict[str, CsvCell]:
    """A row of 04's paired table; ``flip``: the README states ``b`` minus ``a``."""
    where = (("a", a), ("b", b))
    s = -1.0 if flip else 1.0
    lo, hi = ("ci_high", "ci_low") if flip else ("ci_low", "ci_high")
    return {
        name: CsvCell(_PAIRS, where, "diff", s),
        f"{name}_lo": CsvCell(_PAIRS, where, lo, s),
        f"{name}_hi": CsvCell(_PAIRS, where, hi, s),
        f"{name}_p": CsvCell(_PAIRS, where, "p_adjusted"),
    }


def _ans(name: str, metric: str) -> str:
    return f"answerers.{name}.{metric}"


_RW = "related_work.paired_tests.recall@10[a=text,b=fusion]"

#: Every checked number of the README's results table.
README_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "The corpus arrives intact",
        "{parsed:d}/{requested:d} papers parsed, {failed:d} failed, {changed:d} changed sha256, "
        "{pages:,d} pages | {n:d} papers",
        {
            "parsed": Json(_I, "papers.parsed"),
            "requested": Json(_I, "papers.requested"),
            "failed": Json(_I, "papers.failed"),
            "changed": Json(_I, "papers.changed"),
            "pages": Json(_I, "pages"),
            "n": Json(_I, "papers.requested"),
        },
    ),
    Claim(
        "The parser keeps the evidence",
        "gold quotes found {found:d}/{n:d} ({lo:.1f}–{hi:.1f}); human QASPER paragraphs "
        "{q:.3f} ({q_lo:.3f}–{q_hi:.1f}) | {quotes:d} quotes, {paragraphs:d} paragraphs",
        {
            "found": Json(_I, "evidence_found.gold.found"),
            "n": Json(_I, "evidence_found.gold.n"),
            "lo": Json(_I, "evidence_found.gold.ci.ci_low"),
            "hi": Json(_I, "evidence_found.gold.ci.ci_high"),
            **_ci(_I, "evidence_found.qasper.ci", "q"),
            "quotes": Json(_I, "evidence_found.gold.n"),
            "paragraphs": Json(_I, "evidence_found.qasper.n"),
        },
    ),
    Claim(
        "Chunking keeps evidence in one piece",
        "fixed {f:.3f} ({f_lo:.3f}–{f_hi:.3f}), sentence {s:.3f} ({s_lo:.3f}–{s_hi:.3f}), "
        "section {c:.3f} ({c_lo:.3f}–{c_hi:.1f}) | {n:d} quotes",
        {
            "f": Json(_C, "strategies.fixed.evidence_intact.rate"),
            "f_lo": Json(_C, "strategies.fixed.evidence_intact.ci_low"),
            "f_hi": Json(_C, "strategies.fixed.evidence_intact.ci_high"),
            "s": Json(_C, "strategies.sentence.evidence_intact.rate"),
            "s_lo": Json(_C, "strategies.sentence.evidence_intact.ci_low"),
            "s_hi": Json(_C, "strategies.sentence.evidence_intact.ci_high"),
            "c": Json(_C, "strategies.section.evidence_intact.rate"),
            "c_lo": Json(_C, "strategies.section.evidence_intact.ci_low"),
            "c_hi": Json(_C, "strategies.section.evidence_intact.ci_high"),
            "n": Json(_C, "strategies.fixed.evidence_intact.n"),
        },
    ),
    Claim(
        "The SciFact table is reproduced",
        "nDCG@10 BM25 {b:.3f} ({b_lo:.3f}–{b_hi:.3f}; published 0.665), MiniLM dense {d:.3f} "
        "({d_lo:.3f}–{d_hi:.3f}; published 0.645), hybrid {h:.3f} ({h_lo:.3f}–{h_hi:.3f}) "
        "| {n:d} queries",
        {
            **_ci(_R, "scifact.bm25.ndcg@10", "b"),
            **_ci(_R, "scifact.dense.ndcg@10", "d"),
            **_ci(_R, "scifact.hybrid.ndcg@10", "h"),
            "n": Json(_R, "scifact.hybrid.ndcg@10.n"),
        },
    ),
    Claim(
        "Hybrid finds the corpus evidence best",
        "chunk nDCG@10 hybrid {h:.3f} ({h_lo:.3f}–{h_hi:.3f}), BM25 {b:.3f} ({b_lo:.3f}–"
        "{b_hi:.3f}), multi-query {m:.3f} ({m_lo:.3f}–{m_hi:.3f}), dense {d:.3f} ({d_lo:.3f}–"
        "{d_hi:.3f}), HyDE {y:.3f} ({y_lo:.3f}–{y_hi:.3f}) | {n:d} gold questions",
        {
            **_ci(_R, "corpus_gold.chunk.hybrid.ndcg@10", "h"),
            **_ci(_R, "corpus_gold.chunk.bm25.ndcg@10", "b"),
            **_ci(_R, "corpus_gold.chunk.multi-query.ndcg@10", "m"),
            **_ci(_R, "corpus_gold.chunk.dense.ndcg@10", "d"),
            **_ci(_R, "corpus_gold.chunk.hyde.ndcg@10", "y"),
            "n": Json(_R, "corpus_gold.chunk.hybrid.n"),
        },
    ),
    Claim(
        "Which gaps are real",
        "hybrid > dense by {hd:.3f} ({hd_lo:.3f}–{hd_hi:.3f}, p = {hd_p:.3f}); hybrid > HyDE by "
        "{hy:.3f} ({hy_lo:.3f}–{hy_hi:.3f}, p = {hy_p:.3f}); multi-query > HyDE by {my:.3f} "
        "({my_lo:.3f}–{my_hi:.3f}, p = {my_p:.3f}); BM25 vs hybrid not distinguishable "
        "| {n:d}, Holm over {pairs:d} pairs",
        {
            **_pair("dense", "hybrid", "hd", flip=True),
            **_pair("hybrid", "hyde", "hy"),
            **_pair("multi-query", "hyde", "my"),
            "n": CsvCell(_PAIRS, (("a", "dense"), ("b", "hybrid")), "n"),
            "pairs": CsvAgg(_PAIRS, "a", "count"),
        },
    ),
    Claim(
        "Search is fast on 2 cores",
        "p50 dense {d:.1f} ms incl. query encoding, BM25 {b:.2f} ms, hybrid {h:.1f} ms; HyDE "
        "{y:,.0f} ms with a fresh LLM call | {q:d} queries, {chunks:,d} chunks",
        {
            "d": Json(_X, "headline.dense p50 ms (1x)"),
            "b": Json(_X, "headline.BM25 p50 ms (1x)"),
            "h": Json(_R, "corpus_gold.chunk.hybrid.latency_ms.p50"),
            "y": Json(_R, "corpus_gold.chunk.hyde.latency_ms.p50"),
            "q": Json(_X, "latency_queries"),
            "chunks": Json(_X, "chunks"),
        },
    ),
    Claim(
        "The offline judge is checked",
        "offline-v2 balanced accuracy {ba:.3f} ({lo:.3f}–{hi:.3f}), CONTRADICT recall "
        "{k:d}/{kn:d} | {n:d} human-labelled SciFact dev pairs",
        {
            "ba": Json(_F, "faithfulness_judge.balanced_accuracy"),
            "lo": Json(_F, "faithfulness_judge.ci_low"),
            "hi": Json(_F, "faithfulness_judge.ci_high"),
            "k": Json(_F, "faithfulness_judge.contradict_k"),
            "kn": Json(_F, "faithfulness_judge.contradict_n"),
            "n": Json(_F, "faithfulness_judge.n"),
        },
    ),
    Claim(
        "The extractive answerer stays faithful",
        "faithfulness {f:.2f} (optimistic: its spans are the judge's picks), answered {a:.0f} %, "
        "answer F1 {f1:.3f} ({f1_lo:.3f}–{f1_hi:.3f}), declines {dec:d} of {u:d} unanswerable "
        "| {scored:d} answered of {n:d}",
        {
            "f": Json(_F, _ans("extractive", "faithfulness.mean")),
            "a": Json(_F, _ans("extractive", "faithfulness.answered_rate"), 100),
            **_ci_list(_F, _ans("extractive", "answer_f1"), "f1"),
            "dec": Product(
                Json(_F, _ans("extractive", "negative_rejection")),
                Json(_F, _ans("extractive", "negative_rejection_n")),
            ),
            "u": Json(_F, _ans("extractive", "negative_rejection_n")),
            "scored": Json(_F, _ans("extractive", "faithfulness.n_scored")),
            "n": Json(_F, "questions.n"),
        },
    ),
    Claim(
        "The local LLM is not",
        "SmolLM2-135M faithfulness {l:.2f} ({l_lo:.2f}–{l_hi:.2f}), citation recall {l_c:.3f}; "
        "under a GBNF grammar {g:.2f} ({g_lo:.2f}–{g_hi:.2f}), citation recall {g_c:.2f}; quote "
        "grammar {q:.2f} ({q_lo:.2f}–{q_hi:.2f}) but answers {q_a:.0f} %; closed-book {cb:.2f} "
        "({cb_lo:.2f}–{cb_hi:.2f}) | {n:d} questions ({a:d} answerable)",
        {
            **_ci_list(_F, _ans("local", "faithfulness"), "l"),
            "l_c": Json(_F, _ans("local", "citation_recall.mean")),
            **_ci_list(_F, _ans("local+gbnf", "faithfulness"), "g"),
            "g_c": Json(_F, _ans("local+gbnf", "citation_recall.mean")),
            **_ci_list(_F, _ans("local+quote", "faithfulness"), "q"),
            "q_a": Json(_F, _ans("local+quote", "faithfulness.answered_rate"), 100),
            **_ci_list(_F, _ans("closed-book", "faithfulness"), "cb"),
            "n": Json(_F, "questions.n"),
            "a": Json(_F, "questions.answerable"),
        },
    ),
    Claim(
        "Rewriting follow-ups",
        "hybrid nDCG@10: raw follow-up {r:.3f} ({r_lo:.3f}–{r_hi:.3f}), rule rewriter {u:.3f} "
        "({u_lo:.3f}–{u_hi:.3f}), SmolLM2 rewriter {s:.3f} ({s_lo:.3f}–{s_hi:.3f}), original "
        "question {o:.3f} ({o_lo:.3f}–{o_hi:.3f}) | {n:d} follow-ups",
        {
            **_ci(_V, "retrieval.follow-up (raw).ndcg@10", "r"),
            **_ci(_V, "retrieval.rewrite: rules.ndcg@10", "u"),
            **_ci(_V, "retrieval.rewrite: llm:smollm2-135m.ndcg@10", "s"),
            **_ci(_V, "retrieval.original (upper bound).ndcg@10", "o"),
            "n": Json(_V, "follow_ups.n"),
        },
    ),
    Claim(
        "The paper desk holds up",
        "citation links resolved by title alone: precision {pk:d}/{pn:d} ({p_lo:.3f}–{p_hi:.1f}), "
        "recall {rk:d}/{rn:d}; related work recall@10: fusion {f:.3f} ({f_lo:.3f}–{f_hi:.3f}) vs "
        "text {t:.3f}, {d:+.3f} ({d_lo:.3f}–{d_hi:.3f}, p = {d_p:.3f}); extractive summaries "
        "ROUGE-L {e:.3f} ({e_lo:.3f}–{e_hi:.3f}) vs lead {lead:.3f} | {links:d} in-corpus links, "
        "{papers:d} papers, {summaries:d} summaries (`summary_eval`; the report draws {drawn:d})",
        {
            "pk": Json(_P, "title_resolution.held_out.precision.k"),
            "pn": Json(_P, "title_resolution.held_out.precision.n"),
            "p_lo": Json(_P, "title_resolution.held_out.precision.exact_low"),
            "p_hi": Json(_P, "title_resolution.held_out.precision.exact_high"),
            "rk": Json(_P, "title_resolution.held_out.recall.k"),
            "rn": Json(_P, "title_resolution.held_out.recall.n"),
            **_ci(_P, "related_work.methods.fusion.recall@10", "f"),
            "t": Json(_P, "related_work.methods.text.recall@10.mean"),
            "d": Json(_P, f"{_RW}.diff", -1),
            "d_lo": Json(_P, f"{_RW}.ci_high", -1),
            "d_hi": Json(_P, f"{_RW}.ci_low", -1),
            "d_p": Json(_P, f"{_RW}.p_adjusted"),
            **_ci(_SUMMARIES, "metrics.extractive.rouge_l", "e"),
            "lead": Json(_SUMMARIES, "metrics.lead.rouge_l.mean"),
            "links": Json(_P, "graph.edges_in_corpus"),
            "papers": Json(_P, "related_work.queries"),
            "summaries": Json(_SUMMARIES, "n_papers"),
            "drawn": Json(_P, "summaries.n_papers"),
        },
    ),
    Claim(
        "Chunking × embedder does not matter here",
        "every cell minus the base: {lo:+.3f} to {hi:+.3f} chunk nDCG@10, all Holm p = {p:d} "
        "| {n:d} questions × {cells:d} cells",
        {
            "lo": CsvAgg(f"{_SWEEP}/paired.csv", "diff", "min"),
            "hi": CsvAgg(f"{_SWEEP}/paired.csv", "diff", "max"),
            "p": CsvAgg(f"{_SWEEP}/paired.csv", "p_adjusted", "min"),
            "n": CsvAgg(f"{_SWEEP}/paired.csv", "n", "max"),
            "cells": CsvAgg(f"{_SWEEP}/results.csv", "cell", "distinct"),
        },
    ),
)

#: Numbers of the table that are not checked, by row, each with why (also in
#: ``tests/test_freshness.py``'s docstring).
UNCHECKED: dict[str, dict[str, str]] = {
    "The SciFact table is reproduced": {
        "published 0.665": "BM25's nDCG@10 in the BEIR paper, a literature constant",
        "published 0.645": "MiniLM's nDCG@10 on the MTEB leaderboard, a literature constant",
    },
}


def report(root: Path | None = None, ref: str = "HEAD") -> list[Problem]:
    """Stale pages, then README numbers that differ from their source or are not checked."""
    return [*stale_pages(root, ref), *readme_problems(root=root), *uncovered_numbers()]


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
