"""``rag report`` skips a notebook whose inputs are unchanged since its outputs (issue 12).

Tiny notebooks append their name to ``outputs/executions.txt`` when they execute, so each test
counts real executions, not the runner's own account of them.
"""

from __future__ import annotations

import json
import re
import threading

import pytest

from rag import paths
from rag.errors import NotebookError
from rag.report import fingerprint, runner
from tests.test_runner import _notebook, project  # noqa: F401 - the fixture is used by name

STEMS = ("01_a", "02_b", "03_c")

BODY = """
import pathlib
from rag.report.recorder import Recorder
with open(pathlib.Path(output_dir).parent / "executions.txt", "a") as f:
    f.write("{stem}\\n")
Recorder(output_dir, "{stem}").metrics({{"x": x}})
"""


def _chain(project, stems=STEMS, failing=()):  # noqa: F811
    for stem in stems:
        body = BODY.format(stem=stem) + ("raise ValueError('broken')\n" if stem in failing else "")
        _notebook(project / "notebooks" / f"{stem}.ipynb", body)
    (project / "params" / "demo.yaml").write_text("{}\n")
    return project / "outputs" / "demo"


def _run(project, **kw):  # noqa: F811
    """Run the report; return its records and the notebooks that really executed, in order."""
    log = project / "outputs" / "executions.txt"
    before = len(log.read_text().split()) if log.exists() else 0
    try:
        runs = runner.run_report("demo", output_root=str(project / "outputs"), **kw)
    finally:
        executed = log.read_text().split()[before:] if log.exists() else []
    return runs, executed


def _stamps(out) -> dict[str, int]:
    """Modification times of every output file but the two the runner always rewrites."""
    return {
        f.relative_to(out).as_posix(): f.stat().st_mtime_ns
        for f in out.rglob("*")
        if f.is_file() and f.name not in ("run.json", "index.html")
    }


def _records(out) -> dict[str, dict]:
    return {r["name"]: r for r in json.loads((out / "run.json").read_text())["notebooks"]}


@pytest.fixture()
def cached(project, tmp_cache, monkeypatch):  # noqa: F811
    """The demo project with an empty cache of its own. Edits that other work makes to ``rag/``
    or ``data/`` in a shared working tree meanwhile must not re-run the notebooks here."""
    monkeypatch.setattr(fingerprint, "code_version", lambda: "pinned")
    monkeypatch.setattr(fingerprint, "TEMPLATES", ())
    monkeypatch.setattr(fingerprint, "PROJECT_INPUTS", ())
    return project


def test_a_second_run_keeps_every_notebook_without_executing_one(cached, capsys, monkeypatch):
    out = _chain(cached)
    runs, executed = _run(cached)
    assert executed == list(STEMS) and [r.status for r in runs] == ["ok"] * 3
    first = _records(out)
    assert all(re.fullmatch(r"[0-9a-f]{64}", r["key"]) and not r["reused"] for r in first.values())
    assert len({r["key"] for r in first.values()}) == 3
    written = _stamps(out)

    started = []  # no kernel starts: nothing reaches the executor
    monkeypatch.setattr(runner, "execute_and_render", lambda nb, *a, **kw: started.append(nb.stem))
    runs, executed = _run(cached)

    assert started == [] and executed == [] and [r.reused for r in runs] == [True] * 3
    second = _records(out)
    for stem in STEMS:  # the record of the run that produced the outputs, marked reused
        assert second[stem] == {**first[stem], "reused": True}
    assert _stamps(out) == written  # no notebook, page, log or metrics file was rewritten
    printed = capsys.readouterr().out
    since = first["02_b"]["executed_utc"]
    assert f"[runner] 02_b: unchanged since {since}, kept (rag report --force re-executes)" in (
        printed
    )
    text = (out / "run.json").read_text()  # hashes only: no cache id, no shared-folder path
    assert fingerprint.cache_id() not in text and str(paths.shared_dir()) not in text


