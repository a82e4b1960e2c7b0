"""Reading JSONL files of records, the one way: line numbers in every error, pydantic validation,
duplicate ids refused.

The manifest, the gold sets, QASPER, SciFact and the judge pairs are all JSONL; each loader
validates its own record type through :func:`read_records`, so a bad line is reported the same
way everywhere: the file (as :func:`rag.paths.display` shows it), the line, the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from rag.errors import RagError
from rag.paths import display, resolve

M = TypeVar("M", bound=BaseModel)


def iter_jsonl(
    path: str | Path,
    error: type[RagError] = RagError,
    *,
    lines: list[str] | None = None,
    source: str | None = None,
) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for every line of a JSONL file but blanks and ``#`` comments.

    Args:
        path: the file; a relative path is the project's (:func:`rag.paths.resolve`), not the
            working folder's.
        error: the error class raised (e.g. ``GoldError``, ``ManifestError``).
        lines: the lines themselves, when they were read elsewhere.
        source: how errors name the file (default: the path as :func:`rag.paths.display` shows it).

    Raises:
        error: the file cannot be read, a line is not JSON, or a line is not an object.
    """
    p = resolve(path)
    name = source or display(p)
    if lines is None:
        try:
            lines = p.read_text(encoding="utf-8").splitlines()
        except OSError as e:
            raise error(f"cannot read {name}: {e}; pass an existing path") from e
    for lineno, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise error(
                f"{name} line {lineno}: not valid JSON ({e.msg} at column {e.colno}); "
                "each line must be one JSON object"
            ) from e
        if not isinstance(obj, dict):
            raise error(f"{name} line {lineno}: expected a JSON object, got {type(obj).__name__}")
        yield lineno, obj


def validation_message(e: ValidationError) -> str:
    """Pydantic's errors as ``field 'x': message; ...`` (one line, every field named)."""
    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "(item)"
        parts.append(f"field {loc!r}: {err['msg']}")
    return "; ".join(parts)


def read_records(
    path: str | Path,
    model: type[M],
    error: type[RagError] = RagError,
    *,
    id_field: str | None = None,
    lines: list[str] | None = None,
    source: str | None = None,
) -> list[M]:
    """Validate every line of a JSONL file as ``model``; refuse duplicate ``id_field`` values.

    Raises:
        error: naming the file, line (and id) of the first invalid record or repeated id.
    """
    p = resolve(path)
    name = source or display(p)
    out: list[M] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_jsonl(p, error, lines=lines, source=name):
        try:
            item = model.model_validate(obj)
        except ValidationError as e:
            who = f" ({id_field} {obj.get(id_field, '?')!r})" if id_field else ""
            raise error(f"{name} line {lineno}{who}: {validation_message(e)}") from e
        if id_field is not None:
            key = str(getattr(item, id_field))
            if key in seen:
                raise error(
                    f"{name} line {lineno}: {id_field} {key!r} already used on line "
                    f"{seen[key]}; {id_field}s must be unique"
                )
            seen[key] = lineno
        out.append(item)
    return out
