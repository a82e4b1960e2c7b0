"""The judges read beside the default one in notebook 05, by name.

* ``nli-minilm-v1`` — the lab's entailment cross-encoder (:mod:`rag.judge.nli`), pinned in git,
  so every clone can run it;
* ``yesno:<model>`` — a fetched chat model's P("yes") (:mod:`rag.judge.yesno`), opt-in: when the
  model is not fetched it is reported as not run, with the reason and the fetch command.

Thresholds come from SciFact train's held-out grouped fold, never from the sets they are read
on.
"""

from __future__ import annotations

from collections.abc import Sequence

from rag.errors import ConfigError, ProviderUnavailable
from rag.verdicts import ClaimJudge

#: P("yes") at or above which the yes/no judge says supported: the best balanced accuracy on
#: SciFact train's held-out fold (``python -m rag.bench.judge_nli --yesno`` recomputes it).
YESNO_THRESHOLD = 0.502437
YESNO_PREFIX = "yesno:"


def candidate_judge(name: str) -> ClaimJudge:
    """The candidate judge ``name`` (see the module docstring).

    Raises:
        ConfigError: an unknown name (the message lists the known forms).
        ProviderUnavailable: a ``yesno:`` model that is not fetched or fails verification.
    """
    from rag.judge.nli import NLI_JUDGES, NliJudge

    if name in NLI_JUDGES:
        return NliJudge(name)
    if name.startswith(YESNO_PREFIX) and name[len(YESNO_PREFIX) :]:
        from rag.judge.yesno import YesNoJudge

        return YesNoJudge(name[len(YESNO_PREFIX) :], threshold=YESNO_THRESHOLD)
    raise ConfigError(
        f"unknown candidate judge {name!r}; known: {', '.join(NLI_JUDGES)}, "
        f"or {YESNO_PREFIX}<fetched chat model> (e.g. {YESNO_PREFIX}qwen2.5-coder-1.5b)"
    )


def candidate_judges(names: Sequence[str]) -> tuple[dict[str, ClaimJudge], dict[str, str]]:
    """``(judges that load, {name: "not run: <reason>"})`` for the candidate ``names``; an
    unknown name raises (a typo is not a missing model)."""
    built: dict[str, ClaimJudge] = {}
    not_run: dict[str, str] = {}
    for name in names:
        try:
            built[name] = candidate_judge(name)
        except ProviderUnavailable as e:
            not_run[name] = f"not run: {e}"
    return built, not_run


__all__ = ["YESNO_THRESHOLD", "candidate_judge", "candidate_judges"]
