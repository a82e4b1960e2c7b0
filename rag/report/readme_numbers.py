"""The README's results table, number by number, against the committed files the numbers come from.

Each :class:`Claim` is one row's text as a template: every number a format field (``{name:.3f}``)
naming its source (a key path in a committed ``metrics.json``, a cell or aggregate of a committed
CSV table) and, by its format spec, the README's rounding. A README number passes when it is a
correct rounding of its source to the digits the README shows, either way at an exact tie
(``0.325`` is stored as ``0.32499999999999996`` and may be written 0.33).
:func:`uncovered_numbers` lists any number of the table that no claim checks and
:data:`rag.report.readme_claims.README_UNCHECKED` does not explain, so a number added to the README
without a source fails too. The claims themselves are in :mod:`rag.report.readme_claims`; the
same check reads ``docs/results.md``, the table with every number the README's short rows leave out.
"""

from __future__ import annotations

import csv
import functools
import json
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag.errors import ConfigError

#: The README section whose table is checked.
RESULTS_HEADING = "## Results of the committed default run"
#: A number as the README writes it: ``1,631``, ``0.975``, ``-0.011``, ``+0.070``.
NUMBER = r"[+\-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
#: A number standing alone in README text (not part of ``nDCG@10``, ``SmolLM2-135M``, ``v2``).
LONE_NUMBER = re.compile(rf"(?<![\w@.]){NUMBER}(?![\w.]\d|\w)")


@dataclass(frozen=True)
class Problem:
    """One thing that is stale: where (a page or a README row) and what."""

    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


@functools.lru_cache(maxsize=32)
def _read(path: Path, mtime_ns: int) -> Any:
    # keyed by modification time, so an edited file is read again
    with path.open(encoding="utf-8", newline="") as f:
        return json.load(f) if path.suffix == ".json" else list(csv.DictReader(f))


def _load(root: Path, file: str) -> Any:
    path = root / file
    return _read(path, path.stat().st_mtime_ns)


def _walk(value: Any, path: str) -> Any:
    """``value`` at ``path``: dots outside ``[...]`` separate keys; a key that holds dots itself
    (a model name such as ``nomic-embed-v1.5``) is matched by joining parts until it is found."""
    parts = re.split(r"\.(?![^\[]*\])", path)
    while parts:
        part = parts.pop(0)
        while isinstance(value, dict) and part not in value and parts and "[" not in part:
            part = f"{part}.{parts.pop(0)}"
        select = re.fullmatch(r"(.*)\[(.+)\]", part)
        if select:  # the one list item with these fields: key[a=text,b=fusion]
            want = dict(kv.split("=", 1) for kv in select.group(2).split(","))
            found = [
                x
                for x in value[select.group(1)]
                if all(str(x.get(k)) == v for k, v in want.items())
            ]
            if len(found) != 1:
                raise KeyError(f"{len(found)} items of {select.group(1)!r} match {want}")
            value = found[0]
        else:
            value = value[int(part)] if isinstance(value, list) else value[part]
    return value


@dataclass(frozen=True)
class Json:
    """A number in a committed JSON file: ``file`` (from the project root) and a dotted ``path``
    (``key.0`` indexes a list, ``key[a=x,b=y]`` picks the one list item with those fields);
    ``scale`` states it as the README does (-1: the difference the other way round, 100: %)."""

    file: str
    path: str
    scale: float = 1.0

    def value(self, root: Path) -> float:
        return float(_walk(_load(root, self.file), self.path)) * self.scale

    def __str__(self) -> str:
        return f"{self.file}: {self.path}" + (f" x {self.scale:g}" if self.scale != 1 else "")


@dataclass(frozen=True)
class Csv:
    """A number of a committed CSV table: ``column`` of the one row whose fields are ``where``
    (``how="one"``, times ``scale``), or ``min``/``max`` of the column, ``count`` of rows,
    ``distinct`` values of the column."""

    file: str
    column: str
    where: tuple[tuple[str, str], ...] = ()
    how: str = "one"
    scale: float = 1.0

    def value(self, root: Path) -> float:
        rows = [r for r in _load(root, self.file) if all(r[k] == v for k, v in self.where)]
        col = [r[self.column] for r in rows]
        if self.how == "one":
            if len(rows) != 1:
                raise KeyError(f"{len(rows)} rows match {dict(self.where)}")
            return float(col[0]) * self.scale
        if self.how in ("count", "distinct"):
            return float(len(col) if self.how == "count" else len(set(col)))
        return float({"min": min, "max": max}[self.how](float(x) for x in col))

    def __str__(self) -> str:
        sel = "[" + ",".join(f"{k}={v}" for k, v in self.where) + "]." if self.where else ""
        col = f"{sel}{self.column}" if self.how == "one" else f"{self.how}({self.column})"
        return f"{self.file}: {col}" + (f" x {self.scale:g}" if self.scale != 1 else "")


