"""Another faithfulness judge beside offline-v2, validated on the same human labels.

The other judge is either a local LLM (``--llm``) or offline-v2 refitted on SciFact train with
another embedder behind its alignment features (``--embedder``; same recipe, grouped CV, same
train pairs). Both judges label every (claim, abstract) pair of the SciFact dev validation set
(340 pairs, human labels SUPPORT / CONTRADICT / NOT_ENOUGH_INFO; supported-vs-not as in notebook
05). The LLM judge is :class:`rag.judge.llm_judge.LLMJudge` (one structured extract-and-verify
call per pair, temperature 0, cached). Reported per judge: balanced accuracy with a 95 % bootstrap
CI, CONTRADICT recall, failures and seconds per pair; and the paired difference on the same pairs:
a bootstrap CI of the difference of balanced accuracies (pairs resampled together) and a
randomisation test that swaps the two judges' labels pair by pair. A pair the other judge cannot
judge counts as "not supported" in the paired comparison, and the count is reported.

    python -m rag.bench.judges --llm local:qwen2.5-coder-1.5b
    python -m rag.bench.judges --embedder mpnet-base-v2
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Sequence
from typing import Any

from rag.evaluation.judge_validation import paired_balanced_accuracy

logger = logging.getLogger(__name__)

DEFAULT_OUT = "outputs/bench/judge_{slug}.json"


def _summary(metrics: dict[str, Any], n_pairs: int) -> dict[str, Any]:
    cr = metrics["class_recall"]["CONTRADICT"]
    return {
        "judge": metrics["judge"],
        "balanced_accuracy": round(metrics["balanced_accuracy"], 4),
        "ci_low": round(metrics["ci_low"], 4),
        "ci_high": round(metrics["ci_high"], 4),
        "n": metrics["n"],
        "n_failures": metrics["n_failures"],
        "contradict_recall": f"{cr['k']}/{cr['n']}",
        "contradict_k": cr["k"],
        "contradict_n": cr["n"],
        "confusion": metrics["confusion"],
        "seconds": metrics["seconds"],
        "seconds_per_pair": round(metrics["seconds"] / max(1, n_pairs), 2),
    }


def _other_judge(llm: str | None, embedder: str | None) -> tuple[Any, str, dict[str, Any]]:
    """The judge compared with offline-v2, its description, and its usage meter."""
    from rag.judge.llm_judge import LLMJudge
    from rag.judge.offline import DEFAULT_JUDGE, make_offline_judge
    from rag.llm.factory import make_cache, make_chat_model
    from rag.llm.meter import CostMeter

    if llm:
        meter = CostMeter()
        chat = make_chat_model(llm, cache=make_cache(), meter=meter)
        return LLMJudge(chat), f"{llm} as an LLM judge", {"meter": meter}
    from rag.index.embed import load_embedder

    emb = load_embedder(embedder or "minilm")
    judge = make_offline_judge(DEFAULT_JUDGE, embedder=emb)
    return judge, f"{DEFAULT_JUDGE} refitted with {embedder} ({emb.fingerprint})", {}


def run(
    llm: str | None = None, *, embedder: str | None = None, limit: int | None = None, seed: int = 0
) -> dict[str, Any]:
    """Validate the other judge beside offline-v2 (MiniLM) on the same pairs."""
    from rag.evaluation.judge_validation import validate_judge
    from rag.judge.offline import DEFAULT_JUDGE, make_offline_judge

    if bool(llm) == bool(embedder):
        raise ValueError("give exactly one of llm= or embedder=")
    judge, what, extra = _other_judge(llm, embedder)
    other_metrics, other_table = validate_judge(judge, limit=limit, seed=seed)
    off_metrics, off_table = validate_judge(make_offline_judge(DEFAULT_JUDGE), limit=limit,
                                            seed=seed)  # fmt: skip
    if list(other_table["claim_id"]) != list(off_table["claim_id"]):
        raise RuntimeError("the two validations did not see the same pairs in the same order")
    human = (other_table["human"] == "SUPPORT").to_numpy()
    paired = paired_balanced_accuracy(
        human,
        (other_table["judge"] == "supported").to_numpy(),
        (off_table["judge"] == "supported").to_numpy(),
        seed=seed,
    )
    n = len(other_table)
    flag = f"--llm {llm}" if llm else f"--embedder {embedder}"
    doc = {
        "what": f"{what} vs {DEFAULT_JUDGE} (MiniLM), SciFact dev, supported vs not",
        "data": other_metrics["data"],
        "pairs": n,
        "other": _summary(other_metrics, n),
        "offline": _summary(off_metrics, n),
        "paired_other_minus_offline": {k: round(v, 4) for k, v in paired.items()},
        "paired_note": "a pair the other judge fails on counts as not supported when paired",
        "command": f"python -m rag.bench.judges {flag}",
    }
    if "meter" in extra:
        usage = extra["meter"].to_dict()
        doc["llm_usage"] = usage
        doc["other"].update(model_time(usage["total"]))
    return doc


def model_time(total: dict[str, Any]) -> dict[str, Any]:
    """An LLM judge's seconds per pair, from the pairs its model computed in this run.

    Wall seconds over every pair understate the cost when part of them come from the completion
    cache (a resumed run), so the rate is the model time of the fresh calls over their number;
    None when every pair was read from the cache."""
    fresh = int(total.get("fresh_calls", 0))
    rate = round(total["latency_s"] / fresh, 2) if fresh else None
    return {"seconds_per_pair": rate, "pairs_computed": fresh}


def keep_timing(doc: dict[str, Any], earlier: dict[str, Any] | None) -> dict[str, Any]:
    """Keep an earlier run's model seconds per pair when this run computed no pair itself.

    Only for the same judge on the same pairs; anything else leaves ``doc`` as it is."""
    other, held = doc["other"], (earlier or {}).get("other", {})
    if (
        other.get("pairs_computed") == 0
        and held.get("seconds_per_pair") is not None
        and held.get("judge") == other["judge"]
        and (earlier or {}).get("pairs") == doc["pairs"]
    ):
        other["seconds_per_pair"] = held["seconds_per_pair"]
        other["pairs_computed"] = held.get("pairs_computed")
        other["timing_from"] = (
            "an earlier run of the same command (this one read every pair from the cache)"
        )
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rag.bench.judges", description=__doc__)
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--llm", help="a chat model as the judge, e.g. local:qwen2.5-coder-1.5b")
    who.add_argument("--embedder", help="refit offline-v2 with this embedder, e.g. mpnet-base-v2")
    p.add_argument("--limit", type=int, default=0, help="first N pairs (0: all 340)")
    p.add_argument("--out", default="", help="JSON path (default outputs/bench/judge_<name>.json)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    from rag.paths import resolve

    t0 = time.perf_counter()
    doc = run(args.llm, embedder=args.embedder, limit=args.limit or None)
    doc["wall_s"] = round(time.perf_counter() - t0, 1)
    name = args.llm.split(":", 1)[-1] if args.llm else f"offline_{args.embedder}"
    out = resolve(args.out or DEFAULT_OUT.format(slug=name.replace("/", "_")))
    earlier = json.loads(out.read_text()) if out.is_file() else None
    doc = keep_timing(doc, earlier)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: doc[k] for k in ("other", "offline", "paired_other_minus_offline")},
                     indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
