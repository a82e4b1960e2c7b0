"""``rag search``, ``rag ask`` and ``rag chat`` through argparse, against a real small index.

The index is the smoke profile's five papers, built (or found) in the project's content-addressed
cache as the notebooks build it, with the real MiniLM; the served index lives in a tmp folder. The
commands run in-process through :func:`rag.cli.main`, so the cost is one lab load per command.
"""

from __future__ import annotations

import io
import json
import sys

import pytest

from rag.cli import main
from rag.report.profiles import load_profile

SMOKE_PAPERS = set(load_profile("smoke")["all"]["paper_ids"])
FASTTEXT = "1607.04606"  # "Enriching Word Vectors with Subword Information"


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory, shared_dir):
    return str(tmp_path_factory.mktemp("cli") / "served")


def rag(capsys, *argv: str) -> tuple[int, str, str]:
    """``rag <argv>`` in this process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse refuses bad arguments by exiting
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def smoke(index_dir: str) -> list[str]:
    return ["--profile", "smoke", "--index-dir", index_dir]


def test_search_json_ranks_smoke_chunks(index_dir, capsys):
    code, out, err = rag(
        capsys, "search", "subword n-grams for rare words", "-k", "4", "--json", *smoke(index_dir)
    )
    assert code == 0, err
    d = json.loads(out)
    assert d["query"] == "subword n-grams for rare words" and d["retriever"] == "hybrid"
    assert len(d["hits"]) == 4
    assert {h["arxiv_id"] for h in d["hits"]} <= SMOKE_PAPERS
    assert d["hits"][0]["arxiv_id"] == FASTTEXT
    assert d["hits"][0]["title"].startswith("Enriching Word Vectors with Subword Information")
    scores = [h["score"] for h in d["hits"]]
    assert scores == sorted(scores, reverse=True)
    assert all(h["text"] and h["page"] >= 1 for h in d["hits"])


def test_search_prints_ranked_hits(index_dir, capsys):
    code, out, err = rag(capsys, "search", "subword n-grams", "-k", "2", "--retriever", "bm25",
                         *smoke(index_dir))  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("bm25: 2 hits in ")
    assert lines[1].startswith(" 1. ") and f"arXiv:{FASTTEXT}, p. " in lines[1]
    assert sum(line.startswith((" 1. ", " 2. ")) for line in lines) == 2


def test_ask_json_answers_with_citations_of_smoke_papers(index_dir, capsys):
    question = "How are word vectors computed from character n-grams?"
    code, out, err = rag(capsys, "ask", question, "--json", *smoke(index_dir))
    assert code == 0, err
    d = json.loads(out)
    assert {"query", "retriever", "answerer", "answer", "refused", "citations",
            "unknown_citations", "judgement", "latency_ms"} <= set(d)  # fmt: skip
    assert d["query"] == question and d["answerer"] == "extractive" and not d["refused"]
    # the profile's k (5), at most per_paper_cap (3) from one paper: more than `-k 1` gives
    assert 1 < len(d["citations"]) <= 5
    assert {c["arxiv_id"] for c in d["citations"]} <= SMOKE_PAPERS
    cited = [c for c in d["citations"] if c["cited"]]
    assert cited and all(f"[{c['n']}]" in d["answer"] for c in cited)
    assert d["unknown_citations"] == [] and d["judgement"] is None
    assert FASTTEXT in {c["arxiv_id"] for c in cited}


def test_ask_takes_k_as_given(index_dir, capsys):
    question = "How are word vectors computed from character n-grams?"
    code, out, err = rag(capsys, "ask", question, "-k", "1", "--json", *smoke(index_dir))
    assert code == 0, err
    d = json.loads(out)
    assert [(c["n"], c["arxiv_id"], c["cited"]) for c in d["citations"]] == [(1, FASTTEXT, True)]
    assert "[1]" in d["answer"]


def test_ask_json_names_a_gguf_model_by_its_file_name(index_dir, capsys):
    from rag.llm.local_weights import converted_gguf

    model = converted_gguf("bf16")  # the packaged SmolLM2 as a file given by absolute path
    question = "What is a skipgram model?"
    code, out, err = rag(capsys, "ask", question, "--model", f"gguf:{model}", "-k", "2", "--json",
                         *smoke(index_dir))  # fmt: skip
    assert code == 0, err
    d = json.loads(out)
    assert d["answerer"] == f"gguf:{model.name}" and d["answer"].strip()
    assert str(model.parent) not in out  # no local path in what is printed


def _chat(capsys, monkeypatch, index_dir: str, *extra: str) -> list[str]:
    turns = "What is the subword model of fastText?\nHow is it trained?\n\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(turns))
    code, out, err = rag(capsys, "chat", "-k", "3", *extra, *smoke(index_dir))
    assert code == 0, err
    assert "an empty line or Ctrl-D ends the chat" in err
    assert out.count("\nSources:\n") == 2  # two answers, then the empty line ended the chat
    return [line for line in out.splitlines() if line.startswith("» ")]


def test_chat_rewrites_a_follow_up(index_dir, capsys, monkeypatch):
    queries = _chat(capsys, monkeypatch, index_dir)
    assert queries == [
        "» What is the subword model of fastText?   (not rewritten: no history)",
        "» How is fastText trained?   (rewritten by rules)",
    ]


def test_chat_bypass_rewrite_retrieves_what_was_typed(index_dir, capsys, monkeypatch):
    queries = _chat(capsys, monkeypatch, index_dir, "--bypass-rewrite")
    assert queries == [
        "» What is the subword model of fastText?   (not rewritten: bypass_rewrite)",
        "» How is it trained?   (not rewritten: bypass_rewrite)",
    ]


@pytest.mark.parametrize("command", ["search", "ask", "chat"])
@pytest.mark.parametrize("bad", ["0", "-1", "51", "two"])
def test_a_bad_k_is_refused_by_name_before_anything_loads(command, bad, capsys):
    query = [] if command == "chat" else ["some query"]
    code, out, err = rag(capsys, command, *query, "-k", bad, "--profile", "smoke")
    assert code == 2 and out == ""
    assert f"argument -k: {bad!r} is not a whole number from 1 to 50" in err
    assert "Traceback" not in err
