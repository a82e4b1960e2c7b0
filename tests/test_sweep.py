"""``rag sweep``: grid validation, parallel kernels, failure, resume after SIGKILL, both engines.

Tiny notebooks written into ``tmp_path`` carry the validation, kernel, failure and resume tests (a
cell costs a kernel start, ~2 s); the engine-equality test runs the real notebook 04 on the smoke
sweep (``params/sweeps/smoke.yaml``, 2 cells) once per engine and compares the tables.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys

import nbformat
import pandas as pd
import pytest

from rag.errors import ConfigError, NotebookError
from rag.report import kernels, profiles, runner, sweep, sweep_config, sweep_results
from tests.isolation import RAY_DRIVER_ENV, restored_env
from tests.polling import wait_until

TIMING = ["wall_s"]


def _notebook(path, body: str) -> None:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(
        'profile: str = "default"  # profile\noutput_dir: str = "outputs/x"  # output folder\n'
        "x: int = 1  # a number\nsleep_s: float = 0.0  # seconds to wait\n"
    )
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# Demo"), params, nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)


BODY = """
import time
from rag.report.recorder import Recorder
time.sleep(sleep_s)
if x < 0:
    raise ValueError(f"x must be >= 0, got {x}")
Recorder(output_dir, "01_demo").metrics({"demo": {"score": {"mean": x / 10, "ci_low": x / 10 - 0.1,
                                                  "ci_high": x / 10 + 0.1, "n": 5}}})
