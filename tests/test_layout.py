"""The package layout is the dataflow: a stage imports only from its own floor or lower ones.

Floors (low to high): the shared core (``atomic``, ``errors``, ``paths``, ``types``, ``ir``,
``jsonl``, ``shard``, ``verdicts``) →
``llm`` → ``text`` → ``corpus`` → ``index`` → ``retrieval`` → ``answer`` → ``judge`` →
``evaluation`` → ``report`` → ``serve`` → ``lab``, ``bench`` → ``cli``. ``text`` sits below
``corpus`` because the parser normalises text with it. Every import counts, including those inside
functions; the one exception is the package root's lazy re-export of the notebook door
(``from rag import Lab``, :data:`ROOT_EXPORTS`), imported only when the name is asked for.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from rag import paths

FLOORS = {
    "errors": 0, "paths": 0, "types": 0, "ir": 0, "jsonl": 0, "shard": 0, "verdicts": 0,
    "__init__": 0, "scrub": 0, "atomic": 0, "filehash": 0,
    "llm": 1, "text": 2, "corpus": 3, "index": 4, "retrieval": 5, "answer": 6, "judge": 7,
    "evaluation": 8, "papers": 8, "report": 9, "serve": 10, "lab": 11, "bench": 11, "cli": 12,
}  # fmt: skip
#: What ``rag/__init__.py`` may import from above its floor: the public front door, lazily.
ROOT_EXPORTS = {"rag.lab"}
PKG = paths.project_root() / "rag"
#: A module holds one idea and is read in one sitting: at most this many lines.
MAX_LINES = 500
#: The modules still over MAX_LINES, each with how it will be split. The list only shrinks: a
#: module that drops under the cap must leave it.
LONG_MODULES: dict[str, str] = {}


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py"))


def _name(p: Path) -> str:
    return ".".join(("rag", *p.relative_to(PKG).with_suffix("").parts)).removesuffix(".__init__")


def _floor(module: str) -> int:
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else "__init__"
    if key not in FLOORS:
        raise AssertionError(f"{module}: no floor declared for rag.{key}; add it to FLOORS")
    return FLOORS[key]


def _imports(p: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(p.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("rag")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "rag":
                out |= {f"rag.{a.name}" for a in node.names}
            elif node.module.startswith("rag."):
                out.add(node.module)
                # ``from rag.judge import pinned`` imports the module rag.judge.pinned too
                out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def test_every_module_has_a_floor():
    for p in _modules():
        _floor(_name(p))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_no_import_from_a_higher_floor(path):
    me = _name(path)
    allowed = ROOT_EXPORTS if me == "rag" else set()
    mine = {m for m in _imports(path) if not any(m == e or m.startswith(f"{e}.") for e in allowed)}
    bad = [m for m in sorted(mine) if _floor(m) > _floor(me)]
    assert not bad, f"{me} (floor {_floor(me)}) imports higher floors: {bad}"


def test_no_import_cycle():
    graph: dict[str, set[str]] = {}
    names = {_name(p) for p in _modules()}
    for p in _modules():
        deps = set()
        for m in _imports(p):
            while m and m not in names:
                m = m.rpartition(".")[0]
            if m and m != _name(p) and not _name(p).startswith(m + "."):
                deps.add(m)
        graph[_name(p)] = deps
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                cycle = stack[stack.index(d) :] + [d]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_modules_stay_under_the_size_cap(path):
    rel = path.relative_to(PKG).as_posix()
    n = len(path.read_text().splitlines())
    if rel in LONG_MODULES:
        assert n > MAX_LINES, (
            f"rag/{rel} has {n} lines, under the {MAX_LINES}-line cap: remove it from LONG_MODULES"
        )
    else:
        assert n <= MAX_LINES, (
            f"rag/{rel} has {n} lines (> {MAX_LINES}): split it by idea, or add it to "
            "LONG_MODULES with its split plan"
        )


def test_long_modules_exist_and_state_a_split_plan():
    for rel, plan in LONG_MODULES.items():
        assert (PKG / rel).is_file(), f"LONG_MODULES names rag/{rel}, which does not exist"
        assert plan.startswith("split plan: "), f"rag/{rel}: state the split plan"


#: A module's line in its package's docstring: ``- ``name``: what it holds``.
MODULE_LINE = re.compile(r"^- ``(\w+)``: \S", re.M)


def _packages() -> list[Path]:
    return sorted(p.parent for p in PKG.rglob("__init__.py"))


def _listed(package: Path) -> list[str]:
    """The modules a package's docstring names, one ``- ``name``: what`` line each."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    return MODULE_LINE.findall(doc)


