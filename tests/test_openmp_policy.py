"""Importing rag sets OpenMP's passive wait policy before torch or llama_cpp can load libgomp."""

from __future__ import annotations

import os
import subprocess
import sys

from rag.report.runner import KERNEL_ENV

PROBE = "import rag, os, sys; print(os.environ['OMP_WAIT_POLICY']); print('torch' in sys.modules)"


def _probe(env_extra: dict[str, str]) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"} | env_extra
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def test_import_sets_passive_before_any_openmp_library_loads():
    policy, torch_loaded = _probe({})
    assert policy == "PASSIVE"
    assert torch_loaded == "False"  # libgomp reads the policy when it loads: rag must come first


def test_an_explicit_policy_in_the_environment_wins():
    assert _probe({"OMP_WAIT_POLICY": "ACTIVE"})[0] == "ACTIVE"


def test_report_kernels_get_the_policy():
    assert KERNEL_ENV["OMP_WAIT_POLICY"] in {"PASSIVE", os.environ.get("OMP_WAIT_POLICY")}
