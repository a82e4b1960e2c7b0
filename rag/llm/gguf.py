"""Any local GGUF chat model by path: what the file says about itself, and its content hash.

``gguf:/path/to/model.gguf`` runs the file in-process with llama.cpp (the local backend of
:mod:`rag.llm.local`). The file carries what a chat model needs: its context length
(``<arch>.context_length``), its chat template (``tokenizer.chat_template``, which llama-cpp-python
applies when no chat format is forced) and its end-of-turn token (``tokenizer.ggml.eos_token_id``,
which stops generation). They are read here with llama.cpp's vocabulary-only load, which maps
no weights.

The completion cache keys a GGUF model on the file's sha256, not its path, so a moved or
renamed file keeps its cached answers and a changed file at the same path does not reuse them.
Hashing a multi-GB file takes seconds, so the digest is computed once per ``(path, size, mtime)``
and remembered in ``cache_dir("llm", "gguf")``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from rag.atomic import write_atomic
from rag.errors import ConfigError, ProviderUnavailable
from rag.llm.local_weights import engine_missing

log = logging.getLogger(__name__)

_LOCK = threading.Lock()
_DIGESTS: dict[tuple[str, int, int], str] = {}


@dataclass(frozen=True, slots=True)
class GGUFInfo:
    """What a GGUF chat model file says about itself.

    Attributes:
        path: the file.
        name: ``general.name`` (or the file name).
        architecture: ``general.architecture`` (llama, qwen2, ...).
        context_length: the context the model was trained for, in tokens.
        chat_template: the Jinja chat template llama-cpp-python formats messages with.
        eos_token: the end-of-turn token text generation stops at.
    """

    path: Path
    name: str
    architecture: str
    context_length: int
    chat_template: str
    eos_token: str


def check_gguf_path(path: str | Path) -> Path:
    """The path of an existing ``.gguf`` file, else ConfigError naming it."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"gguf model {str(path)!r}: no such file; give the path of a .gguf file")
    if p.suffix.lower() != ".gguf":
        raise ConfigError(f"gguf model {str(path)!r}: not a .gguf file")
    return p.resolve()


@cache
def _read(path: Path, size: int, mtime_ns: int) -> GGUFInfo:
    from rag.llm.llama_load import load_llama

    try:
        llm = load_llama(model_path=str(path), vocab_only=True, verbose=False)
    except (ValueError, RuntimeError) as e:
        raise ConfigError(f"gguf model {path.name!r}: llama.cpp cannot read it ({e})") from e
    meta = dict(llm.metadata)
    arch = meta.get("general.architecture", "")
    template = meta.get("tokenizer.chat_template")
    if not template:
        raise ConfigError(
            f"gguf model {path.name!r} has no chat template (tokenizer.chat_template): "
            "it is not a chat model; use an instruct/chat GGUF"
        )
    try:
        n_ctx = int(meta.get(f"{arch}.context_length") or llm.n_ctx_train())
    except (TypeError, ValueError) as e:
        raise ConfigError(f"gguf model {path.name!r}: unreadable context length ({e})") from e
    eos_id = llm.token_eos()
    eos = llm.detokenize([eos_id], special=True).decode("utf-8", "replace") if eos_id >= 0 else ""
    return GGUFInfo(path, meta.get("general.name", path.name), arch, n_ctx, template, eos)


def read_gguf(path: str | Path) -> GGUFInfo:
    """Context length, chat template and end token of a GGUF chat model file.

    Raises:
        ConfigError: no such file, not a GGUF llama.cpp can read, or no chat template.
        ProviderUnavailable: llama-cpp-python is not installed.
    """
    p = check_gguf_path(path)
    if (why := engine_missing("llama_cpp")) is not None:
        raise ProviderUnavailable(f"gguf models need llama.cpp: {why}")
    st = p.stat()
    return _read(p, st.st_size, st.st_mtime_ns)


def _store() -> Path:
    from rag.paths import cache_dir

    return cache_dir("llm", "gguf") / "sha256.json"


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file's bytes, computed once per (path, size, mtime), remembered on disk."""
    p = check_gguf_path(path)
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    with _LOCK:
        if key in _DIGESTS:
            return _DIGESTS[key]
        store = _store()
        known: dict[str, str] = {}
        if store.is_file():
            try:
                known = json.loads(store.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                log.warning("ignoring unreadable %s: %s", store, e)
        skey = "|".join(map(str, key))
        if skey not in known:
            h = hashlib.sha256()
            with p.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            known[skey] = h.hexdigest()
            write_atomic(store, json.dumps(known, indent=1, sort_keys=True))
        _DIGESTS[key] = known[skey]
        return known[skey]


def check_context(info: GGUFInfo, n_ctx: int, needed: int) -> None:
    """ConfigError when ``needed`` prompt + answer tokens do not fit the model's context."""
    if needed > n_ctx:
        raise ConfigError(
            f"gguf model {info.path.name!r}: {needed} tokens needed, but its context is {n_ctx} "
            f"tokens (the file allows {info.context_length}; LLMSettings.gguf_context caps it); "
            "shorten the prompts or the answer budget, or pick a model with a longer context"
        )
