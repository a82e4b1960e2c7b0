"""OpenMP's wait policy: left to the user by default, passive only for sweep cells run side by side.

Measured (2 cores): spinning (the default) is 2.5-3x faster for llama.cpp generation on an idle
machine, passive ~10x faster when other processes hold the cores. ``import rag`` therefore sets
nothing; a sweep with several workers sets passive for its cells' kernels.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rag.errors import ConfigError
from rag.llm.settings import LLMSettings
from rag.report import sweep
from rag.report.runner import KERNEL_ENV
from rag.shard import SHARDS_ENV, process_env

THREADS = "OMP_NUM_THREADS"
PROBE = "import rag, os; print(os.environ.get('OMP_WAIT_POLICY', '<unset>'))"


def _probe(env_extra: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"} | env_extra
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_import_leaves_the_policy_alone():
    assert _probe({}) == "<unset>"
    assert _probe({"OMP_WAIT_POLICY": "ACTIVE"}) == "ACTIVE"
    assert "OMP_WAIT_POLICY" not in KERNEL_ENV


@pytest.fixture
def clean_env(monkeypatch):
    """No thread, wait-policy or shard variable set (monkeypatch restores the caller's)."""
    for var in (*sweep.THREAD_ENV, "OMP_WAIT_POLICY", SHARDS_ENV):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_cells_beside_each_other_wait_passively_with_their_share_of_threads(clean_env):
    env = sweep.share_cores(1, beside_others=True)
    assert env == {**dict.fromkeys(sweep.THREAD_ENV, "1"), "OMP_WAIT_POLICY": "PASSIVE",
                   SHARDS_ENV: "1"}  # fmt: skip
    with process_env(env, keep_set=True):
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
        # and no pinned local-model shards of its own: one llama.cpp instance
        assert LLMSettings().local_workers == 1
    assert "OMP_WAIT_POLICY" not in os.environ and LLMSettings().local_workers == 2


def test_a_lone_cell_keeps_the_default_policy(clean_env):
    env = sweep.share_cores(2, beside_others=False)
    assert env == dict.fromkeys(sweep.THREAD_ENV, "2")
    with process_env(env, keep_set=True):
        assert "OMP_WAIT_POLICY" not in os.environ
        assert os.environ["OMP_NUM_THREADS"] == "2"
        assert LLMSettings().local_workers == 2


def test_a_bad_workers_variable_is_named(clean_env):
    clean_env.setenv(SHARDS_ENV, "two")
    with pytest.raises(ConfigError, match="RAG_SHARDS='two'"):
        LLMSettings()


def test_settings_from_the_user_win(clean_env):
    clean_env.setenv("OMP_WAIT_POLICY", "ACTIVE")
    clean_env.setenv("OMP_NUM_THREADS", "3")
    with process_env(sweep.share_cores(1, beside_others=True), keep_set=True) as env:
        assert env["OMP_WAIT_POLICY"] == os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
        assert env["OMP_NUM_THREADS"] == os.environ["OMP_NUM_THREADS"] == "3"
        assert os.environ["MKL_NUM_THREADS"] == "1"
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE" and "MKL_NUM_THREADS" not in os.environ


def test_a_cell_sets_its_core_share_only_while_its_notebooks_run(clean_env, tmp_path):
    """run_cell (in the calling process here) hands its kernels their share of the cores and
    leaves this process's environment as it found it."""
    seen = []

    def fake_execute(nb, dst, rec, kernel, **kw):
        seen.append({k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", SHARDS_ENV, THREADS)})
        rec.status = "ok"
        return rec

    clean_env.setattr(sweep.runner, "execute_and_render", fake_execute)
    clean_env.setattr(sweep.runner, "ensure_kernel", lambda: "k")
    before = dict(os.environ)
    notebooks = [{"stem": "01_x", "path": "x.ipynb", "parameters": {}}]
    task = {"name": "c", "values": {}, "key": {}, "out_dir": str(tmp_path / "c"), "threads": 1,
            "workers": 2, "notebooks": notebooks}  # fmt: skip
    assert sweep.run_cell(task)["status"] == "ok"
    assert seen == [{"OMP_WAIT_POLICY": "PASSIVE", SHARDS_ENV: "1", THREADS: "1"}]
    assert dict(os.environ) == before
