"""Publishing safety: nothing secret or machine-specific reaches a rendered report.

Rendered notebooks and HTML are published (committed, blogged), so before the runner writes them
every file passes through :func:`rag.scrub.scrub` (secrets, key shapes, absolute local paths).
Every replacement is counted and reported in ``run.json``; ``strict=True`` refuses instead.

JSON files (notebooks, ``run.json``) are scrubbed string by string — parsed, replaced inside each
value, serialised again — never as raw JSON text, where a path pattern would swallow the backslash
that escapes the quote after an absolute-path parameter and corrupt the file.
:func:`publish_file` writes only the scrubbed copy, so the runner executes notebooks in a staging
folder and nothing unscrubbed ever reaches the outputs, even from a failed or interrupted run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rag import paths
from rag.atomic import write_atomic
from rag.errors import PublishError
from rag.scrub import ANSI, ScrubReport, scrub, strip_ansi

__all__ = ["ScrubReport", "publish_file", "scrub", "scrub_file", "scrub_json", "scrub_text_of"]


def scrub_json(value: Any, env: Mapping[str, str] | None = None) -> tuple[Any, ScrubReport]:
    """A parsed JSON value with every string (keys included) scrubbed and stripped of colour
    codes, and what was replaced."""
    report = ScrubReport()

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            clean, r = scrub(strip_ansi(v), env)
            report.merge(r)
            return clean
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {walk(k): walk(x) for k, x in v.items()}
        return v

    return walk(value), report


def scrub_text_of(
    path: Path, text: str, env: Mapping[str, str] | None = None
) -> tuple[str, ScrubReport]:
    """Scrub a file's text: string by string for ``.ipynb`` / ``.json``, as plain text otherwise.

    Terminal colour codes (as in the traceback of a failed notebook) are removed too: a published
    file is read in a browser or an editor, not a terminal. A notebook is serialised as nbformat
    writes it (indent 1, sorted keys, UTF-8), so a clean notebook keeps its bytes and a scrubbed
    one stays valid.
    """
    if path.suffix not in (".ipynb", ".json"):
        return scrub(strip_ansi(text), env)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        # A file cut short by a kill: no JSON to walk, so scrub the text (it is not published
        # as a notebook anyway; the runner only stages it).
        return scrub(ANSI.sub("", text), env)
    clean, report = scrub_json(data, env)
    if clean == data:
        return text, report
    if path.suffix == ".ipynb":
        return json.dumps(clean, indent=1, sort_keys=True, ensure_ascii=False) + "\n", report
    return json.dumps(clean, indent=2, sort_keys=True, ensure_ascii=False) + "\n", report


def publish_file(
    src: Path, dst: Path, *, strict: bool = False, env: Mapping[str, str] | None = None
) -> ScrubReport:
    """Write a scrubbed copy of ``src`` to ``dst`` (atomically); ``src`` is left as it is.

    With ``strict`` raise :class:`PublishError` instead, and write nothing.
    """
    text = src.read_text(encoding="utf-8", errors="replace")
    clean, report = scrub_text_of(dst, text, env)
    if report and strict:
        raise PublishError(
            f"{paths.display(dst)} would publish {report.to_dict()}; remove the secret or "
            "absolute path from the notebook output, or run without --strict to scrub it"
        )
    if src == dst and clean == text:
        return report
    write_atomic(dst, clean)
    return report


def scrub_file(
    path: Path, *, strict: bool = False, env: Mapping[str, str] | None = None
) -> ScrubReport:
    """Scrub a text file in place; with ``strict`` raise :class:`PublishError` instead of fixing."""
    return publish_file(path, path, strict=strict, env=env)