"""


@pytest.fixture()
def project(tmp_path, monkeypatch):
    """A throwaway notebooks/ + params/ pair with one demo notebook; outputs under tmp_path."""
    nbs, prm = tmp_path / "notebooks", tmp_path / "params"
    nbs.mkdir()
    (prm / "sweeps").mkdir(parents=True)
    monkeypatch.setattr(profiles, "NOTEBOOKS_DIR", str(nbs))
    monkeypatch.setattr(profiles, "PARAMS_DIR", str(prm))
    (prm / "demo.yaml").write_text("all: {}\n")
    monkeypatch.setattr(sweep, "code_version", lambda: "pinned")  # as in _CLI below
    _notebook(nbs / "01_demo.ipynb", BODY)
    return tmp_path


def _sweep_file(project, name: str, grid: str, extra: str = "") -> str:
    path = project / "params" / "sweeps" / f"{name}.yaml"
    path.write_text(
        f"profile: demo\nnotebooks: ['01']\ngrid:\n  01_demo:\n{grid}\n"
        "main: {notebook: 01_demo, scope: demo, metric: score}\n" + extra
    )
    return str(path)


def test_unknown_grid_key_is_rejected_before_anything_runs(project):
    path = _sweep_file(project, "bad", "    x: [1, 2]\n    chunk_size: [100]")
    with pytest.raises(ConfigError, match=r"'chunk_size' is not a parameter of notebook 01_demo"):
        sweep.run_sweep(path, output_root=str(project / "out"))
    assert not (project / "out").exists()


def test_grid_values_are_type_checked_and_cells_named_deterministically(project):
    bad = _sweep_file(project, "typed", "    x: [1, 'two']")
    with pytest.raises(ConfigError, match=r"'x' is declared int"):
        sweep.run_sweep(bad, output_root=str(project / "out"))
    spec = sweep_config.load_spec(
        sweep_config.sweep_path(_sweep_file(project, "ok", "    x: [1, 2]\n    sleep_s: [0.5]"))
    )
    cells = sweep_config.expand(spec, "ok", "o")
    assert [c.name for c in cells] == ["x=1,sleep_s=0.5", "x=2,sleep_s=0.5"]
    assert cells[1].parameters["01_demo"]["output_dir"] == "o/ok/x=2,sleep_s=0.5"
    assert sweep_config.cell_name({"m": ["a b", "c/d"]}) == "m=a_b+c_d"


def test_kernels_start_concurrently_each_with_its_own_sockets():
    """Six kernels started at once all answer (papermill#511 would lose some to a port clash)."""

    async def start_all(n: int) -> list[tuple[bool, str]]:
        managers = [
            kernels.IsolatedKernelManager(kernel_name=runner.ensure_kernel()) for _ in range(n)
        ]
        await asyncio.gather(*(km.start_kernel() for km in managers))
        out = [(await km.is_alive(), km.connection_file) for km in managers]
        await asyncio.gather(*(km.shutdown_kernel(now=True) for km in managers))
        return out

    started = asyncio.run(start_all(6))
    assert all(alive for alive, _ in started)
    files = [f for _, f in started]
    assert len(set(files)) == 6 and len({os.path.dirname(f) for f in files}) == 6
    assert not any(os.path.exists(os.path.dirname(f)) for f in files)  # cleaned up


def test_a_failed_kernel_start_is_retried(monkeypatch):
    """The first start dies before answering; the retry starts a real kernel that answers."""
    calls = []
    real_start = kernels.AsyncKernelManager._async_start_kernel

    async def flaky_start(self, **kw):
        calls.append(self.connection_file)
        if len(calls) == 1:
            raise RuntimeError("Kernel died before replying to kernel_info")
        return await real_start(self, **kw)

    monkeypatch.setattr(kernels.AsyncKernelManager, "start_kernel", flaky_start)
    monkeypatch.setattr(kernels, "wait_exponential", lambda **kw: lambda rs: 0.0)

    async def go() -> tuple[bool, int]:
        km = kernels.IsolatedKernelManager(kernel_name=runner.ensure_kernel())
        await km.start_kernel()
        alive = await km.is_alive()
        await km.shutdown_kernel(now=True)
        return alive, km.start_attempts

    alive, attempts = asyncio.run(go())
    assert alive and attempts == 2 and len(calls) == 2
    assert calls[0] != calls[1]  # the retry got a fresh connection file


@pytest.mark.notebooks
def test_failing_cell_is_recorded_while_the_other_finishes(project):
    path = _sweep_file(project, "fails", "    x: [3, -1]")
    with pytest.raises(NotebookError, match=r"(?s)1 of 2 cells failed.*x=-1.*x must be >= 0"):
        sweep.run_sweep(path, workers=2, output_root=str(project / "out"))
    out = project / "out" / "fails"
    bad = json.loads((out / "x=-1" / "manifest.json").read_text())
    assert bad["status"] == "failed" and "ValueError" in bad["error"]
    assert "x must be &gt;= 0" in (out / "x=-1" / "01_demo.html").read_text()  # error cell kept
    assert json.loads((out / "x=3" / "manifest.json").read_text())["status"] == "ok"
    table = pd.read_csv(out / "results.csv")
    assert table[["cell", "x", "scope", "metric", "value", "n"]].values.tolist() == [
        ["x=3", 3, "demo", "score", 0.3, 5]
    ]
    assert "x=-1" in (out / "index.html").read_text()
    # exit code through the CLI: non-zero, naming the failed cell
    cli = subprocess.run(
        [sys.executable, "-c", _CLI, str(project), path, str(project / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 2 and "x=-1" in cli.stderr
    assert "1 already done" in cli.stdout  # x=3 was skipped, x=-1 re-ran and failed again


# runs the CLI with the test project's notebooks/params (a fresh interpreter sees no monkeypatch)
_CLI = """
import sys
from rag.report import profiles, sweep
from rag import cli
profiles.NOTEBOOKS_DIR = sys.argv[1] + "/notebooks"
profiles.PARAMS_DIR = sys.argv[1] + "/params"
sweep.code_version = lambda: "pinned"  # other edits to rag/ in a shared tree must not re-run cells
_run = sweep.run_sweep
sweep.run_sweep = lambda *a, **k: _run(*a, **{**k, "output_root": sys.argv[3]})
sys.exit(cli.main(["sweep", sys.argv[2], "--workers", "1"]))
"""


@pytest.mark.notebooks
def test_a_killed_sweep_resumes_where_it_stopped(project):
    path = _sweep_file(project, "resume", "    x: [1, 2]\n    sleep_s: [3.0]")
    out = project / "out" / "resume"
    proc = subprocess.Popen(
        [sys.executable, "-c", _CLI, str(project), path, str(project / "out")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    first = out / "x=1,sleep_s=3.0" / "manifest.json"
    wait_until(
        lambda: first.exists() and json.loads(first.read_text()).get("status") == "ok",
        what="the first cell to finish",
        interval_s=0.2,
    )
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep, its worker and the worker's kernel
    proc.wait()
    done_before = json.loads(first.read_text())
    assert done_before["status"] == "ok"
    assert not (out / "results.csv").exists()  # killed before the end

    summary = sweep.run_sweep(path, workers=1, output_root=str(project / "out"))
    assert summary["skipped"] == ["x=1,sleep_s=3.0"] and summary["ran"] == ["x=2,sleep_s=3.0"]
    assert json.loads(first.read_text())["started_utc"] == done_before["started_utc"]  # untouched
    assert sorted(pd.read_csv(out / "results.csv")["x"]) == [1, 2]

    # a changed notebook (or rag/ code) is a new key: no cell counts as done any more
    spec = sweep_config.load_spec(sweep_config.sweep_path(path))
    tasks = sweep._tasks(spec, "resume", out, str(project / "out"), False)
    assert all(sweep._is_done(t) for t in tasks)
    _notebook(project / "notebooks" / "01_demo.ipynb", BODY + "\n# changed\n")
    tasks = sweep._tasks(spec, "resume", out, str(project / "out"), False)
    assert not any(sweep._is_done(t) for t in tasks)


def test_code_version_changes_with_any_source_file(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "m.py").write_text("x = 1\n")
    before = sweep.code_version(tmp_path)
    assert sweep.code_version(tmp_path) == before
    (tmp_path / "a" / "m.py").write_text("x = 2\n")
    assert sweep.code_version(tmp_path) != before


def test_metric_leaves_flatten_a_metrics_tree():
    tree = {
        "corpus_gold": {"chunk": {"hybrid": {"ndcg@10": {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6,
                                                         "n": 9}, "latency_ms": {"p50": 1.0}}}},
        "headline": {"x": {"mean": 1, "ci_low": 1, "ci_high": 1, "n": 1}},
    }  # fmt: skip
    leaves = [(s, m, n["mean"]) for s, m, n in sweep_results.metric_leaves(tree)]
    assert leaves == [("corpus_gold/chunk/hybrid", "ndcg@10", 0.5)]


@pytest.fixture(scope="module")
def smoke_sweeps(tmp_path_factory, shared_dir):
    """The smoke sweep (real notebook 04, 2 cells) through each engine, into separate roots.

    Notebook 04 reads SciFact and the gold from the shared folder: without it, skip (visibly,
    through ``shared_dir``) instead of failing both cells."""
    root = tmp_path_factory.mktemp("sweeps")
    with restored_env(*RAY_DRIVER_ENV):
        return {
            engine: (sweep.run_sweep("smoke", engine=engine, workers=2,
                                     output_root=str(root / engine)), root / engine / "smoke")
            for engine in ("local", "ray")
        }  # fmt: skip


@pytest.mark.notebooks
def test_both_engines_give_the_same_results_table(smoke_sweeps):
    (local, local_out), (ray_, ray_out) = smoke_sweeps["local"], smoke_sweeps["ray"]
    assert local["failed"] == [] and ray_["failed"] == []
    a = pd.read_csv(local_out / "results.csv").drop(columns=TIMING)
    b = pd.read_csv(ray_out / "results.csv").drop(columns=TIMING)
    assert len(a) > 50 and set(a["cell"]) == {"chunk_strategy=fixed", "chunk_strategy=sentence"}
    pd.testing.assert_frame_equal(a, b)
    main = a[(a["scope"] == "corpus_gold/chunk/hybrid") & (a["metric"] == "ndcg@10")]
    assert len(main) == 2 and main["value"].between(0, 1).all()
    assert ((main["ci_low"] <= main["value"]) & (main["value"] <= main["ci_high"])).all()


@pytest.mark.notebooks
def test_smoke_sweep_pairs_cells_and_renders_its_page(smoke_sweeps):
    summary, out = smoke_sweeps["local"]
    paired = pd.read_csv(out / "paired.csv")
    assert paired["cell"].tolist() == ["chunk_strategy=sentence"]
    row = paired.iloc[0]
    assert row["base"] == "chunk_strategy=fixed" and row["n"] > 5
    assert row["ci_low"] <= row["diff"] <= row["ci_high"] and 0 < row["p_value"] <= 1
    page = (out / "index.html").read_text()
    for needle in ("figures/heatmap.svg", "figures/diff_to_base.svg", "results.csv",
                   "chunk_strategy=sentence/04_retrieval.html"):  # fmt: skip
        assert needle in page, needle
    assert (out / "figures" / "heatmap.svg").exists()
    assert (out / "chunk_strategy=fixed" / "04_retrieval.html").stat().st_size > 10_000
    assert str(sweep.paths.project_root()) not in page


def test_per_query_table_is_long_and_matches_to_metrics_scopes():
    from tests.test_compare import QRELS, R2, R3, RUNS, grade

    comp = grade("toy/chunk", RUNS, QRELS, metrics=("ndcg@10",), n_resamples=50)
    pq = comp.per_query_table()
    assert list(pq.columns) == ["scope", "qid", "metric", "value"]
    got = {(r.scope, r.qid): r.value for r in pq.itertuples()}
    assert got == pytest.approx(
        {("toy/chunk/A", "q1"): R2, ("toy/chunk/A", "q2"): 1.0,
         ("toy/chunk/B", "q1"): 1.0, ("toy/chunk/B", "q2"): R3}
    )  # fmt: skip
    # the scope is the metric's path in metrics.json ({"toy": {"chunk": to_metrics()}})
    leaves = {s for s, _, _ in sweep_results.metric_leaves({"toy": {"chunk": comp.to_metrics()}})}
    assert leaves == {"toy/chunk/A", "toy/chunk/B"}


def test_report_index_links_rendered_sweeps(tmp_path):
    from rag.report import index_page

    (tmp_path / "default").mkdir()
    assert index_page.sweeps_html(tmp_path / "default") == ""
    (tmp_path / "sweeps" / "chunk_embedder").mkdir(parents=True)
    (tmp_path / "sweeps" / "chunk_embedder" / "index.html").write_text("<html></html>")
    (tmp_path / "sweeps" / "unfinished").mkdir()  # no page yet: not linked
    section = index_page.sweeps_html(tmp_path / "default")
    assert "href='../sweeps/chunk_embedder/index.html'" in section
    assert "unfinished" not in section


def test_the_committed_sweep_files_validate():
    for name, n_cells in (("chunk_embedder", 6), ("smoke", 2)):
        spec = sweep_config.load_spec(sweep_config.sweep_path(name))
        cells = sweep_config.expand(spec, name)
        assert len(cells) == n_cells
        assert sweep_config.base_cell(spec, cells) is cells[0]
    assert cells[1].parameters["04_retrieval"]["chunk_strategy"] == "sentence"
    assert cells[1].parameters["04_retrieval"]["output_dir"] == (
        "outputs/sweeps/smoke/chunk_strategy=sentence"
    )
