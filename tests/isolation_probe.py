"""Probes run by ``tests/test_isolation.py`` in a child pytest (the name keeps them out of the
normal run): each shows one guard of ``tests/conftest.py`` from inside a test."""

from __future__ import annotations

import os
import socket

from rag.llm.settings import KEY_ENV, keys_from_env


def test_no_provider_key_is_visible():
    assert not [k for k in KEY_ENV.values() if k in os.environ]
    assert set(keys_from_env().model_dump().values()) == {None}
    endpoints = {"OPENAI_BASE_URL", "RAG_OPENAI_COMPATIBLE_BASE_URL", "OLLAMA_HOST"}
    assert not endpoints & set(os.environ)


def test_a_swallowed_outside_connect_still_fails():
    try:
        socket.create_connection(("192.0.2.1", 80), timeout=1)
    except Exception:  # noqa: BLE001 - the way library code hides a failed connect
        pass


def test_a_leaked_variable_fails_the_module():
    os.environ["RAG_LEAK_PROBE"] = "1"
