"""``python -m rag.judge.pin`` (``make judge``): fit the offline judges and pin them as JSON.

Fits every named judge on the full SciFact train file and on the smoke profile's subset, ignoring
any pinned file or cache, and writes each to ``data/judge/`` (:mod:`rag.judge.pinned`).
"""

from __future__ import annotations

import argparse

from rag import paths
from rag.judge.offline import JUDGES, OfflineJudge
from rag.judge.pinned import pin_path, write


def main(argv: list[str] | None = None) -> int:
    """Fit the offline judges (full train set, and the smoke profile's subset) and pin them."""
    ap = argparse.ArgumentParser(prog="python -m rag.judge.pin", description=main.__doc__)
    ap.add_argument("--judges", nargs="*", default=sorted(JUDGES), help="judge names")
    ap.add_argument(
        "--train-limits",
        nargs="*",
        type=int,
        default=[0, 240],
        help="0: all train pairs; N: the first N (whole claims), as the smoke profile fits",
    )
    args = ap.parse_args(argv)
    for name in args.judges:
        if name not in JUDGES:
            raise SystemExit(f"unknown judge {name!r}; known: {sorted(JUDGES)}")
        for limit in args.train_limits:
            settings = JUDGES[name].model_copy(update={"train_limit": limit})
            judge = OfflineJudge(settings, fit_only=True)
            out = write(judge.fitted, judge.pin_inputs, pin_path(settings))
            print(f"{name} (train_limit={limit}): {paths.display(out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
