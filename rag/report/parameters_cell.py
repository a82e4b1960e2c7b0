"""A notebook's ``parameters`` cell read as papermill reads it, without importing papermill.

``papermill.inspect_notebook`` reports each parameter of the first cell tagged ``parameters`` as
``{name, inferred_type_name, default, help}``; importing it (nbformat, jsonschema, the
translators) costs about a second, which every ``rag ask`` would pay to read a handful of literals.
:func:`read_parameters` gives the same records from the cell's syntax tree (:mod:`ast`) and its
comments (:mod:`tokenize`): the annotation's source (or ``"None"``), the value's source and the
trailing comment as help. papermill reads each line with a regular expression instead, so the two
differ only on cells the house style rules out (a ``#`` or second ``=`` inside a value, an
annotation with ``|`` or ``...``); a test compares both on every notebook.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from pathlib import Path
from typing import Any

from rag.errors import NotebookError

#: papermill's type comment: ``# type: int  rest of the help``.
_TYPE_COMMENT = re.compile(r"type:\s*(?P<type>\S*)\s*(?P<help>.*)")


def parameters_source(nb: dict[str, Any]) -> str | None:
    """The source of the first cell tagged ``parameters`` (None: no such cell)."""
    for cell in nb.get("cells", []):
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            src = cell.get("source", "")
            return "".join(src) if isinstance(src, list) else str(src)
    return None


def _comments(src: str) -> dict[int, tuple[int, str]]:
    """``{line: (byte column, text after '#')}`` of every comment in ``src`` (byte columns, as
    :mod:`ast` counts them)."""
    lines = src.splitlines()
    out: dict[int, tuple[int, str]] = {}
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            out[row] = (len(lines[row - 1][:col].encode()), tok.string[1:].strip())
    return out


def _source(lines: list[bytes], node: ast.expr, comments: dict[int, tuple[int, str]]) -> str:
    """A node's source; one over several lines is flattened as papermill flattens it (each line
    stripped of its comment and spaces, then joined). Slices by hand: ``ast.get_source_segment``
    re-splits the whole cell on every call."""
    first, last = node.lineno, node.end_lineno or node.lineno
    parts = []
    for n in range(first, last + 1):
        line = lines[n - 1]
        start = node.col_offset if n == first else 0
        end = node.end_col_offset if n == last and node.end_col_offset is not None else len(line)
        if n in comments and n != last:
            end = min(end, comments[n][0])
        parts.append(line[start:end].decode().strip())
    return "".join(parts)


def parse_parameters(src: str) -> dict[str, dict[str, str]]:
    """papermill's records of the top-level assignments of a parameters cell's source.

    Raises:
        NotebookError: the cell is not valid Python (the message names the line).
    """
    try:
        tree = ast.parse(src)
        comments = _comments(src)
    except (SyntaxError, tokenize.TokenError) as e:
        raise NotebookError(f"parameters cell is not valid Python: {e}; fix the cell") from e
    lines = [line.encode() for line in src.splitlines()]
    out: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            target, value, ann = node.target.id, node.value, node.annotation
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            target, value, ann = node.targets[0].id, node.value, None
        else:
            continue
        help_ = comments.get(node.end_lineno or node.lineno, (0, ""))[1]
        type_name = "None"
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            type_name = ann.value  # a quoted annotation: papermill drops the quotes
        elif ann is not None:
            type_name = _source(lines, ann, comments)
        typed = _TYPE_COMMENT.fullmatch(help_)
        if typed:
            help_ = typed["help"].strip()
            type_name = type_name if ann is not None else typed["type"] or "None"
        out[target] = {
            "name": target,
            "inferred_type_name": type_name.strip(),
            "default": _source(lines, value, comments),
            "help": help_,
        }
    return out


def read_parameters(path: str | Path) -> dict[str, dict[str, str]]:
    """The declared parameters of the notebook at ``path``, as ``papermill.inspect_notebook``
    returns them (``{}``: no cell tagged ``parameters``).

    Raises:
        NotebookError: the file is not a readable notebook, or its cell is not valid Python.
    """
    try:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise NotebookError(f"cannot read notebook {path}: {e}") from e
    src = parameters_source(nb)
    return {} if src is None else parse_parameters(src)
