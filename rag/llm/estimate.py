"""Dry-run cost estimate: expected tokens and dollars of a batch of prompts, before any call.

Input tokens per prompt follow OpenAI's chat accounting: each message costs its content tokens
plus 4 for the role wrapper, and the reply is primed with 3 more
(``n = 3 + sum(tokens(content) + 4)``). Content tokens come from ``tiktoken``'s ``o200k_base``
encoding when tiktoken is installed and its encoding file is available offline; otherwise from
the usual approximation of one token per 4 characters (``ceil(len(text) / 4)``), which is close
for English prose. Each result says which method was used. Output tokens are an assumption the
caller states (default: the ``max_tokens`` budget, the worst case).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from typing import TYPE_CHECKING, Literal

from rag.errors import ConfigError
from rag.llm.base import Message
from rag.llm.registry import resolve_model
from rag.llm.settings import LLMSettings

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

Method = Literal["auto", "tiktoken", "chars/4"]

#: Tokens added per message and to prime the reply (OpenAI chat format accounting).
PER_MESSAGE_TOKENS = 4
REPLY_PRIMING_TOKENS = 3


@dataclass(frozen=True, slots=True)
class Estimate:
    """Expected usage and cost of sending every prompt once to one model."""

    model: str
    provider: str
    n_prompts: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    method: str
    #: how the cost is known; "price unknown" rows carry ``cost_usd`` NaN, never 0
    price: str = ""


@cache
def _tiktoken_counter() -> Callable[[str], int] | None:
    try:
        import tiktoken

        enc = tiktoken.get_encoding("o200k_base")
    except Exception as e:  # noqa: BLE001 - any failure (absent, offline) means: use chars/4
        log.info("tiktoken unavailable (%s: %s); estimating tokens as chars/4", type(e).__name__, e)
        return None
    return lambda text: len(enc.encode(text, disallowed_special=()))


def _chars4(text: str) -> int:
    return math.ceil(len(text) / 4)


def token_counter(method: Method = "auto") -> tuple[Callable[[str], int], str]:
    """A content-token counter and the name of the method it uses."""
    if method == "chars/4":
        return _chars4, "chars/4"
    counter = _tiktoken_counter()
    if counter is None:
        if method == "tiktoken":
            raise ConfigError("method='tiktoken' but tiktoken or its o200k_base file is missing")
        return _chars4, "chars/4"
    return counter, "tiktoken/o200k_base"


def prompt_tokens(messages: Sequence[Message], count: Callable[[str], int]) -> int:
    """Input tokens of one chat prompt: ``3 + sum(count(content) + 4)``."""
    return REPLY_PRIMING_TOKENS + sum(count(m["content"]) + PER_MESSAGE_TOKENS for m in messages)


def estimate_cost(
    prompts: Sequence[list[Message] | str],
    models: Sequence[str],
    *,
    output_tokens: int = 256,
    method: Method = "auto",
    settings: LLMSettings | None = None,
) -> list[Estimate]:
    """Expected tokens and USD of sending each prompt once to each model.

    Args:
        prompts: chat message lists, or plain strings (taken as one user message).
        models: registered names or ``provider:model`` (unknown providers raise ConfigError).
        output_tokens: assumed answer length per prompt.
        method: token counting, "auto" (tiktoken if usable, else chars/4) or forced.
        settings: where the Ollama / OpenAI-compatible endpoints are and any price stated for
            them (:func:`rag.llm.registry.resolve_model`; None: the environment's).
    """
    if output_tokens < 0:
        raise ConfigError(f"output_tokens={output_tokens}: must be >= 0")
    count, used = token_counter(method)
    chats = [[{"role": "user", "content": p}] if isinstance(p, str) else p for p in prompts]
    n_in = sum(prompt_tokens(c, count) for c in chats)
    n_out = output_tokens * len(chats)
    out = []
    for name in models:
        spec = resolve_model(name, settings)
        cost = spec.cost(n_in, n_out) if spec.priced else math.nan
        out.append(
            Estimate(name, spec.provider, len(chats), n_in, n_out, cost, used, spec.price_label)
        )
    return out


def estimate_frame(estimates: Sequence[Estimate]) -> pd.DataFrame:
    """The estimates as a table, one row per model."""
    import pandas as pd

    return pd.DataFrame([asdict(e) for e in estimates])
