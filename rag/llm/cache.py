"""Content-addressed disk cache of chat completions.

The key is a SHA-256 over everything that changes a completion: provider, API model id,
messages, temperature, max_tokens, stop, seed, json_mode, prompt_version, decoding constraints
(grammar, repeat penalty; only when set) and a format version.
Values hold the answer text, the provider-reported usage, its cost and the original latency —
never a key or a header. Backed by :mod:`diskcache` (SQLite in WAL mode), which is safe for
several threads and processes at once (papermill runs may overlap).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import diskcache

from rag.errors import ConfigError
from rag.llm.base import Message
from rag.paths import cache_dir

log = logging.getLogger(__name__)

#: Bump when the key layout or the stored value changes; old entries are then never hit.
CACHE_FORMAT = "llm-cache-v1"


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """What one fresh call produced, as stored."""

    text: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_s: float


def cache_key(
    *,
    provider: str,
    model: str,
    messages: list[Message],
    temperature: float,
    max_tokens: int,
    stop: list[str] | None,
    seed: int | None,
    json_mode: bool,
    prompt_version: str,
    decoding: dict[str, Any] | None = None,
) -> str:
    """Hex SHA-256 of the canonical JSON of a request (sorted keys, no whitespace).

    ``decoding`` holds provider-specific decoding constraints (a GBNF grammar, a repeat
    penalty); it enters the payload only when given, so keys of plain requests are unchanged.
    """
    payload = {
        "format": CACHE_FORMAT,
        "provider": provider,
        "model": model,
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "temperature": float(temperature),
        "max_tokens": int(max_tokens),
        "stop": list(stop) if stop else None,
        "seed": seed,
        "json_mode": bool(json_mode),
        "prompt_version": prompt_version,
    }
    if decoding:
        payload["decoding"] = decoding
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CompletionCache:
    """A process-safe disk cache of :class:`CacheEntry` by request key."""

    def __init__(self, directory: str | Path | None = None) -> None:
        """Open (or create) the cache in ``directory`` (default ``cache_dir('llm')``)."""
        self.directory = Path(directory) if directory is not None else cache_dir("llm")
        try:
            self._cache = diskcache.Cache(str(self.directory), timeout=60)
        except OSError as e:
            raise ConfigError(
                f"cannot open the LLM cache at {self.directory}: {e}; "
                "set LLMSettings.cache_dir to a writable folder"
            ) from e

    def get(self, key: str) -> CacheEntry | None:
        """The stored entry for ``key``, or None."""
        raw: Any = self._cache.get(key)
        if raw is None:
            return None
        try:
            return CacheEntry(**json.loads(raw))
        except (TypeError, ValueError) as e:
            log.warning("ignoring unreadable LLM cache entry %s: %s", key[:12], e)
            return None

    def set(self, key: str, entry: CacheEntry, *, model: str | None = None) -> None:
        """Store ``entry`` under ``key`` (as JSON text, so the files hold no pickles), tagged
        with the ``model`` name so :meth:`clear_model` can find it."""
        self._cache.set(key, json.dumps(asdict(entry), sort_keys=True), tag=model)

    def delete(self, key: str) -> bool:
        """Drop the entry under ``key``; whether there was one."""
        return bool(self._cache.delete(key))

    def clear_model(self, model: str) -> int:
        """Drop every entry stored for the model named ``model``; returns how many."""
        return int(self._cache.evict(model))

    def untagged(self) -> int:
        """How many entries carry no model name (stored before entries were tagged)."""
        return sum(1 for k in self._cache.iterkeys() if self._cache.get(k, tag=True)[1] is None)

    def verify(self) -> int:
        """Drop entries that do not read back as a :class:`CacheEntry` (or hold an empty
        reply); returns how many were dropped."""
        dropped = 0
        for key in list(self._cache.iterkeys()):
            entry = self.get(key)
            if entry is None or not entry.text.strip():
                dropped += self.delete(key)
        return dropped

    def __len__(self) -> int:
        return len(self._cache)

    def close(self) -> None:
        """Close the underlying SQLite connections."""
        self._cache.close()
