"""Pinned shards for local-model calls (rag.shard): order, pinning, errors, the same answers."""

from __future__ import annotations

import os
import re
import threading

import pytest

from rag import paths
from rag.shard import cpu_slices, current_slot, process_env, sharded_map, usable_cpus

TWO_CPUS = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(usable_cpus()) < 2, reason="needs 2 usable CPUs"
)


def test_cpu_slices_are_disjoint_contiguous_and_never_empty():
    assert cpu_slices(2, [0, 1, 2, 3, 4]) == [[0, 1, 2], [3, 4]]
    assert cpu_slices(2, [3, 7]) == [[3], [7]]
    assert cpu_slices(4, [0, 1]) == [[0], [1]]  # fewer CPUs than shards: fewer shards
    assert cpu_slices(1, [0, 1]) == [[0, 1]]


def test_one_worker_is_the_plain_loop_in_the_calling_thread():
    me = threading.get_ident()
    seen = sharded_map(lambda x: (x * x, threading.get_ident(), current_slot()), [1, 2, 3], 1)
    assert seen == [(1, me, 0), (4, me, 0), (9, me, 0)]


@TWO_CPUS
def test_items_go_round_robin_to_pinned_shards_and_results_keep_their_order():
    before = os.sched_getaffinity(0)
    cpus = usable_cpus()
    slices = cpu_slices(2, cpus)

    def probe(x: int) -> tuple[int, int, frozenset[int], str]:
        return (
            x,
            current_slot(),
            frozenset(os.sched_getaffinity(0)),
            threading.current_thread().name,
        )

    out = sharded_map(probe, list(range(7)), 2, progress=False)
    assert [x for x, *_ in out] == list(range(7))
    assert [slot for _, slot, _, _ in out] == [i % 2 for i in range(7)]
    for _, slot, aff, _ in out:
        assert aff == frozenset(slices[slot])
    # one thread per shard, neither of them the caller's
    assert {(slot, name) for _, slot, _, name in out} == {(0, "shard-0"), (1, "shard-1")}
    # the caller keeps its own affinity and slot
    assert os.sched_getaffinity(0) == before and current_slot() == 0


@TWO_CPUS
def test_a_failing_item_is_raised_after_both_shards_stop():
    done: list[int] = []
    lock = threading.Lock()

    def f(x: int) -> int:
        if x == 3:
            raise ValueError(f"bad item {x}")
        with lock:
            done.append(x)
        return x

    with pytest.raises(ValueError, match="bad item 3"):
        sharded_map(f, list(range(20)), 2, progress=False)
    # each shard stopped at (or soon after) its failure instead of running to the end
    assert max(done) < 19


def test_more_workers_than_items_is_fine():
    assert sharded_map(str, [5], 8, progress=False) == ["5"]
    assert sharded_map(str, [], 2, progress=False) == []


@TWO_CPUS
def test_sharded_local_answers_equal_the_one_instance_answers():
    """Two single-thread llama.cpp instances in pinned shards write what one 2-thread instance
    writes, question for question, and each instance serves its own shard."""
    from rag.answer.context import assemble_context
    from rag.answer.llm import LLMAnswerer
    from rag.answer.run import answer_all
    from rag.llm.local import LocalBackend
    from rag.llm.model import CachedChatModel
    from rag.llm.registry import get_model
    from rag.llm.settings import LLMSettings
    from tests.test_answer_offline import TEXT1, TEXT2, hit

    questions = {
        "q1": "Does RoBERTa keep next sentence prediction?",
        "q2": "Which n-gram lengths are extracted?",
        "q3": "What is removed from the pretraining objective?",
        "q4": "Which features are extracted from the text?",
    }
    c = assemble_context([hit("c1", 0.9, TEXT1), hit("c2", 0.8, TEXT2)])
    contexts = dict.fromkeys(questions, c)
    spec = get_model("smollm2-135m")

    def answers(backend: LocalBackend) -> dict[str, str]:
        model = CachedChatModel(spec, backend, LLMSettings(), cache=None, meter=None)
        a = LLMAnswerer(model, max_tokens=24, name="local")
        return {q: x.text for q, x in answer_all(a, questions, contexts, progress=False).items()}

    one = LocalBackend("llama_cpp", weights="bf16", workers=1)
    two = LocalBackend("llama_cpp", weights="bf16", workers=2)
    assert two.instance_threads == 1 and one.instance_threads == 2
    assert answers(two) == answers(one)
    assert all(m is not None for m in two._models)  # both instances were used
    # inside a shard a call ran on its one core; from the main thread it may use both
    import llama_cpp

    ctx = two._models[0]._ctx.ctx
    assert llama_cpp.llama_n_threads(ctx) == 1
    two.generate([{"role": "user", "content": "Say hi."}], max_tokens=2)
    assert llama_cpp.llama_n_threads(ctx) == 2 and llama_cpp.llama_n_threads_batch(ctx) == 2


