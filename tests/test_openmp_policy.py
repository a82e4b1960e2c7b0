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
from rag.shard import SHARDS_ENV

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
    for var in (*sweep.THREAD_ENV, "OMP_WAIT_POLICY", SHARDS_ENV):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_cells_beside_each_other_wait_passively_with_their_share_of_threads(clean_env):
    sweep.share_cores(1, beside_others=True)
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert all(os.environ[v] == "1" for v in sweep.THREAD_ENV)
    # and no pinned local-model shards of its own: one llama.cpp instance
    assert LLMSettings().local_workers == 1


def test_a_lone_cell_keeps_the_default_policy(clean_env):
    sweep.share_cores(2, beside_others=False)
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
    sweep.share_cores(1, beside_others=True)
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
    assert os.environ["OMP_NUM_THREADS"] == "3"