@pytest.mark.parametrize("package", _packages(), ids=lambda p: str(p.relative_to(PKG)) or "rag")
def test_each_package_docstring_names_every_module(package):
    rel = package.relative_to(PKG).as_posix()
    where = f"rag/{rel + '/' if rel != '.' else ''}__init__.py"
    actual = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    actual |= {p.parent.name for p in package.glob("*/__init__.py")}
    listed = _listed(package)
    missing = sorted(actual - set(listed))
    assert not missing, f"{where}'s docstring does not name {missing}: add '- ``name``: what'"
    gone = sorted(set(listed) - actual)
    assert not gone, f"{where}'s docstring names modules that do not exist: {gone}"
    twice = sorted({m for m in listed if listed.count(m) > 1})
    assert not twice, f"{where}'s docstring names {twice} twice"


def test_the_module_line_pattern_reads_what_it_should():
    doc = "Intro ``x``.\n\n- ``fetch``: cache → mirror\n- ``ingest_summary``: the record\n  more"
    assert MODULE_LINE.findall(doc) == ["fetch", "ingest_summary"]
    assert MODULE_LINE.findall("- ``x``:\n- `y`: one tick\n  - ``z``: indented") == []


def test_notebooks_define_no_functions_or_classes():
    import json

    for nb in sorted((paths.project_root() / "notebooks").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"])
            lines = [ln for ln in src.splitlines() if not ln.startswith(("%", "!"))]
            tree = ast.parse("\n".join(lines))
            defs = [
                n.name
                for n in ast.walk(tree)
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            ]
            assert not defs, f"{nb.name} defines {defs}: move it into rag/"


#: Lab-diary narration that belongs in docs/ or outputs/bench/*.json, not in code, settings or
#: notebooks: work-process references (issue / session numbers), commit ids (7-12 or 40 hex digits
#: with a letter and a digit; a 32-digit MD5 or 64-digit sha256 is data) and machine-load stories.
NARRATION = re.compile(
    r"\b(?:issue|session)\s+\d+"
    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)(?:[0-9a-f]{7,12}|[0-9a-f]{40})\b"
    r"|\bload\s+(?:average|avg)\s*(?:of\s*|[≈~=]\s*)?\d"
    r"|\bmeasured\s+(?:here|on\s+(?:a|an|the)\s+(?:quiet|idle|busy|loaded))\b",
    re.I,
)


def _text_lines(p: Path):
    """(where, line) of a module, a profile, or a notebook's cell sources."""
    root = paths.project_root()
    if p.suffix == ".ipynb":
        import json

        for i, cell in enumerate(json.loads(p.read_text())["cells"]):
            for j, line in enumerate("".join(cell["source"]).splitlines(), 1):
                yield f"{p.relative_to(root)} cell {i} line {j}", line
    else:
        for j, line in enumerate(p.read_text().splitlines(), 1):
            yield f"{p.relative_to(root)}:{j}", line


def test_no_lab_diary_in_code_settings_or_notebooks():
    root = paths.project_root()
    files = sorted(
        [
            *PKG.rglob("*.py"),
            *(root / "params").rglob("*.yaml"),
            *(root / "notebooks").glob("*.ipynb"),
        ]
    )
    hits = [
        f"{where}: {m.group(0)!r}"
        for f in files
        for where, line in _text_lines(f)
        for m in NARRATION.finditer(line)
    ]
    assert not hits, (
        "issue/session numbers, commit ids or machine-load stories (say what and why; cite a "
        "measurement by its outputs/bench file, history goes in docs/): " + "; ".join(hits)
    )


def test_the_diary_pattern_catches_what_it_should():
    for text in (
        "as issue 13 asks",
        "(session 14)",
        "at 89e0958",
        "under load average 8-10",
        "load avg ≈ 6",
        "measured on a quiet machine",
        "measured here",
    ):
        assert NARRATION.search(text), text
    for text in (
        "papermill issue #511",
        'SCIFACT_MD5 = "5f7d1de60b170fc8027bb7898e2efca1"',
        "cs/0112017",
        "claude-3-5-haiku-20241022",
        "on a busy machine the raylet can miss",
    ):
        assert not NARRATION.search(text), text
