"""Functions behind the ``rag llm ...`` CLI commands (``rag.cli`` dispatches to them).

Each prints a plain table and returns a process exit code, so they double as notebook helpers.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from rag.errors import LLMError, ProviderUnavailable
from rag.llm.assembled import ASSEMBLED, AssembledModel, assembled_path
from rag.llm.cache import CompletionCache
from rag.llm.estimate import estimate_cost, estimate_frame
from rag.llm.factory import available_models, make_cache, make_chat_model
from rag.llm.meter import CostMeter
from rag.llm.registry import MODELS, PRICES_AS_OF
from rag.llm.settings import ApiKeys, LLMSettings, keys_from_env
from rag.paths import display

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)


def size_label(model: AssembledModel) -> str:
    """The model's recorded size in MB or GB ("?" when not recorded)."""
    if model.size is None:
        return "?"
    return f"{model.size / 1e9:.2f} GB" if model.size >= 1e9 else f"{model.size / 1e6:.0f} MB"


def models_frame(settings: LLMSettings | None = None, keys: ApiKeys | None = None) -> pd.DataFrame:
    """Registry and availability as a table: a notebook shows "not run: <reason>" from it."""
    import pandas as pd

    rows = []
    for name, ok, why in available_models(settings, keys):
        m = MODELS[name]
        rows.append(
            {
                "model": name,
                "provider": m.provider,
                "api_model": m.api_model,
                "context": m.context_length,
                "usd_in_per_m": m.usd_in_per_m,
                "usd_out_per_m": m.usd_out_per_m,
                "available": ok,
                "reason": why,
                "price": m.price_label,
                "price_source": m.price_source,
            }
        )
    return pd.DataFrame(rows)


def models_table(settings: LLMSettings | None = None, keys: ApiKeys | None = None) -> str:
    """Every registered model with provider, context, prices and availability here."""
    lines = [
        f"{'model':<26}{'provider':<11}{'context':>9}{'$/1M in':>9}{'$/1M out':>10}"
        f"{'as of':>12}  available",
    ]
    for name, ok, why in available_models(settings, keys):
        m = MODELS[name]
        lines.append(
            f"{name:<26}{m.provider:<11}{m.context_length:>9}{m.usd_in_per_m:>9.2f}"
            f"{m.usd_out_per_m:>10.2f}{m.as_of or '':>12}  {'yes' if ok else 'no — ' + why}"
        )
    lines.append("")
    lines.append(
        f"{'fetched model ($0, local)':<26}{'kind':<11}{'size':>9}  {'licence':<20}available"
    )
    for name, m in sorted(ASSEMBLED.items()):
        try:
            where = f"yes — {display(assembled_path(name))}"
        except ProviderUnavailable as e:
            where = f"no — {e}"
        lines.append(f"{name:<26}{m.kind:<11}{size_label(m):>9}  {m.licence:<20}{where}")
        lines.append(f"{'':<26}{m.about}; sha256 {m.sha256[:16]}…")
    lines.append(
        f"(list prices from rag/llm/prices.yaml, each with its source and date, newest "
        f"{PRICES_AS_OF}; any other model: provider:model, see docs/your-models.md; fetched "
        "models: `rag models fetch NAME`, see docs/models.md)"
    )
    return "\n".join(lines)


def cmd_models(settings: LLMSettings | None = None) -> int:
    """Print the model registry with availability (``rag llm models``)."""
    print(models_table(settings))
    return 0


def cmd_smoke(
    prompt: str = "In one sentence: what is retrieval-augmented generation?",
    *,
    max_tokens: int = 48,
    settings: LLMSettings | None = None,
    cache: CompletionCache | None = None,
    keys: ApiKeys | None = None,
    include_local: bool = True,
) -> int:
    """One call to the first available model of each provider, then the cost table.

    Unavailable providers are listed as "not run" with the reason. Returns 1 if a call failed.
    """
    settings = settings or LLMSettings()
    cache = cache if cache is not None else make_cache(settings)
    keys = keys_from_env() if keys is None else keys
    meter = CostMeter()
    rows = [
        r
        for r in available_models(settings, keys)
        if include_local or MODELS[r[0]].provider != "local"
    ]
    done: set[str] = set()
    failed = False
    for name, ok, why in rows:
        provider = MODELS[name].provider
        if provider in done:
            continue
        if not ok:
            if not any(o for n, o, _ in rows if MODELS[n].provider == provider):
                print(f"{provider:<10} not run: {why}")
                done.add(provider)
            continue
        done.add(provider)
        try:
            model = make_chat_model(name, settings, cache=cache, meter=meter, keys=keys)
            c = model.complete([{"role": "user", "content": prompt}], max_tokens=max_tokens)
        except LLMError as e:
            failed = True
            print(f"{provider:<10} {name}: FAILED — {e}")
            continue
        print(
            f"{provider:<10} {name}: {c.input_tokens} in / {c.output_tokens} out, "
            f"${c.cost_usd:.6f}, {c.latency_s:.2f}s{' (cached)' if c.cached else ''}\n"
            f"           {c.text.strip()[:200]!r}"
        )
    print()
    print(meter.to_frame().to_string(index=False))
    return 1 if failed else 0


def cmd_cost(
    prompts_path: str | None = None,
    *,
    models: list[str] | None = None,
    output_tokens: int = 256,
) -> int:
    """Dry-run cost table: expected tokens and USD per model before spending anything.

    ``prompts_path`` is a text file (one prompt per line) or JSONL with a ``question`` or
    ``prompt`` field; without it, one 1,000-character prompt shows the per-call price.
    """
    if prompts_path is None:
        prompts = ["x" * 1000]
    else:
        lines = Path(prompts_path).read_text(encoding="utf-8").splitlines()
        prompts = []
        for line in filter(str.strip, lines):
            if line.lstrip().startswith("{"):
                rec = json.loads(line)
                prompts.append(str(rec.get("prompt") or rec.get("question") or ""))
            else:
                prompts.append(line)
    est = estimate_cost(prompts, models or sorted(MODELS), output_tokens=output_tokens)
    frame = estimate_frame(est).sort_values(["cost_usd", "model"])
    print(frame.to_string(index=False))
    print(
        f"(assumes {output_tokens} output tokens per prompt; list prices from "
        "rag/llm/prices.yaml, see the price column; NaN: price unknown)"
    )
    return 0
