"""HTML tables as Markdown pipe tables, cell for cell.

A pipe table has one header row, no merged cells and the same number of cells in every row, while a
pandas table may span cells: a row index with groups (a MultiIndex) writes each group's label once
with ``rowspan``, grouped columns write theirs with ``colspan``, and a named index writes its names
on a second header row. :func:`table_grid` places every cell at its row and column as a browser
does (a spanned label is repeated in each row and column it covers, so no value moves to another
column), and :func:`table_markdown` folds the header rows into one: an index level's name over its
column, the column levels joined with `` · ``. An unnamed integer index (pandas' default row
numbers, which carry no meaning for a reader) is left out, and a missing value (``NaN``) is a blank
cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser

#: How pandas writes a missing value in a table.
MISSING = frozenset({"NaN", "<NA>", "NaT"})


@dataclass(frozen=True)
class Cell:
    """One cell as written: its text, whether it is a ``<th>``, and its spans."""

    text: str
    th: bool = False
    rowspan: int = 1
    colspan: int = 1


#: A parsed table: its rows in order, each ``(in <thead>, cells)``.
Rows = list[tuple[bool, list[Cell]]]


def _span(value: str | None) -> int:
    try:
        return max(1, int(value or 1))
    except ValueError:
        return 1


class TableParser(HTMLParser):
    """The rows of every ``<table>`` in an HTML fragment, and any text outside the tables
    (beyond wrappers and styles)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[Rows] = []
        self.outside: list[str] = []
        self._row: list[Cell] | None = None
        self._cell: list[str] | None = None
        self._attrs: dict[str, str | None] = {}
        self._th = False
        self._head = False
        self._depth = 0
        self._style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._depth += 1
            self.tables.append([])
        elif tag == "style":
            self._style = True
        elif tag == "thead":
            self._head = True
        elif tag == "tr" and self._depth:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell, self._attrs, self._th = [], dict(attrs), tag == "th"
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._depth -= 1
        elif tag == "style":
            self._style = False
        elif tag == "thead":
            self._head = False
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            text = " ".join("".join(self._cell).split())
            self._row.append(
                Cell(text, self._th, _span(self._attrs.get("rowspan")),
                     _span(self._attrs.get("colspan")))
            )  # fmt: skip
            self._cell = None
        elif tag == "tr" and self._row is not None and self.tables:
            self.tables[-1].append((self._head, self._row))
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        elif not self._depth and not self._style and data.strip():
            self.outside.append(data.strip())


def table_grid(rows: Rows) -> list[tuple[bool, list[Cell]]]:
    """Every row with its spanned cells placed: a cell with ``rowspan``/``colspan`` appears in
    each row and column it covers, so all rows are as wide as the widest."""
    grid: list[tuple[bool, list[Cell]]] = []
    carried: dict[int, tuple[int, Cell]] = {}  # column -> (rows still covered, cell)
    for head, cells in rows:
        out: list[Cell] = []
        queue = list(cells)
        while queue or any(c >= len(out) for c in carried):
            col = len(out)
            if col in carried:
                left, cell = carried.pop(col)
                if left > 1:
                    carried[col] = (left - 1, cell)
                out.append(cell)
                continue
            if not queue:  # a gap before a column still carried from above
                out.append(Cell(""))
                continue
            cell = queue.pop(0)
            for i in range(cell.colspan):
                if cell.rowspan > 1:
                    carried[col + i] = (cell.rowspan - 1, cell)
                out.append(cell)
        grid.append((head, out))
    width = max((len(cells) for _, cells in grid), default=0)
    return [(head, cells + [Cell("")] * (width - len(cells))) for head, cells in grid]


def _fold_header(heads: list[list[Cell]], depth: int, width: int) -> list[str]:
    """One header row from pandas' header rows: the index names' row (the last one, holding only
    names over the ``depth`` index columns) names those columns; the column levels are joined."""
    names: list[str] = []
    if depth and len(heads) > 1:
        last = [c.text for c in heads[-1]]
        if any(last[:depth]) and not any(last[depth:]):
            names, heads = last, heads[:-1]
    header = []
    for j in range(width):
        parts: list[str] = []
        for row in heads:
            text = row[j].text if j < len(row) else ""
            if text and (not parts or parts[-1] != text):
                parts.append(text)
        header.append(names[j] if j < len(names) and names[j] else " · ".join(parts))
    return header


def table_markdown(rows: Rows) -> str:
    """A pipe table from a parsed HTML table: spans placed, header rows folded into one, pandas'
    default row numbers left out, missing values blank (see the module docstring)."""
    grid = table_grid(rows)
    heads = [cells for head, cells in grid if head]
    body = [cells for head, cells in grid if not head]
    if not heads and body:
        heads, body = [body[0]], body[1:]
    width = len(grid[0][1]) if grid else 0
    depth = 0  # index levels: the leading <th> cells of the body rows
    if body:
        while depth < width and all(r[depth].th for r in body):
            depth += 1
    header = _fold_header(heads, depth, width)
    texts = [["" if c.text in MISSING else c.text for c in r] for r in body]
    numbered = texts and depth == 1 and all(r[0].isdigit() for r in texts)
    if header and not header[0] and (numbered or not texts):  # row numbers, or an empty index
        header, texts = header[1:], [r[1:] for r in texts]
    lines = ["| " + " | ".join(_cell(c) for c in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in texts]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|") or " "


def html_markdown(fragment: str) -> str | None:
    """Markdown tables for an HTML output that is tables only (a DataFrame), else None."""
    parser = TableParser()
    parser.feed(fragment)
    if not parser.tables or parser.outside:
        return None
    return "\n\n".join(table_markdown(t) for t in parser.tables if t)
