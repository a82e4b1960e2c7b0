"""The test run cannot reach a paid provider or the internet, and no module leaks environment.

The guards live in ``tests/isolation.py`` and ``tests/conftest.py``; these tests show that each
one bites: here in process, and end to end in a child pytest started with provider keys set.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from rag import paths
from rag.llm.settings import KEY_ENV
from tests import isolation


@pytest.mark.parametrize("host", ["192.0.2.1", "10.255.255.1", "::ffff:192.0.2.1"])
def test_a_connect_beyond_loopback_raises_before_any_packet(host):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setblocking(False)  # a real connect would return at once, its SYN already sent
        with pytest.raises(isolation.OutsideNetworkError, match=host):
            s.connect((host, 80))
        # the kernel binds a local port when a connect starts: still unbound, nothing was sent
        assert s.getsockname()[1] == 0
        with pytest.raises(isolation.OutsideNetworkError):
            s.connect_ex((host, 80))
    with pytest.raises(isolation.OutsideNetworkError):
        socket.create_connection((host, 80), timeout=1)
    assert len(isolation.take_blocked()) == 3


def test_datagrams_and_name_lookups_beyond_this_machine_raise():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        with pytest.raises(isolation.OutsideNetworkError):
            s.sendto(b"x", ("192.0.2.1", 53))
        with pytest.raises(isolation.OutsideNetworkError):
            s.connect(("8.8.8.8", 80))  # how some libraries find "their" IP address
    with pytest.raises(isolation.OutsideNetworkError, match="export.arxiv.org"):
        socket.getaddrinfo("export.arxiv.org", 443)
    assert [b.split()[0] for b in isolation.take_blocked()] == ["sendto", "connect", "getaddrinfo"]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_loopback_stays_open(host):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection((host, port), timeout=5) as c:
            conn, _ = server.accept()
            c.sendall(b"ping")
            assert conn.recv(4) == b"ping"
            conn.close()
    assert isolation.take_blocked() == []


def test_is_local():
    assert all(isolation.is_local(h) for h in ("127.0.0.1", "127.8.9.1", "::1", "localhost",
                                                "0.0.0.0", "::ffff:127.0.0.1"))  # fmt: skip
    assert not any(isolation.is_local(h) for h in ("192.0.2.1", "10.0.0.1", "2001:db8::1",
                                                    "arxiv.org", None))  # fmt: skip


def test_clear_provider_keys_removes_keys_tokens_and_provider_settings():
    env = {"OPENAI_API_KEY": "sk-x", "ANTHROPIC_AUTH_TOKEN": "t", "GROQ_BASE_URL": "http://x",
           "HF_TOKEN": "h", "OLLAMA_HOST": "h:1", "RAG_OPENAI_COMPATIBLE_BASE_URL": "http://y",
           "RAG_OLLAMA_PRICE": "1,2", "PATH": "/bin", "RAG_SHARDS": "1"}  # fmt: skip
    removed = isolation.clear_provider_keys(env)
    assert removed == ["ANTHROPIC_AUTH_TOKEN", "GROQ_BASE_URL", "HF_TOKEN", "OLLAMA_HOST",
                       "OPENAI_API_KEY", "RAG_OLLAMA_PRICE",
                       "RAG_OPENAI_COMPATIBLE_BASE_URL"]  # fmt: skip
    assert env == {"PATH": "/bin", "RAG_SHARDS": "1"}


def test_this_run_sees_no_provider_key():
    assert not [k for k in os.environ if k in KEY_ENV.values() or isolation.SECRET_ENV.search(k)]


def test_keys_set_for_the_test_command_never_reach_a_test(tmp_path):
    """A child pytest started with every provider key set: the keys are gone inside its tests, a
    swallowed connect beyond loopback still fails its test, and a leaked variable fails its
    module."""
    env = {**os.environ, **{k: "sk-probe-0123456789" for k in KEY_ENV.values()}}
    env |= {"OPENAI_BASE_URL": "https://api.openai.com/v1", "OLLAMA_HOST": "http://10.0.0.9:11434",
            "RAG_OPENAI_COMPATIBLE_BASE_URL": "http://10.0.0.9:8000/v1"}  # fmt: skip
    xml = tmp_path / "probe.xml"
    cmd = [sys.executable, "-m", "pytest", "tests/isolation_probe.py", "-p", "no:cacheprovider",
           "-o", "addopts=", "-q", f"--junitxml={xml}"]  # fmt: skip
    out = subprocess.run(
        cmd, cwd=paths.project_root(), env=env, capture_output=True, text=True, timeout=300
    )
    cases = {c.get("name"): c for c in ET.parse(xml).getroot().iter("testcase")}
    failures = {n: " ".join(e.get("message", "") for e in c) for n, c in cases.items()}
    assert failures["test_no_provider_key_is_visible"] == "", out.stdout
    swallowed = failures["test_a_swallowed_outside_connect_still_fails"]
    assert "reached outside this machine" in swallowed and "192.0.2.1" in swallowed
    assert "['RAG_LEAK_PROBE']" in failures["test_a_leaked_variable_fails_the_module"]
    assert out.returncode == 1


def test_no_test_times_itself():
    """Speed belongs to the benchmarks (``outputs/bench``): no test reads a clock to assert how
    long something took (deadlines for polling use ``time.monotonic``, tests/polling.py)."""
    clock = re.compile(r"\b(perf_counter|process_time)\(\)|\btimeit\b")
    tests = paths.project_root() / "tests"
    offenders = sorted(
        p.relative_to(tests).as_posix()
        for p in tests.rglob("*.py")
        if clock.search(p.read_text(encoding="utf-8"))
    )
    assert offenders == []


def test_required_dependencies_are_imported_not_skipped():
    """``importorskip`` is for optional packages only: skipping on a package the project requires
    would turn a broken install into a green run."""
    import tomllib
    from importlib.metadata import packages_distributions

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    project = tomllib.loads((paths.project_root() / "pyproject.toml").read_text())["project"]
    required = {norm(re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0]) for d in project["dependencies"]}
    dists = packages_distributions()
    skipped = re.compile(r"importorskip\(\s*[\"']([\w.]+)")
    tests = paths.project_root() / "tests"
    offenders = sorted(
        f"{p.relative_to(tests).as_posix()}: {m}"
        for p in tests.rglob("*.py")
        for m in skipped.findall(p.read_text(encoding="utf-8"))
        if {norm(d) for d in dists.get(m.split(".")[0], [])} & required
    )
    assert offenders == []