def test_an_export_after_an_up_to_date_report_writes_only_its_export(cached):
    """``rag report --format md`` on a report with nothing to execute: run.json and index.html
    stay byte for byte (no new start time, no ``reused`` marks); the posts are written."""
    from rag.report.markdown import export_markdown

    out = _chain(cached)
    _run(cached)
    before = {f: (out / f).read_bytes() for f in ("run.json", "index.html")}
    runs, executed = _run(cached, record_unchanged=False)
    assert executed == [] and [r.reused for r in runs] == [True] * 3
    posts = export_markdown(out)
    assert {f: (out / f).read_bytes() for f in before} == before
    assert [p.name for p in posts] == [f"{s}.md" for s in STEMS] + ["index.md"]
    _run(cached)  # the report itself still records a run that kept everything
    assert (out / "run.json").read_bytes() != before["run.json"]


def test_a_changed_parameter_reruns_its_notebook_and_those_after_it(cached):
    out = _chain(cached)
    _run(cached)
    (cached / "params" / "demo.yaml").write_text("02_b:\n  x: 5\n")
    runs, executed = _run(cached)
    assert executed == ["02_b", "03_c"]
    assert [r.reused for r in runs] == [True, False, False]
    assert json.loads((out / "02_b" / "metrics.json").read_text())["x"] == 5
    assert _run(cached)[1] == []  # and then it is up to date again


def test_force_and_a_new_cache_execute_everything(cached, tmp_path, monkeypatch):
    _chain(cached, STEMS[:2])
    _run(cached)
    assert _run(cached, force=True)[1] == ["01_a", "02_b"]
    # a fresh clone beside the committed run.json: the same keys but for the cache's identity
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / "another-cache"))
    runs, executed = _run(cached)
    assert executed == ["01_a", "02_b"] and not any(r.reused for r in runs)


def test_a_failed_notebook_is_never_kept(cached):
    out = _chain(cached, STEMS[:2], failing=("02_b",))
    with pytest.raises(NotebookError, match="02_b failed"):
        _run(cached)
    with pytest.raises(NotebookError, match="02_b failed"):
        _run(cached)
    log = (cached / "outputs" / "executions.txt").read_text().split()
    assert log == ["01_a", "02_b", "02_b"]  # 01 kept, 02 executed again under the same key
    rec = _records(out)
    assert rec["01_a"]["reused"] and rec["02_b"]["status"] == "failed" and rec["02_b"]["key"]


def test_a_missing_output_file_reruns_its_notebook(cached, capsys):
    out = _chain(cached)
    _run(cached)
    (out / "02_b" / "metrics.json").unlink()
    capsys.readouterr()
    runs, executed = _run(cached)
    # 03 reads what 02 produces from the same inputs again: its key, chained on 02's, still holds
    assert executed == ["02_b"] and [r.reused for r in runs] == [True, False, True]
    assert "02_b: executing with profile 'demo' (02_b/metrics.json missing)" in (
        capsys.readouterr().out
    )
    (out / "01_a.code.html").unlink()
    assert _run(cached)[1] == ["01_a"]


def test_only_always_executes_and_keeps_the_other_records(cached):
    out = _chain(cached)
    _run(cached)
    first = _records(out)
    runs, executed = _run(cached, only=["02"])
    assert executed == ["02_b"] and [r.name for r in runs] == ["02_b"]
    now = _records(out)
    assert now["01_a"] == first["01_a"] and now["03_c"] == first["03_c"]
    assert now["02_b"]["key"] == first["02_b"]["key"] and not now["02_b"]["reused"]
    assert _run(cached)[1] == []


def test_a_folder_with_some_notebooks_links_only_to_pages_it_holds(cached):
    out = _chain(cached)
    _run(cached, only=["02"])  # a fresh folder: 02 alone, as an opt-in profile publishes it
    page = (out / "02_b.html").read_text()
    assert "01_a.html" not in page and "03_c.html" not in page
    assert "(first)" in page and "(last)" in page
    _run(cached)  # the whole report: every page links its neighbours again
    page = (out / "02_b.html").read_text()
    assert 'href="01_a.html" rel="prev"' in page and 'href="03_c.html" rel="next"' in page


