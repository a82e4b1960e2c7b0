"""Running answerers over precomputed contexts, so an A/B between answerers holds retrieval
constant: contexts are built once (:func:`rag.answer.context.build_contexts`), then every
answerer answers every question from the same ones."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from rag.answer.base import Answer, Answerer
from rag.answer.context import Context
from rag.errors import ConfigError, LLMError
from rag.shard import sharded_map

logger = logging.getLogger(__name__)


def answer_all(
    answerer: Answerer,
    questions: Mapping[str, str],
    contexts: Mapping[str, Context],
    *,
    progress: bool = True,
) -> dict[str, Answer]:
    """Answer every question from its precomputed context, in the order of ``questions``.

    An answerer whose only work is local-model calls says how many pinned shards it may use
    (``shards``: :attr:`rag.llm.model.CachedChatModel.shards`); its questions are then dealt to
    them by :func:`rag.shard.sharded_map` (fixed shards, so the answers do not depend on
    timing). Others answer in order in the calling thread.

    Raises:
        ConfigError: a question has no context (contexts are built once, before any answerer).
    """
    missing = sorted(set(questions) - set(contexts))
    if missing:
        raise ConfigError(
            f"no context for {len(missing)} question(s), e.g. {missing[:3]}; build contexts for "
            "every question first (build_contexts)"
        )
    qids = list(questions)
    answers = sharded_map(
        lambda q: answerer.answer(questions[q], contexts[q]),
        qids,
        getattr(answerer, "shards", 1),
        desc=answerer.name,
        progress=progress,
    )
    return dict(zip(qids, answers, strict=True))


def answer_each(
    answerers: Mapping[str, Answerer],
    questions: Mapping[str, str],
    contexts: Mapping[str, Context],
    status: dict[str, str],
    *,
    progress: bool = True,
) -> dict[str, dict[str, Answer]]:
    """:func:`answer_all` for every answerer; one whose model fails does not stop the others.

    An answerer whose model call fails for good (:class:`rag.errors.LLMError`: retries exhausted
    on an unreachable or failing API, a rejected key) is left out of the result and its
    ``status[name]`` becomes ``"failed: <reason>"``, so the report shows that row and goes on.
    """
    out: dict[str, dict[str, Answer]] = {}
    for name, answerer in answerers.items():
        try:
            out[name] = answer_all(answerer, questions, contexts, progress=progress)
        except LLMError as e:
            logger.error("answerer %s failed: %s", name, e)
            status[name] = f"failed: {type(e).__name__}: {e}"
    return out


__all__ = ["answer_all", "answer_each"]