@dataclass(frozen=True)
class Product:
    """The product of two numbers (a count the README states from a rate and its denominator)."""

    a: Json
    b: Json

    def value(self, root: Path) -> float:
        return self.a.value(root) * self.b.value(root)

    def __str__(self) -> str:
        return f"({self.a}) x ({self.b})"


Source = Json | Csv | Product


@dataclass(frozen=True)
class Claim:
    """Numbers of one README table row: ``text`` as the row writes it (its result and its n cells,
    ``|`` between them), each number a format field whose value comes from ``values[name]``."""

    row: str
    text: str
    values: Mapping[str, Source]

    def fields(self) -> list[tuple[str, str]]:
        return [(n, spec or "") for _, n, spec, _ in string.Formatter().parse(self.text) if n]

    def pattern(self) -> re.Pattern[str]:
        parts = []
        for literal, name, _, _ in string.Formatter().parse(self.text):
            parts.append(re.escape(literal) + (f"(?P<{name}>{NUMBER})" if name else ""))
        return re.compile("".join(parts))


def _fmt(value: float, spec: str) -> str:
    if spec.endswith("d"):
        if abs(value - round(value)) > 1e-9:
            return f"{value!r} (not a whole number)"
        return format(int(round(value)), spec)
    return format(value, spec)


def _digits(number: str) -> int:
    return len(number.split(".")[1]) if "." in number else 0


def shows(readme: str, value: float, spec: str) -> bool:
    """Whether the README's ``readme`` is ``value`` rounded as ``spec`` rounds it, or the other
    rounding of a tie (the same digits, at most half a unit of the last digit away)."""
    expected = _fmt(value, spec)
    if readme.lstrip("+") == expected.lstrip("+"):
        return True
    try:
        shown = float(readme.replace(",", ""))
    except ValueError:
        return False
    digits = _digits(readme)
    return digits == _digits(expected) and abs(shown - value) <= 0.5 * 10**-digits + 1e-9


def results_rows(readme_text: str) -> dict[str, str]:
    """``{finding: "| result | n, notebook |"}`` of the README's results table (``−`` as ``-``)."""
    if RESULTS_HEADING not in readme_text:
        raise ConfigError(f"README has no {RESULTS_HEADING!r} section")
    section = readme_text.split(RESULTS_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in [ln for ln in section.splitlines() if ln.startswith("|")][2:]:  # header, rule
        cells = line.strip().strip("|").split("|")
        rows[cells[0].strip()] = "|" + "|".join(cells[1:]).replace("\u2212", "-") + "|"
    return rows


def claim_problems(
    claim: Claim, rows: Mapping[str, str], root: Path, page: str = "README"
) -> list[Problem]:
    """What of one claim ``page`` (the README, or docs/results.md) does not state as its source
    says."""
    where = f"{page} results row {claim.row!r}"
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
        if not shows(m.group(name), value, spec):
            what = (
                f"says {m.group(name)} ({name}) where {src} is {value!r}, i.e. {_fmt(value, spec)}"
            )
            out.append(Problem(where, what))
    return out


def table_problems(text: str, claims: Sequence[Claim], root: Path, page: str) -> list[Problem]:
    """Numbers of the results table in ``text`` (a page named ``page``) that differ from their
    committed source."""
    rows = results_rows(text)
    return [p for c in claims for p in claim_problems(c, rows, root, page)]


def unchecked_numbers(
    text: str, claims: Sequence[Claim], unchecked: Mapping[str, Mapping[str, str]], page: str
) -> list[Problem]:
    """Numbers of the results table in ``text`` that no claim checks and ``unchecked`` does not
    explain (``{row: {snippet: why}}``; a number inside backticks, such as a notebook name, is no
    claim)."""
    out = []
    for row, rest in results_rows(text).items():
        covered: list[tuple[int, int]] = []
        for c in claims:
            if c.row == row and (m := c.pattern().search(rest)):
                covered += [m.span(name) for name, _ in c.fields()]
        for snippet in unchecked.get(row, {}):
            covered += [m.span() for m in re.finditer(re.escape(snippet), rest)]
        masked = re.sub(r"`[^`]*`", lambda m: " " * len(m.group()), rest)
        for m in LONE_NUMBER.finditer(masked):
            if not any(a <= m.start() and m.end() <= b for a, b in covered):
                out.append(Problem(f"{page} results row {row!r}", f"{m.group()} is not checked"))
    return out