class BlockRecorder:
    """A fake embedder that records each block it is given and the thread that encoded it."""

    dim = 3
    fingerprint = "fake:blocks"
    name = "blocks"
    batch_size = 2

    def __init__(self, shards: int) -> None:
        self.passage_shards = shards
        self.calls: list[tuple[tuple[str, ...], str]] = []

    def encode_passages(self, texts: list[str]):
        import numpy as np

        self.calls.append((tuple(texts), threading.current_thread().name))
        return np.array([[len(t), t.count("a") + 1, 1.0] for t in texts], dtype=np.float32)


@TWO_CPUS
def test_embed_texts_shards_the_same_blocks_and_returns_the_same_vectors():
    import numpy as np

    from rag.index.embed_cache import embed_texts

    texts = [("a" * (i % 7)) + "b" * i for i in range(1, 40)]
    ids = [str(i) for i in range(len(texts))]
    one, two = BlockRecorder(1), BlockRecorder(2)
    v1 = embed_texts(ids, texts, one, cache=False, show_progress=False, block_size=8)
    v2 = embed_texts(ids, texts, two, cache=False, show_progress=False, block_size=8)
    assert np.array_equal(v1, v2)
    # the same blocks (longest first), dealt to the two shards in turn
    assert sorted(b for b, _ in two.calls) == sorted(b for b, _ in one.calls)
    assert {name for _, name in one.calls} == {"MainThread"}
    # 5 blocks: two rounds of two side by side, the last block alone in the caller's thread
    assert [name for _, name in two.calls].count("MainThread") == 1
    assert {name for _, name in two.calls} == {"shard-0", "shard-1", "MainThread"}


@TWO_CPUS
def test_real_minilm_fp32_vectors_do_not_change_when_sharded():
    import numpy as np

    from rag.index.embed import load_embedder
    from rag.index.embed_cache import embed_texts

    texts = [f"Passage {i} about retrieval, chunking and {i * 3} dense vectors." for i in range(24)]
    ids = [str(i) for i in range(len(texts))]
    m = load_embedder("minilm-fp32")
    m.passage_shards = 1
    v1 = embed_texts(ids, texts, m, cache=False, show_progress=False, block_size=8)
    m.passage_shards = 2
    v2 = embed_texts(ids, texts, m, cache=False, show_progress=False, block_size=8)
    np.testing.assert_allclose(v1, v2, atol=1e-6)


def test_process_env_sets_inside_the_block_and_restores_after(monkeypatch):
    monkeypatch.setenv("RAG_T_SET", "user")
    monkeypatch.delenv("RAG_T_NEW", raising=False)
    with process_env({"RAG_T_SET": "a", "RAG_T_NEW": "b"}) as env:
        assert env == {"RAG_T_SET": "a", "RAG_T_NEW": "b"}
        assert os.environ["RAG_T_SET"] == "a" and os.environ["RAG_T_NEW"] == "b"
    assert os.environ["RAG_T_SET"] == "user" and "RAG_T_NEW" not in os.environ


def test_process_env_keep_set_lets_the_user_win_and_restores_on_error(monkeypatch):
    monkeypatch.setenv("RAG_T_SET", "user")
    monkeypatch.delenv("RAG_T_NEW", raising=False)
    with pytest.raises(KeyError), process_env({"RAG_T_SET": "a", "RAG_T_NEW": "b"}, keep_set=True):
        assert os.environ["RAG_T_SET"] == "user" and os.environ["RAG_T_NEW"] == "b"
        raise KeyError("inside")
    assert os.environ["RAG_T_SET"] == "user" and "RAG_T_NEW" not in os.environ


def test_only_process_env_writes_the_environment():
    """Code sets process-wide variables through process_env (scoped to a block), except two set
    for the life of their process on purpose: numba's JIT switch (it must precede ranx's import of
    numba) and tqdm's interval inside a report kernel (rag/report/quiet.py)."""
    write = re.compile(
        r"os\.environ(\[[^]]+\]\s*=[^=]|\.(update|setdefault|pop|clear|popitem)\()"
        r"|os\.(putenv|unsetenv)\("
    )
    allowed = {"shard.py", "evaluation/__init__.py", "report/quiet.py"}
    found = {
        p.relative_to(paths.project_root() / "rag").as_posix()
        for p in (paths.project_root() / "rag").rglob("*.py")
        if write.search(p.read_text(encoding="utf-8"))
    }
    assert found <= allowed, sorted(found - allowed)
    assert "shard.py" in found  # the pattern does find a write
