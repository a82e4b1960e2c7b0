"""Model names as ``provider:model``, the dated price table, and "price unknown" never as $0."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest
import yaml

from rag.errors import ConfigError
from rag.llm.base import Completion
from rag.llm.estimate import estimate_cost
from rag.llm.factory import model_status
from rag.llm.meter import CostMeter
from rag.llm.registry import MODELS, parse_model, resolve_model
from rag.llm.settings import ApiKeys, LLMSettings
from rag.report.profiles import model_problems

ROOT = Path(__file__).resolve().parents[1]

#: The registered rows as they were before the table became data: their provider and API id
#: make the completion cache key, so cached answers stay readable only if these stay as they are.
OLD_ROWS = {
    "gpt-4o-mini": ("openai", "gpt-4o-mini"),
    "gpt-4o": ("openai", "gpt-4o"),
    "claude-3-5-haiku": ("anthropic", "claude-3-5-haiku-20241022"),
    "claude-sonnet-4": ("anthropic", "claude-sonnet-4-20250514"),
    "llama-3.1-8b-instant": ("groq", "llama-3.1-8b-instant"),
    "llama-3.3-70b-versatile": ("groq", "llama-3.3-70b-versatile"),
    "smollm2-135m": ("local", "SmolLM2-135M-Instruct-Q4_1"),
}


@pytest.mark.parametrize(
    ("name", "provider", "model"),
    [
        ("openai:gpt-5-nano", "openai", "gpt-5-nano"),
        ("anthropic:claude-opus-4-5", "anthropic", "claude-opus-4-5"),
        ("groq:openai/gpt-oss-20b", "groq", "openai/gpt-oss-20b"),
        ("ollama:qwen2.5:7b", "ollama", "qwen2.5:7b"),  # the model part keeps its colons
        ("openai-compatible:my-vllm-model", "openai-compatible", "my-vllm-model"),
        ("gguf:/models/a b/qwen.gguf", "gguf", "/models/a b/qwen.gguf"),
        ("local:smollm2-135m", "local", "smollm2-135m"),
        ("gpt-4o-mini", "openai", "gpt-4o-mini"),  # a bare registered name
    ],
)
def test_names_parse_into_provider_and_model(name, provider, model):
    ref = parse_model(name)
    assert (ref.provider, ref.model) == (provider, model)
    assert str(ref) == name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("opnai:gpt-4o", r"unknown provider 'opnai'.*known providers: openai, anthropic, groq, "
         r"ollama, openai-compatible, gguf, local"),
        ("qwen2.5:7b", r"unknown provider 'qwen2.5'.*did you mean ollama:qwen2.5:7b"),
        ("gpt-5-ultra", r"unknown model 'gpt-5-ultra'; known models: .*gpt-4o-mini"),
        ("ollama:", r"the model after 'ollama:' is empty"),
        ("", r"give provider:model"),
        ("local:llama-70b", r"unknown local model 'llama-70b'.*gguf:/path/to/model.gguf"),
    ],
)  # fmt: skip
def test_bad_names_are_errors_naming_the_bad_part(name, message):
    with pytest.raises(ConfigError, match=message):
        resolve_model(name)


def test_registered_rows_keep_their_provider_and_api_id():
    for name, (provider, api_model) in OLD_ROWS.items():
        spec = MODELS[name]
        assert (spec.provider, spec.api_model) == (provider, api_model), name
        # the same model named provider:model (by name or by API id) is the same spec
        assert resolve_model(f"{provider}:{name}") is spec
        assert resolve_model(f"{provider}:{api_model}") is spec
    assert resolve_model("local:smollm2-135m").name == "smollm2-135m"


def test_price_table_rows_are_dated_and_sourced_and_packaged():
    rows = yaml.safe_load((ROOT / "rag/llm/prices.yaml").read_text())["models"]
    assert {r["name"] for r in rows} == set(MODELS)
    for r in rows:
        assert r["source"] and len(r["as_of"]) == 10 and r["as_of"][:4].isdigit()
    # the current default API rows are listed beside the old names
    assert {"gpt-4.1-mini", "claude-haiku-4-5", "llama-3.1-8b-instant"} <= set(MODELS)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "prices.yaml" in pyproject["tool"]["setuptools"]["package-data"]["rag.llm"]


def test_cost_from_the_table_and_labels():
    # gpt-4.1-mini: $0.40 / $1.60 per 1M -> 1000 in + 500 out = 0.0004 + 0.0008
    spec = resolve_model("gpt-4.1-mini")
    assert spec.cost(1000, 500) == pytest.approx(0.0012)
    assert spec.price_label == f"list price as of {spec.as_of}"
    assert resolve_model("ollama:qwen2.5:7b").price_label == "$0 (self-hosted)"
    here = LLMSettings(openai_compatible_base_url="http://127.0.0.1:8000/v1")
    assert resolve_model("openai-compatible:x", here).price_label == "$0 (self-hosted)"
    assert resolve_model("gguf:/m/x.gguf").price_label == "$0 (local)"
    assert resolve_model("gguf:/m/x.gguf").name == "gguf:x.gguf"  # no local path in reports
    unknown = resolve_model("openai:gpt-9")
    assert unknown.name == "openai:gpt-9" and not unknown.priced
    assert unknown.price_label == "price unknown"


def test_unpriced_model_is_reported_as_price_unknown_not_zero():
    meter = CostMeter()
    for model, provider, price in [
        ("openai:gpt-9", "openai", "price unknown"),
        ("smollm2-135m", "local", "$0 (local)"),
    ]:
        meter.record(Completion("x", model, provider, 10, 5, 0.0, 0.1, False, price))
    rows = {r["model"]: r for r in meter.to_dict()["by_model"]}
    assert rows["openai:gpt-9"]["price"] == "price unknown"
    assert rows["smollm2-135m"]["price"] == "$0 (local)"
    assert meter.unpriced_models == ["openai:gpt-9"]
    est = {e.model: e for e in estimate_cost(["hello"], ["openai:gpt-9", "gpt-4o-mini"])}
    assert math.isnan(est["openai:gpt-9"].cost_usd) and est["openai:gpt-9"].price == "price unknown"
    assert est["gpt-4o-mini"].cost_usd > 0


def test_model_status_takes_provider_model_names(monkeypatch):
    monkeypatch.delenv("RAG_OPENAI_COMPATIBLE_BASE_URL", raising=False)
    status = model_status(
        ["openai:gpt-9", "openai-compatible:m", "gguf:/nowhere/m.gguf"], LLMSettings(), ApiKeys()
    )
    assert status["openai:gpt-9"] == "not run: no key: set OPENAI_API_KEY"
    assert status["openai-compatible:m"].startswith(
        "not run: no endpoint: set RAG_OPENAI_COMPATIBLE_BASE_URL"
    )
    assert "no such file" in status["gguf:/nowhere/m.gguf"]
    assert "/nowhere" not in status["gguf:/nowhere/m.gguf"]  # the file, not its folder
    s = LLMSettings(openai_compatible_base_url="http://127.0.0.1:9/v1")
    assert model_status(["openai-compatible:m"], s, ApiKeys()) == {"openai-compatible:m": "run"}
    with pytest.raises(ConfigError, match="unknown provider 'olama'"):
        model_status(["olama:qwen2.5:7b"], LLMSettings(), ApiKeys())


def test_profiles_accept_provider_model_and_name_bad_parts():
    assert model_problems("api_models", ["ollama:qwen2.5:7b", "openai:gpt-9", "gpt-4o"]) == []
    problems = model_problems("api_models", ["olama:qwen", "gpt-4o-mni"])
    assert len(problems) == 2
    assert "unknown provider 'olama'" in problems[0] and "ollama" in problems[0]
    assert "unknown model 'gpt-4o-mni'" in problems[1]
    # notebook 05's extra local models are checked like every other model parameter
    assert model_problems("local_models", ["local:qwen2.5-coder-0.5b", "gguf:/m.gguf"]) == []
    (typo,) = model_problems("local_models", ["lcoal:qwen2.5-coder-0.5b"])
    assert "unknown provider 'lcoal'" in typo and "'local_models'" in typo
