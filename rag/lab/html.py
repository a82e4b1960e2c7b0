"""Small HTML pieces for the lab's records in a notebook: tables, verdict badges, citation chips.

Every piece escapes what it shows and loads nothing (no script, no font, no stylesheet from the
network), so an executed notebook renders the same offline, in JupyterLab, in VS Code and in the
report's HTML. One ``<style>`` block scoped to ``.rag-lab`` travels with each record.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Iterable, Sequence
from typing import Any

#: The look of every record; scoped to ``.rag-lab`` so a notebook's other outputs are untouched,
#: and specific enough to win over JupyterLab's right-aligned output tables.
STYLE = """<style>
.rag-lab{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:14px;line-height:1.5;
 max-width:64rem}
.rag-lab .rag-head{color:#555;margin:.2em 0 .5em}
.rag-lab table{border-collapse:collapse;margin:.3em 0 .8em}
.rag-lab table.rag-t th,.rag-lab table.rag-t td{border-bottom:1px solid #ddd;padding:3px 8px;
 text-align:left;vertical-align:top}
.rag-lab table.rag-t th{background:#f4f4f4}
.rag-lab table.rag-t td.num{text-align:right;font-variant-numeric:tabular-nums}
.rag-lab .rag-answer{border-left:3px solid #4a7bd0;padding:.3em .8em;margin:.4em 0}
.rag-lab a.rag-chip{display:inline-block;padding:0 5px;margin:0 1px;border-radius:8px;
 background:#e6eefb;color:#1f4e9c;text-decoration:none;font-size:12px}
.rag-lab .rag-v{display:inline-block;padding:0 5px;margin-left:3px;border-radius:8px;
 font-size:12px}
.rag-lab .rag-v-supported{background:#e3f4e6;color:#1d6b2c}
.rag-lab .rag-v-unsupported{background:#fbe5e5;color:#9c1f1f}
.rag-lab .rag-v-not_found{background:#eee;color:#555}
.rag-lab .rag-muted{color:#777}
.rag-lab ol.rag-sources li{margin-bottom:.35em}
.rag-lab .rag-quote{color:#444;font-size:13px}
.rag-lab .rag-gold{background:#fff4cc}
</style>"""

#: What a verdict label shows before its name.
MARKS = {"supported": "✓", "unsupported": "✗", "not_found": "?"}

_ids = itertools.count(1)


def esc(value: Any) -> str:
    """``value`` as HTML text (None as empty)."""
    return "" if value is None else html.escape(str(value), quote=True)


def new_id(kind: str) -> str:
    """An element id unique in this process, so two records in one page never share anchors."""
    return f"rag-{kind}-{next(_ids)}"


def box(kind: str, *parts: str) -> str:
    """A record's outer element with the shared style."""
    return f'<div class="rag-lab rag-{kind}">{STYLE}{"".join(parts)}</div>'


def head(text: str) -> str:
    """A record's one-line heading (already HTML)."""
    return f'<div class="rag-head">{text}</div>'


def snippet(text: str, limit: int = 280) -> str:
    """A passage collapsed to one line and cut to ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def paper_link(arxiv_id: str) -> str:
    """``arXiv:<id>`` linked to its abstract page (an uploaded paper, a DOI and a folder's
    content id ``pdf-…`` have no link)."""
    if arxiv_id.startswith(("upload-", "doi:", "pdf-")):
        return esc(arxiv_id)
    return f'<a href="https://arxiv.org/abs/{esc(arxiv_id)}">arXiv:{esc(arxiv_id)}</a>'


def verdict_badge(verdict: dict[str, Any] | None, claim: str = "") -> str:
    """A badge for a judge's verdict ``{label, score, reason}``; the reason is its tooltip."""
    if not verdict:
        return ""
    label = str(verdict.get("label", ""))
    tip = " — ".join(x for x in (claim, str(verdict.get("reason", ""))) if x)
    name = label.replace("_", " ")
    return (
        f'<span class="rag-v rag-v-{esc(label)}" title="{esc(tip)}">'
        f"{MARKS.get(label, '')} {esc(name)}</span>"
    )


def table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Iterable[str] = ()
) -> str:
    """An HTML table; cells are escaped unless they are :class:`Raw`; ``numeric`` columns align
    right."""
    nums = set(numeric)
    out = [
        '<table class="rag-t"><thead><tr>',
        *(f"<th>{esc(c)}</th>" for c in columns),
        "</tr></thead><tbody>",
    ]
    for row in rows:
        cells = []
        for col, value in zip(columns, row, strict=True):
            cls = ' class="num"' if col in nums else ""
            text = value.html if isinstance(value, Raw) else esc(value)
            cells.append(f"<td{cls}>{text}</td>")
        out.append(f"<tr>{''.join(cells)}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


class Raw:
    """A table cell that is HTML already (a link, a badge)."""

    __slots__ = ("html",)

    def __init__(self, html_text: str) -> None:
        self.html = html_text
