"""rag.bench.report_timing assembles its JSON from a real (fake-notebook) run's run.json."""

from __future__ import annotations

import json
import os
import sys

import pytest

from rag.bench.report_timing import collect, machine, phase, stage_timings
from rag.errors import ConfigError

FAKE_REPORT = """
import json, pathlib
out = pathlib.Path("outputs/default")
for name, wall, metrics in [
    ("01_ingest", 19.5, {"parse_wall_seconds": 14.37, "n_papers": 100}),
    ("03_index", 395.0, {"build": {"bm25_load_or_build_s": 0.07}, "flag_s": True}),
]:
    (out / name).mkdir(parents=True, exist_ok=True)
    (out / name / "metrics.json").write_text(json.dumps(metrics))
run = {"git_commit": "abc", "notebooks": [
    {"name": "01_ingest", "status": "ok", "wall_s": 19.5},
    {"name": "03_index", "status": "ok", "wall_s": 395.0},
]}
(out / "run.json").write_text(json.dumps(run))
cells = [
    {"cell_type": "markdown", "source": "# 03", "metadata": {}},
    {"cell_type": "code", "source": "\\nix = index_corpus(parsed)\\nbuild = 1",
     "metadata": {"papermill": {"duration": 270.14}}},
    {"cell_type": "code", "source": "x = 1", "metadata": {"papermill": {"duration": 0.3}}},
    {"cell_type": "code", "source": "tp = bench()", "metadata": {"papermill": {"duration": 55.7}}},
]
(out / "03_index.ipynb").write_text(json.dumps({"cells": cells}))
"""


def test_stage_timings_keep_only_time_keys():
    m = {"a_s": 1.23456, "n": 3, "b": {"c_seconds": 2, "ok_s": True, "d": {"e_s": 0.5}}}
    assert stage_timings(m, "nb") == {"nb.a_s": 1.235, "nb.b.c_seconds": 2.0, "nb.b.d.e_s": 0.5}


def test_phase_times_install_and_report_and_reads_run_json(tmp_path):
    (tmp_path / "fake_report.py").write_text(FAKE_REPORT)
    res = phase(
        tmp_path,
        dict(os.environ),
        install_cmd=[sys.executable, "-c", "pass"],
        report_cmd=[sys.executable, "fake_report.py"],
    )
    assert res["notebooks"] == {"01_ingest": 19.5, "03_index": 395.0}
    assert res["notebooks_s"] == 414.5 and res["commit"] == "abc"
    assert res["status"] == {"01_ingest": "ok", "03_index": "ok"}
    assert res["stages"] == {
        "01_ingest.parse_wall_seconds": 14.37,
        "03_index.build.bm25_load_or_build_s": 0.07,
    }
    # slowest cells first, named by their first line; sub-2 s cells and notebooks without
    # papermill metadata (01 has no executed .ipynb here) are left out
    assert res["cells"] == {
        "03_index": [
            {"cell": 1, "s": 270.14, "code": "ix = index_corpus(parsed)"},
            {"cell": 3, "s": 55.7, "code": "tp = bench()"},
        ]
    }
    assert res["total_s"] == pytest.approx(res["install_s"] + res["report_s"], abs=0.011)
    assert res["install_s"] > 0 and res["report_s"] > 0  # each command's own wall time
    json.dumps(res)  # the assembled record is plain JSON


def test_a_failing_command_names_itself_and_its_log(tmp_path):
    with pytest.raises(ConfigError, match="exit code 3.*bench-report.log"):
        phase(
            tmp_path,
            dict(os.environ),
            install_cmd=[sys.executable, "-c", "import sys; sys.exit(3)"],
        )
    with pytest.raises(ConfigError, match="no run.json"):
        collect(tmp_path / "outputs" / "default")


def test_machine_describes_the_host():
    m = machine()
    assert m["cpu_count"] == os.cpu_count() and m["python"]
    assert set(m["cpu_simd"]) <= {"avx", "avx2", "fma", "f16c", "avx512f", "avx512_vnni",
                                  "avx512_bf16", "amx_bf16", "avx_vnni"}  # fmt: skip
    bf16 = bool({"avx512_bf16", "amx_bf16"} & set(m["cpu_simd"]))
    assert m["passage_backend"] == ("torch-bf16" if bf16 else "torch")


def test_unknown_phase_is_named_before_anything_is_cloned(tmp_path):
    from rag.bench.report_timing import bench_report

    with pytest.raises(ConfigError, match="'hot'"):
        bench_report(tmp_path / "t.json", phases=("cold", "hot"))
    assert not (tmp_path / "t.json").exists()
