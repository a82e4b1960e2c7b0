"""An unavailable or failing API answerer or judge becomes a "failed: <reason>" row (issue 15, 6).

Against the project's local OpenAI-compatible server answering HTTP 500 to everything. Before
issue 15 notebook 05 called ``answer_all`` per answerer, so the API answerer's RetriesExhausted
sank the notebook (and the report exited 2); an LLM judge whose every call failed ran the retry
ladder on every validation pair and then raised JudgeError.
"""

from __future__ import annotations

import json
import secrets

import pytest
from pydantic import SecretStr

from rag.answer.context import assemble_context
from rag.answer.extractive import ExtractiveAnswerer
from rag.answer.llm import LLMAnswerer
from rag.answer.run import answer_each
from rag.evaluation.faithfulness import grade_with_llm_judges
from rag.llm.factory import make_chat_model, model_failure
from rag.llm.settings import ApiKeys, LLMSettings
from rag.llm.testing import FakeLLMServer
from rag.types import Hit


@pytest.fixture()
def failing():
    with FakeLLMServer("openai") as server:
        server.script(["500"] * 1000)
        yield server


def _chat(server: FakeLLMServer):
    settings = LLMSettings(
        openai_base_url=server.url,
        timeout_s=2.0,
        max_attempts=2,
        backoff_initial_s=0.01,
        backoff_max_s=0.02,
        backoff_jitter_s=0.0,
        cache_enabled=False,
    )
    keys = ApiKeys(openai=SecretStr("sk-local-" + secrets.token_hex(16)))
    return make_chat_model("gpt-4o-mini", settings, cache=None, meter=None, keys=keys)


def _contexts():
    hit = Hit(
        chunk_id="p1#0",
        paper_id="2401.00001",
        page=1,
        section="",
        text="Dense retrieval encodes questions and passages into one vector space.",
        score=1.0,
    )
    questions = {"q1": "What does dense retrieval encode?", "q2": "Into what space?"}
    return questions, {q: assemble_context([hit]) for q in questions}


def test_a_failing_api_answerer_is_a_failed_row_and_the_others_answer(failing):
    questions, contexts = _contexts()
    answerers = {"extractive": ExtractiveAnswerer(), "gpt-4o-mini": LLMAnswerer(_chat(failing))}
    status = {"extractive": "run (no model)", "gpt-4o-mini": "run"}
    answers = answer_each(answerers, questions, contexts, status, progress=False)
    assert list(answers) == ["extractive"] and set(answers["extractive"]) == set(questions)
    assert status["extractive"] == "run (no model)"
    assert status["gpt-4o-mini"].startswith("failed: RetriesExhausted")
    assert "500" in status["gpt-4o-mini"]
    assert failing.requests == 2  # one question's attempts, then the answerer is given up


def test_a_failing_llm_judge_is_a_failed_row(failing, tmp_path):
    questions, contexts = _contexts()
    status = {"offline": "run", "gpt-4o-mini": "run"}
    validation, tables = grade_with_llm_judges(
        {"gpt-4o-mini": _chat(failing)},
        status,
        dev_path=str(tmp_path / "never-read.jsonl"),  # the health check fails first
        limit=None,
        seed=0,
        answers={},
        contexts=contexts,
        items=[],
    )
    assert validation == {} and tables == {}
    assert status["gpt-4o-mini"].startswith("failed: RetriesExhausted")
    assert failing.requests == 2


def test_model_failure_is_none_for_a_working_model():
    with FakeLLMServer("openai") as server:
        assert model_failure(_chat(server)) is None


def test_notebook_05_routes_answerers_and_judges_through_the_failure_handling():
    """The notebook holds no logic: it calls the two package functions and records failed rows."""
    from rag import paths

    nb = json.loads(paths.resolve("notebooks/05_faithfulness.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "answer_each(answerers, questions, contexts, status)" in code
    assert "grade_with_llm_judges(" in code
    assert "answer_all(" not in code
