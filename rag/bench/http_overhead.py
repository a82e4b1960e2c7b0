"""Per-call overhead of an OpenAI-compatible HTTP server vs in-process llama.cpp, same GGUF file.

Runs ``python -m llama_cpp.server`` on 127.0.0.1 with a GGUF file and sends the same prompts,
greedy, to it (through the openai SDK, as the ``openai-compatible:`` provider does) and to an
in-process ``llama_cpp.Llama`` of the same file, both on one thread with the same context size,
alternating per prompt so machine load hits both alike. Each prompt is sent twice per path: the
first call evaluates it after another prompt (only the chat template's system prefix is reused
from the KV cache), the second right after itself (the whole prompt is reused), which both the
server and an in-process model do on their own. Writes per-prompt latencies of both calls, token
counts, whether the texts are identical, and the median overheads to
``outputs/bench/openai_compatible.json``.

The server's requests default to ``repeat_penalty`` 1.1 where in-process
``create_chat_completion`` defaults to 1.0, and the openai SDK sends no repeat penalty, so greedy
texts part ways; each prompt is therefore sent a third time over HTTP with ``repeat_penalty`` 1.0
(``extra_body``) and compared with the in-process second call (same KV state: prompt reused).

Usage: ``python -m rag.bench.http_overhead [--gguf PATH] [--prompts 10]``
(default file: the bf16 copy of the packaged SmolLM2 weights that ``local:smollm2-135m`` runs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from rag.llm.local_weights import converted_gguf
from rag.llm.openai_chat import OpenAIChatBackend
from rag.paths import project_root

PROMPTS = [
    "What is retrieval-augmented generation? Answer in one sentence.",
    "Name two ways to evaluate a retriever.",
    "What does BM25 score?",
    "Why do dense retrievers need an embedding model?",
    "What is a cross-encoder reranker?",
    "Explain reciprocal rank fusion briefly.",
    "What is the capital of France?",
    "What does a faithfulness judge check in an answer?",
    "Give one reason to cache model completions.",
    "What is a context window?",
    "Why might an answer cite a source it did not use?",
    "What is greedy decoding?",
]
N_CTX = 2048
MAX_TOKENS = 48


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(gguf: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    args = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", "bench",
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX), "--n_threads", "1",
        "--n_threads_batch", "1",
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise RuntimeError("llama_cpp.server did not start in 300 s")


def run(gguf: Path, n_prompts: int) -> dict[str, Any]:
    """Measure both paths on ``n_prompts`` prompts; the JSON record."""
    import openai

    from rag.llm.llama_load import load_llama
    from rag.llm.model import RawCompletion

    load_at_start = os.getloadavg()[0]
    llm = load_llama(
        model_path=str(gguf), n_ctx=N_CTX, n_threads=1, n_threads_batch=1, seed=0, verbose=False
    )

    class _InProcess:
        def call(self, model: str, messages: Any, **kw: Any) -> RawCompletion:
            r = llm.create_chat_completion(
                messages=messages, temperature=0.0, max_tokens=MAX_TOKENS, seed=0
            )
            u = r["usage"]
            text = r["choices"][0]["message"]["content"] or ""
            return RawCompletion(text, u["prompt_tokens"], u["completion_tokens"])

    local = _InProcess()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = _start_server(gguf, Path(tmp) / "server.log")
        try:
            client = openai.OpenAI(base_url=url, api_key="no-key", timeout=600, max_retries=0)
            http = OpenAIChatBackend(client, "openai-compatible")
            kw: dict[str, Any] = dict(
                temperature=0.0, max_tokens=MAX_TOKENS, stop=None, seed=0, json_mode=False
            )
            rows = []
            for i, prompt in enumerate(PROMPTS[:n_prompts]):
                msgs = [{"role": "user", "content": prompt}]
                calls: dict[str, list[tuple[float, RawCompletion]]] = {"in_process": [], "http": []}
                order = ("in_process", "http") if i % 2 == 0 else ("http", "in_process")
                for path in order:
                    for _ in range(2):  # after another prompt, then right after itself
                        t0 = time.perf_counter()
                        raw = (local if path == "in_process" else http).call("bench", msgs, **kw)
                        calls[path].append((time.perf_counter() - t0, raw))
                t0 = time.perf_counter()
                resp = client.chat.completions.create(
                    model="bench", messages=msgs, temperature=0.0, max_tokens=MAX_TOKENS, seed=0,
                    extra_body={"repeat_penalty": 1.0},
                )  # fmt: skip
                t_same = time.perf_counter() - t0
                same = resp.choices[0].message.content or ""
                (ta1, a1), (ta2, a2) = calls["in_process"]
                (tb1, b1), (tb2, _) = calls["http"]
                rows.append(
                    {
                        "prompt": prompt,
                        "in_process_s": [round(ta1, 4), round(ta2, 4)],
                        "http_s": [round(tb1, 4), round(tb2, 4)],
                        "http_repeat_penalty_1_s": round(t_same, 4),
                        "tokens_in": [a1.input_tokens, b1.input_tokens],
                        "tokens_out": [a1.output_tokens, b1.output_tokens],
                        "tokens_out_repeat_penalty_1": [
                            a2.output_tokens,
                            resp.usage.completion_tokens if resp.usage else -1,
                        ],
                        "identical": a1.text == b1.text,
                        "identical_with_repeat_penalty_1": a2.text == same,
                        "in_process_text": a1.text,
                        "http_text": b1.text,
                        "http_repeat_penalty_1_text": same,
                    }
                )
                r = rows[-1]
                print(f"{i}: {r['in_process_s']} vs {r['http_s']}, equal work "
                      f"{ta2:.3f}s vs {t_same:.3f}s, identical={r['identical']}/"
                      f"{r['identical_with_repeat_penalty_1']}", flush=True)  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    same = [r for r in rows if r["identical_with_repeat_penalty_1"]]

    def med(xs: list[float]) -> float:
        return round(statistics.median(xs), 4) if xs else float("nan")

    return {
        "what": "per-call latency of llama-cpp-python's OpenAI-compatible server (HTTP, openai "
        "SDK) vs in-process llama_cpp.Llama, same GGUF file, greedy, 1 thread each",
        "gguf": gguf.name,
        "n_ctx": N_CTX,
        "max_tokens": MAX_TOKENS,
        "timing": "per prompt and path: a call after another prompt, then the same prompt again "
        "(its KV reused); paths alternate per prompt; then HTTP with repeat_penalty 1.0",
        "python": platform.python_version(),
        "llama_cpp_python": __import__("llama_cpp").__version__,
        "cpus": os.cpu_count(),
        "load_average_1m_at_start": round(load_at_start, 2),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        "n_prompts": len(rows),
        "identical_answers_server_defaults": sum(r["identical"] for r in rows),
        "identical_answers_repeat_penalty_1": len(same),
        "median_in_process_s": med([r["in_process_s"][0] for r in rows]),
        "median_http_s": med([r["http_s"][0] for r in rows]),
        "median_overhead_equal_work_s": med(
            [r["http_repeat_penalty_1_s"] - r["in_process_s"][1] for r in same]
        ),
        "median_overhead_equal_work_per_output_token_s": med(
            [
                (r["http_repeat_penalty_1_s"] - r["in_process_s"][1])
                / max(1, r["tokens_out_repeat_penalty_1"][0])
                for r in same
            ]
        ),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gguf", default=None, help="GGUF file (default: the packaged SmolLM2, bf16)")
    p.add_argument("--prompts", type=int, default=10)
    p.add_argument("--out", default=str(project_root() / "outputs/bench/openai_compatible.json"))
    a = p.parse_args(argv)
    gguf = Path(a.gguf) if a.gguf else converted_gguf("bf16")
    record = run(gguf, a.prompts)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in record.items() if k != "rows"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
