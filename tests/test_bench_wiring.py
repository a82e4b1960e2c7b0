"""What runs the benchmarks and experiments points at code that exists: ``rag bench``'s stages, the
Makefile's ``python -m`` targets, the experiments' commands, and nothing in ``rag`` imports them."""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import re

import pytest

from rag import paths
from rag.bench import run as bench_run
from rag.errors import ConfigError

ROOT = paths.project_root()


def test_every_rag_bench_stage_names_a_function_that_exists():
    assert set(bench_run.BENCHES) == set(bench_run.STAGES)
    for module, name in bench_run.BENCHES.values():
        assert callable(getattr(importlib.import_module(module), name)), (module, name)


def test_rag_bench_help_names_every_stage_and_an_unknown_one_is_refused():
    from rag.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    bench_help = sub.choices["bench"].format_help()
    for stage in bench_run.STAGES:
        assert stage in bench_help, stage
    with pytest.raises(ConfigError, match="no-such-stage"):
        bench_run.run_benchmarks(["no-such-stage"])


def test_make_targets_and_experiment_commands_name_modules_that_exist():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    modules = re.findall(r"python -m ([\w.]+)", makefile)
    assert "rag.bench.rerank" in modules  # the pattern still reads the Makefile
    readmes = sorted((ROOT / "experiments").glob("*/README.md"))
    assert {p.parent.name for p in readmes} >= {
        "judge_crossencoder",
        "judge_lm",
        "judge_e5",
        "extractive_spans",
    }
    for readme in readmes:
        commands = re.findall(r"python -m ([\w.]+)", readme.read_text(encoding="utf-8"))
        assert f"experiments.{readme.parent.name}.run" in commands, readme
        modules += commands
    for module in modules:
        assert importlib.util.find_spec(module) is not None, module


def test_the_package_never_imports_the_experiments():
    offenders = []
    for path in (ROOT / "rag").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == "experiments" or n.startswith("experiments.") for n in names):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