def test_an_interrupted_run_resumes_where_it_stopped(cached, monkeypatch):
    """run.json is saved after every notebook and says ``running`` while one executes."""
    out = _chain(cached)
    _run(cached)
    real = runner.execute_and_render

    def ctrl_c_in_02(nb, *args, **kwargs):
        if nb.stem == "02_b":
            raise KeyboardInterrupt
        return real(nb, *args, **kwargs)

    monkeypatch.setattr(runner, "execute_and_render", ctrl_c_in_02)
    with pytest.raises(KeyboardInterrupt):
        _run(cached, force=True)
    rec = _records(out)
    assert [rec[s]["status"] for s in STEMS] == ["ok", "running", "ok"]
    monkeypatch.setattr(runner, "execute_and_render", real)
    runs, executed = _run(cached)
    assert executed == ["02_b"] and [r.reused for r in runs] == [True, False, True]


# -- the fingerprint itself (no kernels) ----------------------------------------------------


def test_cache_id_is_created_once_even_by_racing_processes(tmp_cache):
    ids: list[str] = []
    threads = [
        threading.Thread(target=lambda: ids.append(fingerprint.cache_id())) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1 and re.fullmatch(r"[0-9a-f]{32}", ids[0])
    assert (tmp_cache / fingerprint.CACHE_ID_FILE).read_text().strip() == ids[0]
    assert [p.name for p in tmp_cache.iterdir()] == [fingerprint.CACHE_ID_FILE]  # no temp left


def test_api_key_names_count_never_their_values(tmp_cache, monkeypatch):
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GROQ_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    none = fingerprint.run_inputs({})
    monkeypatch.setenv("GROQ_API_KEY", "gsk_first-secret-value")
    one = fingerprint.run_inputs({})
    monkeypatch.setenv("GROQ_API_KEY", "gsk_second-secret-value")
    assert fingerprint.run_inputs({}) == one != none
    assert one["api_keys_set"] == ["GROQ_API_KEY"]
    assert "secret" not in json.dumps(one)
    monkeypatch.setenv("GROQ_API_KEY", "  ")  # empty counts as missing, as in rag.llm.settings
    assert fingerprint.run_inputs({}) == none


def test_data_shared_folder_and_upstream_change_the_key(tmp_path, tmp_cache, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "manifest.jsonl").write_text('{"arxiv_id": "1"}\n')
    before = fingerprint.content_version(("data", "outputs/bench/scale.json"), tmp_path)
    (tmp_path / "data" / "manifest.jsonl").write_text('{"arxiv_id": "2"}\n')
    assert fingerprint.content_version(("data", "outputs/bench/scale.json"), tmp_path) != before

    shared = fingerprint.shared_version()
    monkeypatch.setenv(paths.SHARED_ENV, str(tmp_path / "elsewhere"))
    assert fingerprint.shared_version() != shared

    nb = tmp_path / "01_a.ipynb"
    nb.write_text("{}")
    inputs = fingerprint.run_inputs({"numpy": "2.0"})
    k = fingerprint.notebook_key(inputs, {"x": 1}, nb, "")
    assert k == fingerprint.notebook_key(inputs, {"x": 1}, nb, "")
    assert k != fingerprint.notebook_key(inputs, {"x": 1}, nb, "upstream")
    assert k != fingerprint.notebook_key(inputs, {"x": 2}, nb, "")
    assert k != fingerprint.notebook_key({**inputs, "packages": {"numpy": "2.1"}}, {"x": 1}, nb, "")
    nb.write_text('{"cells": []}')
    assert k != fingerprint.notebook_key(inputs, {"x": 1}, nb, "")
