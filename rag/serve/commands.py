"""``rag search``, ``rag ask``, ``rag chat`` and ``rag serve``: thin shells over
:class:`rag.serve.engine.Engine`.

Importing this module is cheap (the CLI builds its parser from it); models, the index and
FastAPI load only when a command runs. Every command builds or loads the index from the same cache
the notebooks use, so a first run on a profile the report has run does no embedding.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

RETRIEVERS = ("dense", "bm25", "hybrid", "rerank", "multi-query", "hyde")
#: ``-v`` on ``rag`` and on each of these commands (the quiet default: rag.cli.QUIET_COMMANDS).
VERBOSE_HELP = (
    "show logs: search, ask, chat, cites, related and summary print only their answer, and mcp "
    "logs only errors, without it (-vv: debug); other commands log at info, -v at debug"
)


def k_arg(value: str) -> int:
    """``-k``: a whole number from 1 to the service's largest k; argparse names a bad value and
    exits 2, before anything loads."""
    from rag.serve.models import MAX_K

    return whole_up_to(value, MAX_K)


def whole_up_to(value: str, most: int) -> int:
    """``value`` as a whole number from 1 to ``most``; else the ArgumentTypeError argparse shows
    (exit 2) with the value and the range."""
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= most:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number from 1 to {most}")
    return n


def _common(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: without -v here, `rag -v ask ...` keeps the count given before the command
    p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS, help=VERBOSE_HELP)
    p.add_argument("--profile", default="default", help="params/<profile>.yaml (default: default)")
    p.add_argument("--papers", nargs="+", metavar="ID", help="serve only these pinned arXiv ids")
    p.add_argument("--index-dir", default="", help="served index folder (default: in the cache)")
    p.add_argument(
        "--pdfs",
        metavar="DIR",
        default="",
        help="serve this folder of PDFs (any names) instead of the profile's corpus",
    )
    p.add_argument(
        "--embedder",
        default=None,
        help="(--pdfs) the folder's embedder: a name or module:factory (default: the "
        "profile's, MiniLM; docs/your-papers.md compares them)",
    )


def lab_command(
    p: argparse.ArgumentParser, func: Callable[[argparse.Namespace], int], *, with_json: bool = True
) -> None:
    """End a command that loads the lab: ``--json`` (print the desk's dict as it is), the lab's
    options as ``rag ask`` takes them, and ``func`` as the handler."""
    if with_json:
        p.add_argument("--json", action="store_true", help="machine-readable output")
    _common(p)
    p.set_defaults(func=func)


def folder_options(args: argparse.Namespace) -> dict[str, str]:
    """``--pdfs`` as an absolute path (a relative one is from the working folder) and
    ``--embedder`` when it names the folder's embedder, as settings overrides.

    Raises:
        ConfigError: ``--embedder`` without ``--pdfs`` (a profile's embedder is its parameter).
    """
    from rag.errors import ConfigError

    if args.embedder and not args.pdfs:
        raise ConfigError("--embedder chooses a --pdfs folder's embedder; a profile's embedder "
                          "is its `embedder` parameter")  # fmt: skip
    out = {"pdfs": str(Path(args.pdfs).expanduser().resolve())} if args.pdfs else {}
    return {**out, "embedder": args.embedder} if args.embedder else out


def open_lab(args: argparse.Namespace, **serve_kw: Any):
    """The lab a command answers from: the profile's (or ``--pdfs`` folder's) settings, loaded
    as the service loads them."""
    from rag.serve.config import ServeSettings, profile_settings
    from rag.serve.engine import load_lab

    answerer = getattr(args, "answerer", None) or ""
    # a gguf: file named on the command line is this run's local model (the service refuses
    # gguf: names in requests other than the profile's local_model)
    local = answerer if answerer.startswith("gguf:") else None
    settings = profile_settings(args.profile, paper_ids=tuple(args.papers or ()), local_model=local,
                                **folder_options(args))  # fmt: skip
    if settings.pdfs:
        first_folder_run(settings, args.index_dir)
    lab = load_lab(settings, ServeSettings(index_dir=args.index_dir, **serve_kw))
    if lab.folder is not None:
        report_folder(lab.folder.build)
    return lab


def first_folder_run(settings: Any, index_dir: str) -> None:
    """Say on stderr that a ``--pdfs`` folder is indexed for the first time (a quiet command shows
    no progress bar, and the first run embeds every paper)."""
    from rag.index.folder import MANIFEST, folder_root
    from rag.paths import resolve

    root = resolve(index_dir) if index_dir else folder_root(settings.pdfs, settings.embedder,
                                                              settings.chunking())  # fmt: skip
    if not (root / MANIFEST).exists():
        print(f"indexing {settings.pdfs} for the first time with {settings.embedder} (MiniLM: "
              "about 5 min per 100 papers on 2 cores; -v shows progress); later calls reuse it",
              file=sys.stderr)  # fmt: skip


def report_folder(build: Any) -> None:
    """On stderr, one line per file of a ``--pdfs`` folder that is not indexed (file, stage,
    reason) and what changed since the last run, so a quiet command still names them."""
    s = build.summary
    for r in s["bad"]:
        print(f"not indexed: {r['file']} ({r['stage']}): {r['reason']}", file=sys.stderr)
    ch = {k: v for k, v in s["changes"].items() if v and k != "file_now_another_paper"}
    if ch:
        what = ", ".join(f"{len(v)} {k}" for k, v in ch.items())
        print(f"{s['folder']}: {what} since the last run; {s['papers_indexed']} papers served",
              file=sys.stderr)  # fmt: skip


def _snippet(text: str, width: int = 96, lines: int = 2) -> str:
    short = textwrap.shorten(" ".join(text.split()), width * lines, placeholder=" …")
    return textwrap.indent(short, "    ")


def _where(d: dict[str, Any]) -> str:
    sec = f", {d['section']}" if d.get("section") else ""
    src = d["file"] if d.get("file") else f"arXiv:{d['arxiv_id']}"
    return f"{src}, p. {d['page']}{sec}"


def cmd_search(args: argparse.Namespace) -> int:
    from rag.serve.folder_lab import add_files

    lab = open_lab(args)
    hits, meta = lab.search(args.query, args.k, args.retriever, args.per_paper_cap)
    add_files(lab, hits)
    if args.json:
        print(json.dumps({"query": args.query, "hits": hits, **meta}, indent=1))
        return 0
    print(f"{meta['retriever']}: {len(hits)} hits in {meta['latency_ms']:.1f} ms")
    for i, h in enumerate(hits, 1):
        print(f"{i:>2}. {h['score']:.4f}  {h['title'] or '(untitled)'} ({_where(h)})")
        print(_snippet(h["text"]))
    return 0


def print_answer(d: dict[str, Any]) -> None:
    """An answer with its numbered sources and, when judged, a verdict per claim."""
    print(d["answer"])
    print("\nSources:")
    for c in d["citations"]:
        mark = "*" if c["cited"] else " "
        print(f"{mark}[{c['n']}] {c['title'] or '(untitled)'} ({_where(c)})")
        print(_snippet(c["quote"]))
    if d.get("judgement"):
        j = d["judgement"]
        print(f"\nJudge ({j['judge']}): {j['status']}")
        for c in j["claims"]:
            print(f"  {c['label']:<11} {c['claim']}")
    ms = d["latency_ms"]
    print("\n" + ", ".join(f"{k} {v:.1f} ms" for k, v in ms.items()))


def cmd_ask(args: argparse.Namespace) -> int:
    from rag.serve.folder_lab import add_files

    lab = open_lab(args)
    r = lab.ask(
        args.question, k=args.k, retriever=args.retriever, answerer=args.answerer, judge=args.judge
    )
    d = r.to_dict()
    add_files(lab, d["citations"])
    if args.json:
        print(json.dumps(d, indent=1))
    else:
        print_answer(d)
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    from rag.serve.desk import Desk

    desk = Desk(open_lab(args))
    history: list[dict[str, str]] = []
    print("Ask about the corpus; an empty line or Ctrl-D ends the chat.", file=sys.stderr)
    for line in sys.stdin:
        msg = line.strip()
        if not msg:
            break
        history.append({"role": "user", "content": msg})
        d = desk.chat(history, k=args.k, retriever=args.retriever, answerer=args.answerer,
                      judge=args.judge, rewrite_model=args.rewrite_model,
                      bypass_rewrite=args.bypass_rewrite)  # fmt: skip
        tag = (f"rewritten by {d['rewriter']}" if d["rewritten"]
               else f"not rewritten: {d['rewrite_reason']}")  # fmt: skip
        print(f"» {d['rephrased_query']}   ({tag})")
        print_answer(d)
        print()
        history.append({"role": "assistant", "content": d["answer"]})
        sys.stdout.flush()
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from rag.serve.app import API_KEY_ENV, create_app
    from rag.serve.config import ServeSettings, profile_settings
    from rag.serve.guard import ScrubFilter

    key = os.environ.get(API_KEY_ENV, "")
    scrubber = ScrubFilter((key,) if key else ())
    for h in logging.getLogger().handlers:
        h.addFilter(scrubber)
    settings = profile_settings(args.profile, paper_ids=tuple(args.papers or ()),
                                **folder_options(args))  # fmt: skip
    serve = ServeSettings(
        index_dir=args.index_dir,
        allow_network=not args.offline,
        rate_limit_per_minute=args.rate_limit,
        rate_burst=args.rate_burst,
    )
    app = create_app(settings=settings, serve=serve)
    log_config = uvicorn.config.LOGGING_CONFIG
    for cfg in log_config["handlers"].values():
        cfg.setdefault("filters", []).append("scrub")
    log_config["filters"] = {"scrub": {"()": ScrubFilter, "secrets": (key,) if key else ()}}
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level,
                log_config=log_config, access_log=not args.no_access_log)  # fmt: skip
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register ``search``, ``ask``, ``chat`` and ``serve`` on the ``rag`` command."""
    s = sub.add_parser("search", help="ranked hits for a query (the report's retrievers)")
    s.add_argument("query")
    s.add_argument("-k", type=k_arg, default=5, help="hits (default 5)")
    s.add_argument("--retriever", default="hybrid", choices=RETRIEVERS)
    s.add_argument("--per-paper-cap", type=int, default=None, help="max hits per paper")
    lab_command(s, cmd_search)

    a = sub.add_parser("ask", help="answer a question with [n] citations")
    a.add_argument("question")
    a.add_argument("--answerer", "--model", dest="answerer", default="extractive",
                   help="extractive, a model from `rag models`, or provider:model (e.g. "
                   "ollama:qwen2.5:7b, openai-compatible:NAME, gguf:PATH)")  # fmt: skip
    a.add_argument("--judge", action="store_true", help="the offline judge's verdict per claim")
    a.add_argument("-k", type=k_arg, default=None, help="chunks retrieved (default: the profile's)")
    a.add_argument("--retriever", default=None, choices=RETRIEVERS)
    lab_command(a, cmd_ask)

    c = sub.add_parser("chat", help="interactive questions with follow-up rewriting")
    c.add_argument("--answerer", "--model", dest="answerer", default="extractive",
                   help="extractive, a model from `rag models`, or provider:model")  # fmt: skip
    c.add_argument("--judge", action="store_true")
    c.add_argument("-k", type=k_arg, default=None, help="chunks retrieved (default: the profile's)")
    c.add_argument("--retriever", default=None, choices=RETRIEVERS)
    c.add_argument("--rewrite-model", default=None, help="LLM rewriter (default: the rules)")
    c.add_argument("--bypass-rewrite", action="store_true", help="retrieve with what you type")
    lab_command(c, cmd_chat, with_json=False)

    v = sub.add_parser("serve", help="the HTTP service and demo page (FastAPI + uvicorn)")
    v.add_argument("--host", default="127.0.0.1")
    v.add_argument("--port", type=int, default=8000)
    v.add_argument("--offline", action="store_true", help="ingest from the cache/mirror only")
    v.add_argument("--rate-limit", type=int, default=600,
                   help="requests per minute per client (0: off; default 600)")  # fmt: skip
    v.add_argument("--rate-burst", type=int, default=60,
                   help="requests a client may send at once (default 60)")  # fmt: skip
    v.add_argument("--log-level", default="info")
    v.add_argument("--no-access-log", action="store_true")
    lab_command(v, cmd_serve, with_json=False)
