"""``rag cites``, ``rag related``, ``rag summary``, ``rag research`` and ``rag mcp``: shells over
the paper desk.

Each command loads the lab as ``rag ask`` does (same options, same cache) and calls one
:class:`rag.serve.desk.Desk` method; ``--json`` prints the method's dict as it is.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from rag.serve import commands  # open_lab looked up per call: the lab rag ask would load
from rag.serve.commands import k_arg, lab_command, whole_up_to

RELATED_METHODS = ("text", "cocitation", "coupling", "popularity", "fusion")


def _desk(args: argparse.Namespace):
    from rag.serve.desk import Desk

    return Desk(commands.open_lab(args))


def _print_links(title: str, links: list[dict[str, Any]]) -> None:
    print(f"{title} ({len(links)}):")
    for d in links:
        where = "corpus" if d["in_corpus"] else "outside"
        name = f"  {d['title']}" if d.get("title") else ""
        print(f"  {d['arxiv_id']:<22} {where:<7} {d['how']:<8}{name}")


def _show(args: argparse.Namespace, d: dict[str, Any], render: Callable[[Any], None]) -> int:
    """Print the desk's dict as JSON with ``--json``, else as ``render`` writes it; exit 0."""
    if args.json:
        print(json.dumps(d, indent=1))
    else:
        render(d)
    return 0


def _print_citations(d: dict[str, Any]) -> None:
    _print_links(f"{d['arxiv_id']} cites", d["cites"])
    _print_links(f"{d['arxiv_id']} is cited by", d["cited_by"])


def _print_related(d: dict[str, Any]) -> None:
    print(f"related to {d['arxiv_id']} by {d['method']}:")
    for r in d["related"]:
        print(f"{r['rank']:>3}. {r['score']:.4f}  {r['arxiv_id']}  {r['title']}")


def _print_summary(d: dict[str, Any]) -> None:
    print(f"{d['title']} ({d['paper_id']}), {d['method']} summary:\n")
    for s in d["sentences"]:
        v = s["verdict"]
        print(f"  [{v['label']}] {s['text']} (p. {s['page']})")


def cmd_cites(args: argparse.Namespace) -> int:
    return _show(args, _desk(args).citations(args.arxiv_id), _print_citations)


def cmd_related(args: argparse.Namespace) -> int:
    d = _desk(args).related(args.arxiv_id, k=args.k, method=args.method)
    return _show(args, d, _print_related)


def cmd_summary(args: argparse.Namespace) -> int:
    d = _desk(args).summarize(args.arxiv_id, sentences=args.sentences, model=args.model)
    return _show(args, d, _print_summary)


def max_steps_arg(value: str) -> int:
    """``--max-steps``: a whole number from 1 to the loop's cap, checked before anything loads."""
    from rag.serve.research import MAX_STEPS

    return whole_up_to(value, MAX_STEPS)


def cmd_research(args: argparse.Namespace) -> int:
    from rag.serve.research import check_request, research

    check_request(args.question, args.max_steps)  # an empty question fails before loading
    args.answerer = args.model  # a gguf: file named here is this run's local model (as rag ask)
    d = research(args.question, args.model, _desk(args), max_steps=args.max_steps).to_dict()
    if args.json:
        print(json.dumps(d, indent=1))
        return 0
    how = f"tool calls by {d['model']}" if d["mode"] == "tools" else f"fixed plan ({d['why']})"
    print(f"{d['question']}\n  by {how}:")
    for i, s in enumerate(d["steps"], 1):
        args_text = json.dumps(s["arguments"], ensure_ascii=False)
        print(f"  {i}. {s['tool']} {args_text} -> {s['summary'] if s['ok'] else s['error']}")
    print(f"\n{d['answer']}\n")
    for c in d["citations"]:
        n = f"[{c['n']}] " if "n" in c else ""  # the plan's ask numbers its sources
        print(f"  {n}arXiv:{c['arxiv_id']}, p. {c['page']}  {c['title']}")
    if d["unknown_citations"]:
        print(f"  cited, but no tool returned them: {', '.join(d['unknown_citations'])}")
    if d["stopped"] == "max_steps":
        print(f"(stopped at --max-steps {args.max_steps})")
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from rag.serve.desk import Desk
    from rag.serve.mcp_server import build_server, protect_stdout, run_stdio

    proto = None if args.http else protect_stdout()  # before loading: nothing else writes there
    server = build_server(Desk(commands.open_lab(args)), host=args.host, port=args.port)
    if proto is None:
        server.run("streamable-http")
    else:
        run_stdio(server, proto)
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register ``cites``, ``related``, ``summary``, ``research`` and ``mcp`` on ``rag``."""
    c = sub.add_parser("cites", help="what a paper cites and which corpus papers cite it")
    c.add_argument("arxiv_id")
    lab_command(c, cmd_cites)

    r = sub.add_parser("related", help="related corpus papers (text, citations, or fusion)")
    r.add_argument("arxiv_id")
    r.add_argument("-k", type=k_arg, default=10, help="papers (default 10)")
    r.add_argument("--method", default="fusion", choices=RELATED_METHODS)
    lab_command(r, cmd_related)

    s = sub.add_parser("summary", help="a judged summary of a paper")
    s.add_argument("arxiv_id")
    s.add_argument("--sentences", type=int, default=5, help="at most this many (1-20)")
    s.add_argument("--model", default=None, help="a chat model (default: extractive, offline)")
    lab_command(s, cmd_summary)

    q = sub.add_parser("research", help="a question worked through the desk's tools")
    q.add_argument("question")
    q.add_argument("--model", default=None,
                   help="a tool-calling model (openai:, groq:, ollama:, openai-compatible:); "
                   "default or a local model: the fixed plan search, related, ask")  # fmt: skip
    q.add_argument("--max-steps", type=max_steps_arg, default=6, help="tool calls (default 6)")
    lab_command(q, cmd_research)

    m = sub.add_parser("mcp", help="the paper desk as an MCP server (stdio; --http for HTTP)")
    m.add_argument("--http", action="store_true", help="streamable HTTP on --host:--port")
    m.add_argument("--host", default="127.0.0.1", help="(--http) default 127.0.0.1")
    m.add_argument("--port", type=int, default=8765, help="(--http) default 8765")
    lab_command(m, cmd_mcp, with_json=False)
