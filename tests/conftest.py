"""Shared fixtures. The default test run is offline and fast; ``slow`` tests use the real corpus.

The whole run is isolated (``tests/isolation.py``): provider keys are removed from the environment
before collection, any socket beyond this machine fails the test that opened it, and a test module
that leaves ``os.environ`` changed fails, naming the variables.
"""

from __future__ import annotations

import contextlib
import os

import pytest

import rag.evaluation  # noqa: F401  (before any test module imports ranx: its numba mode, see there)
from rag import paths
from tests import isolation

#: Set to 1 to let the tests that need the shared data folder skip when it is missing (never in CI).
ALLOW_NO_SHARED_ENV = "RAG_ALLOW_NO_SHARED"
#: Variables that pytest itself changes during a run, and those libraries set for themselves.
IGNORED_ENV = {"PYTEST_CURRENT_TEST", *isolation.LIBRARY_ENV}


#: Per-test limits (s) for tiers whose tests run notebooks or whole-corpus work: the first test of
#: the notebook tier also carries the session's one run of every notebook (``smoke_run``), which
#: takes minutes alone and far longer on a machine shared with other work.
TIER_TIMEOUT_S = {"notebooks": 3600, "slow": 3600}


def pytest_collection_modifyitems(config, items):
    for item in items:
        limits = [s for tier, s in TIER_TIMEOUT_S.items() if item.get_closest_marker(tier)]
        if limits and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(max(limits)))


def pytest_configure(config):
    isolation.clear_provider_keys()
    os.environ.update(isolation.OFFLINE_ENV)
    isolation.install_guard()


def pytest_unconfigure(config):
    isolation.uninstall_guard()


@pytest.fixture(autouse=True)
def _stays_on_this_machine():
    """Fail a test that tried to open a socket beyond loopback, even if the code swallowed the
    error (attempts made by a module or session fixture fail the next test that ends)."""
    yield
    blocked = isolation.take_blocked()
    if blocked:
        pytest.fail(f"reached outside this machine: {blocked}", pytrace=False)


@pytest.fixture(scope="module", autouse=True)
def _environment_unchanged(request):
    """Fail the module that leaves ``os.environ`` changed; restore it, so the leak ends here."""
    before = dict(os.environ)
    yield
    after = dict(os.environ)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    leaked = sorted(changed - IGNORED_ENV)
    if not leaked:
        return
    for k in leaked:
        if k in before:
            os.environ[k] = before[k]
        else:
            del os.environ[k]
    pytest.fail(
        f"{request.module.__name__} changed environment variables {leaked}: set them with "
        "monkeypatch (tests) or rag.shard.process_env (code)",
        pytrace=False,
    )


@pytest.fixture()
def keep_env():
    """``keep_env("NAME", ...)`` puts those variables back as they were when the test ends: for a
    library call that sets them for the rest of the process (:func:`isolation.restored_env`)."""
    with contextlib.ExitStack() as stack:
        yield lambda *names: stack.enter_context(isolation.restored_env(*names))


def _shared_missing(d) -> str | None:
    if (d / "corpus" / "manifest.jsonl").exists():
        return None
    return (
        f"shared data folder not found at {d}: set {paths.SHARED_ENV} to the data "
        f"folder (or, outside CI, {ALLOW_NO_SHARED_ENV}=1 to skip the tests that need it)"
    )


def pytest_sessionstart(session):
    """Without the shared data folder, ~40 tests (every notebook, the browser, serve end-to-end
    and sweep tests) cannot run: that fails the run unless skipping is asked for outside CI."""
    why = _shared_missing(paths.shared_dir())
    if why and (os.environ.get("CI") or os.environ.get(ALLOW_NO_SHARED_ENV) != "1"):
        raise pytest.UsageError(why)


@pytest.fixture(scope="session")
def shared_dir():
    """The read-only shared data folder (``../shared`` or ``$RAG_SHARED_DIR``); its absence fails
    the run at start (:func:`pytest_sessionstart`) unless ``RAG_ALLOW_NO_SHARED=1`` (then skip)."""
    d = paths.shared_dir()
    why = _shared_missing(d)
    if why:
        pytest.skip(why)
    return d


#: Folder (under the project root, git-ignored) that keeps the tests' smoke report between runs.
SMOKE_OUTPUTS = ".test-outputs"


@pytest.fixture(scope="session")
def smoke_run(shared_dir):
    """ONE run of every notebook on the smoke profile, shared by the notebook and browser tests:
    ``(.test-outputs/smoke, runs)``.

    The folder outlives the test run, so the runner's own reuse applies: a notebook is executed
    unless its outputs there came from the same key (code, notebooks, parameters, data, package
    versions and the cache's identity, :mod:`rag.report.fingerprint`). A fresh clone or an
    emptied cache (CI) executes every notebook; a second run with nothing changed reads the pages
    the first one rendered. The session holds an exclusive lock on the folder, so a second test
    run in the same checkout waits instead of rewriting pages the first is reading.
    """
    import fcntl

    from rag.report import runner

    root = paths.project_root() / SMOKE_OUTPUTS
    root.mkdir(exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        runs = runner.run_report("smoke", output_root=str(root))
        yield root / "smoke", runs


@pytest.fixture()
def tmp_cache(tmp_path, monkeypatch):
    """An empty cache root for one test."""
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def build_tiny_bert(folder, words, *, classifier: bool, max_positions: int = 64):
    """Save a 2-layer, hidden-32 BERT (a 1-label classifier or a bare encoder) and a WordPiece
    tokenizer over ``words`` to ``folder``; returns (model, tokenizer). Seeded, so deterministic."""
    import torch
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = transformers.BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=max_positions,
        num_labels=1,
    )
    cls = transformers.BertForSequenceClassification if classifier else transformers.BertModel
    model = cls(config).eval()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return model, tok
