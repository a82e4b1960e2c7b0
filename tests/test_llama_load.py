"""llama.cpp loading rule: extra (AMX) buffers off on CPUs that advertise AMX, same answers."""

from __future__ import annotations

import llama_cpp.llama_cpp as lib

from rag.llm.llama_load import EXTRA_BUFFERS_ENV, cpu_flags, load_llama, use_extra_buffers
from rag.llm.local_weights import find_gguf


def test_amx_in_cpuid_turns_extra_buffers_off_and_the_environment_overrides():
    assert use_extra_buffers(frozenset({"avx2", "avx512f"}), env={}) is True
    assert use_extra_buffers(frozenset({"avx512f", "amx_tile", "amx_int8"}), env={}) is False
    assert use_extra_buffers(frozenset({"amx_tile"}), env={EXTRA_BUFFERS_ENV: "1"}) is True
    assert use_extra_buffers(frozenset({"avx2"}), env={EXTRA_BUFFERS_ENV: "0"}) is False


def test_cpu_flags_reads_the_flags_line(tmp_path):
    f = tmp_path / "cpuinfo"
    f.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 amx_tile\nbogomips\t: 1\n")
    assert cpu_flags(f) == {"fpu", "sse2", "avx2", "amx_tile"}
    assert cpu_flags(tmp_path / "missing") == frozenset()


def test_the_packaged_q4_1_file_loads_and_answers_greedily_twice_alike(monkeypatch):
    # Q4_1 is an AMX type: on a VM that advertises AMX but never enables it, loading with
    # extra buffers and generating dies with SIGILL, which would end this whole test run
    monkeypatch.delenv(EXTRA_BUFFERS_ENV, raising=False)
    original = lib.llama_model_default_params
    kw = dict(model_path=str(find_gguf()), n_ctx=256, n_threads=1, seed=0, verbose=False)
    msgs = [{"role": "user", "content": "Name one colour."}]
    outs = []
    for _ in range(2):
        model = load_llama(**kw)
        out = model.create_chat_completion(messages=msgs, max_tokens=6, temperature=0)
        outs.append(out["choices"][0]["message"]["content"])
        del model
    assert outs[0].strip() and outs[0] == outs[1]
    assert lib.llama_model_default_params is original  # the factory is restored after loading
    assert lib.llama_model_default_params().use_extra_bufts is True
