"""``RAG_SHARED_DIR`` is honoured by every data path (issue 15, item 2).

One convention (:func:`rag.paths.resolve`): ``../shared/<rest>`` names ``<rest>`` in the shared data
folder, ``$RAG_SHARED_DIR`` when set. Before issue 15 ``../shared/…`` parameters were joined to the
project root as they stood (a clone without ``../shared`` failed with a GoldError even with
``RAG_SHARED_DIR`` set, and a set variable lost to an existing ``../shared``), and
``judge_dev_path`` used another convention ("relative to ../shared").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag import paths
from rag.evaluation.gold import evidence_items, evidence_on_papers, load_gold
from rag.report import profiles, runner
from rag.report.recorder import read_metrics

#: Parameter names that hold a path to data.
PATH_SUFFIXES = ("_path", "_dir", "_mirror")


def test_shared_paths_follow_the_variable_in_a_clone_without_shared(tmp_path, monkeypatch):
    clone = tmp_path / "clone"  # no ../shared beside it
    clone.mkdir()
    elsewhere = tmp_path / "data" / "shared"
    monkeypatch.setattr(paths, "project_root", lambda: clone)
    monkeypatch.setenv(paths.SHARED_ENV, str(elsewhere))
    assert paths.resolve("../shared/gold/dev.jsonl") == elsewhere / "gold" / "dev.jsonl"
    assert paths.resolve("data/manifest.jsonl") == clone / "data" / "manifest.jsonl"
    assert paths.resolve("/abs/x.jsonl") == Path("/abs/x.jsonl")
    monkeypatch.delenv(paths.SHARED_ENV)
    assert paths.resolve("../shared/gold/dev.jsonl") == tmp_path / "shared" / "gold" / "dev.jsonl"


def test_every_data_path_parameter_uses_the_one_convention(shared_dir, monkeypatch):
    """A shared-data default starts with ``../shared/`` and resolves to an existing file there."""
    monkeypatch.setenv(paths.SHARED_ENV, str(shared_dir))
    seen = 0
    for nb in profiles.notebook_paths():
        for name, decl in profiles.declared_parameters(nb).items():
            if name == "output_dir" or not name.endswith(PATH_SUFFIXES):
                continue
            default = json.loads(decl["default"])
            if not default:
                continue  # "" = the documented default folder
            if default.startswith(("data/", "outputs/bench/")):  # committed project files
                assert paths.resolve(default).exists(), (nb.stem, name)
                continue
            assert default.startswith("../shared/"), (nb.stem, name, default)
            assert paths.resolve(default).exists(), (nb.stem, name, default)
            seen += 1
    assert seen >= 5  # gold_path ×n, qasper_path ×2, judge_dev_path


@pytest.mark.notebooks
def test_notebook_02_reads_gold_from_rag_shared_dir(shared_dir, tmp_path, monkeypatch):
    """Run 02 on the smoke profile with ``RAG_SHARED_DIR`` at another folder whose gold file holds
    only the first three smoke questions: the recorded quote count must be that file's, not the
    count from ``../shared`` (which is what the notebook read before)."""
    smoke_ids = set(profiles.load_profile("smoke")["all"]["paper_ids"])
    other = tmp_path / "other-shared"
    (other / "gold").mkdir(parents=True)
    (other / "corpus").mkdir()
    (other / "corpus" / "pdfs").symlink_to(shared_dir / "corpus" / "pdfs")
    full = evidence_on_papers(load_gold(shared_dir / "gold" / "dev.jsonl"), smoke_ids)
    lines = [
        line
        for line in (shared_dir / "gold" / "dev.jsonl").read_text().splitlines()
        if line.strip() and set(json.loads(line)["papers"]) & smoke_ids
    ][:3]
    (other / "gold" / "dev.jsonl").write_text("\n".join(lines) + "\n")
    mine = evidence_on_papers(load_gold(other / "gold" / "dev.jsonl"), smoke_ids)
    expected = len(evidence_items(mine))
    assert 0 < expected < len(evidence_items(full))
    monkeypatch.setenv(paths.SHARED_ENV, str(other))
    monkeypatch.delenv(paths.MIRROR_ENV, raising=False)

    runner.run_report("smoke", only=["02"], output_root=str(tmp_path / "outputs"))

    m = read_metrics(tmp_path / "outputs", "smoke/02_chunk")
    assert {s["evidence_intact"]["n"] for s in m["strategies"].values()} == {expected}
