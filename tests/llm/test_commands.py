from __future__ import annotations

from rag.llm.commands import cmd_cost, cmd_models, cmd_smoke
from rag.llm.settings import ApiKeys


def test_smoke_calls_available_providers_and_names_the_rest(
    oai_server, settings, keys, cache, capsys
):
    only_openai = ApiKeys(openai=keys.openai)
    assert cmd_smoke(settings=settings, cache=cache, keys=only_openai, include_local=False) == 0
    out = capsys.readouterr().out
    assert "openai     gpt-4.1-mini: " in out and oai_server.reply in out
    assert "anthropic  not run: no key: set ANTHROPIC_API_KEY" in out
    assert "groq       not run: no key: set GROQ_API_KEY" in out
    assert oai_server.requests == 1  # one call per available provider
    assert "total" in out


def test_smoke_reports_failure(oai_server, settings, keys, cache, capsys):
    oai_server.script(["401"])
    rc = cmd_smoke(
        settings=settings, cache=cache, keys=ApiKeys(openai=keys.openai), include_local=False
    )
    assert rc == 1 and "FAILED" in capsys.readouterr().out


def test_models_and_cost_tables(tmp_path, capsys):
    assert cmd_models() == 0
    assert "smollm2-135m" in capsys.readouterr().out
    prompts = tmp_path / "q.jsonl"
    prompts.write_text('{"question": "abcdefgh"}\n{"question": "abcd"}\n')
    assert cmd_cost(str(prompts), models=["gpt-4o-mini"], output_tokens=10) == 0
    out = capsys.readouterr().out
    # chars/4 or tiktoken: either way two prompts, 20 output tokens
    assert "gpt-4o-mini" in out and " 2 " in out and " 20 " in out
