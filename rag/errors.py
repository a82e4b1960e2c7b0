"""The project's small error hierarchy.

Every error a user can cause derives from :class:`RagError`; messages name the offending value and
what to do about it. Chain the underlying cause with ``raise ... from e``.
"""

from __future__ import annotations


class RagError(Exception):
    """Base class of every error raised on purpose by this package."""


class ConfigError(RagError):
    """A parameter, profile key, settings value or path is wrong."""


class ManifestError(ConfigError):
    """The corpus manifest is missing or malformed."""


class DownloadError(RagError):
    """A paper could not be fetched (network, HTTP status, checksum, no mirror)."""


class WrongPaperError(DownloadError):
    """A PDF under a pinned id is another paper (its page 1 lacks the manifest's title)."""


class ParseError(RagError):
    """A PDF could not be parsed (corrupt, encrypted, empty, image-only, too long, too slow)."""


class ChunkError(RagError):
    """Chunking was asked for something impossible (bad sizes, unknown strategy)."""


class IndexBuildError(RagError):
    """An index or embedding cache is missing, stale or built with other parameters."""


class RetrievalError(RagError):
    """A retrieval request is invalid (empty query, k <= 0, unknown retriever)."""


class GoldError(RagError):
    """A gold / qrels file is malformed or refers to unknown papers."""


class LLMError(RagError):
    """A language-model call failed after its retries, or returned something unusable."""


class ProviderUnavailable(LLMError):
    """A provider cannot be used here (missing API key, missing package or weights)."""


class EvaluationError(RagError):
    """A metric or statistic cannot be computed (no scored questions, misaligned values)."""


class JudgeError(RagError):
    """A judge produced output that could not be interpreted."""


class NotebookError(RagError):
    """A notebook failed while the report runner executed it."""


class PublishError(RagError):
    """A rendered output would leak a secret or a local path."""
