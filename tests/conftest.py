"""Shared fixtures. The default test run is offline and fast; ``slow`` tests use the real corpus."""

from __future__ import annotations

import pytest

import rag.evaluation  # noqa: F401  (before any test module imports ranx: its numba mode, see there)
from rag import paths


@pytest.fixture(scope="session")
def shared_dir():
    """The read-only ../shared folder; tests that need it skip visibly when it is absent."""
    d = paths.shared_dir()
    if not (d / "corpus" / "manifest.jsonl").exists():
        pytest.skip(f"shared data folder not found at {d} (set RAG_SHARED_DIR)")
    return d


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory, shared_dir):
    """ONE run of every notebook on the smoke profile, shared by the notebook and browser tests
    (so CI executes the notebooks once): ``(outputs/<tmp>/smoke, runs)``."""
    from rag.report import runner

    root = tmp_path_factory.mktemp("outputs")
    runs = runner.run_report("smoke", output_root=str(root))
    return root / "smoke", runs


@pytest.fixture()
def tmp_cache(tmp_path, monkeypatch):
    """An empty cache root for one test."""
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def build_tiny_bert(folder, words, *, classifier: bool, max_positions: int = 64):
    """Save a 2-layer, hidden-32 BERT (a 1-label classifier or a bare encoder) and a WordPiece
    tokenizer over ``words`` to ``folder``; returns (model, tokenizer). Seeded, so deterministic."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
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
