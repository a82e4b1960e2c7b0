"""``rag cache clear`` and ``rag cache verify``: drop one embedder's or one chat model's cached
results, and re-check everything the caches hold.

- ``rag cache clear --embedder NAME`` deletes the embedding caches whose embedder name is
  ``NAME`` or whose fingerprint contains it (case-insensitive), and the dense indexes built from
  them, so the next run re-embeds;
- ``rag cache clear --model NAME`` deletes the completions stored for the chat model ``NAME``
  (entries are tagged by model name when stored);
- ``rag cache verify`` re-checks every stored vector (finite, unit norm) and completion (readable,
  not empty), deletes what fails, re-reads every fetched model in full against the digest
  recorded when it was fetched, and removes what killed fetches left; it reports each count.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from rag.index.embed_cache import VectorCache, stored_caches
from rag.paths import cache_dir


def _matches(entry: dict[str, object], name: str) -> bool:
    want = name.strip().lower()
    return bool(want) and (
        str(entry["name"]).lower() == want or want in str(entry["fingerprint"]).lower()
    )


def _indexes_of(fingerprint: str) -> list[Path]:
    """Dense index folders whose saved metadata names ``fingerprint``."""
    found = []
    for meta in cache_dir("indexes").glob("*/meta.json"):
        try:
            if fingerprint in meta.read_text(encoding="utf-8"):
                found.append(meta.parent)
        except OSError:
            continue
    return found


def clear_embedder(name: str) -> list[str]:
    """Delete the embedding caches (and their dense indexes) of the embedder ``name``; returns a
    line per deleted cache."""
    lines = []
    for entry in stored_caches():
        if not _matches(entry, name):
            continue
        path = Path(str(entry["path"]))
        indexes = _indexes_of(str(entry["fingerprint"]))
        for d in indexes:
            shutil.rmtree(d, ignore_errors=True)
        for f in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm"))):
            f.unlink(missing_ok=True)
        path.with_suffix(".lock").unlink(missing_ok=True)
        lines.append(f"removed the vectors of {entry['fingerprint']} ({path.name}) and "
                     f"{len(indexes)} dense index(es) built from them")  # fmt: skip
    return lines


def clear_model(name: str) -> list[str]:
    """Delete the completions stored for the chat model ``name``; returns report lines."""
    from rag.llm.cache import CompletionCache

    cache = CompletionCache(cache_dir("llm"))
    try:
        n = cache.clear_model(name.strip().removeprefix("local:"))
        untagged = cache.untagged()
    finally:
        cache.close()
    lines = [f"removed {n} cached completion(s) of {name}"]
    if untagged:
        lines.append(f"{untagged} completion(s) stored before entries were tagged by model are "
                     "kept; `rag cache verify` re-checks them")  # fmt: skip
    return lines


def verify() -> list[str]:
    """Re-check the embedding and completion caches and the fetched models; report lines."""
    from rag.llm import assembled_verify as av
    from rag.llm.assembled import ASSEMBLED, _in_place, fetch_command, model_file
    from rag.llm.cache import CompletionCache

    lines = []
    for entry in stored_caches():
        with VectorCache.open(str(entry["fingerprint"]), int(str(entry["dim"]))) as vc:
            kept, removed = vc.scrub()
        lines.append(f"vectors of {entry['fingerprint']}: {kept} ok, {removed} removed")
    cache = CompletionCache(cache_dir("llm"))
    try:
        lines.append(f"completions: {len(cache)} stored, {cache.verify()} removed")
    finally:
        cache.close()
    models = cache_dir("llm", "models")
    for name, model in sorted(ASSEMBLED.items()):
        path = model_file(model, models)
        if not _in_place(model, path, rehash=False):
            continue
        bad = av.problem(model, path, memo=False)
        lines.append(f"fetched model {name}: " + ("ok" if bad is None else
                     f"fails verification (sha256 {bad[0]}, expected {bad[1]}); "
                     f"run `{fetch_command(name)}`"))  # fmt: skip
    with av.fetch_lock(models, wait=False) as held:
        if not held:
            lines.append("a fetch is running: its temporary folders are left alone")
        else:
            for left, size in av.remove_leftovers(models):
                lines.append(f"removed {left} ({size:,} bytes) left by a killed fetch")
    return lines


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``rag cache clear`` and ``rag cache verify`` to the ``rag`` command."""
    p = sub.add_parser("cache", help="drop one embedder's or model's cached results; re-check all")
    ps = p.add_subparsers(dest="cache_action", required=True)
    c = ps.add_parser("clear", help="drop the cached vectors of an embedder or replies of a model")
    who = c.add_mutually_exclusive_group(required=True)
    who.add_argument("--embedder", help="an embedder name or part of its fingerprint")
    who.add_argument("--model", help="a chat model name (as in local:NAME or the registry)")
    ps.add_parser("verify", help="re-check stored vectors, completions and fetched models")
    p.set_defaults(func=_cmd_cache)


def _cmd_cache(args: argparse.Namespace) -> int:
    if args.cache_action == "verify":
        lines = verify()
    elif args.embedder:
        lines = clear_embedder(args.embedder) or [f"no embedding cache matches {args.embedder!r}"]
    else:
        lines = clear_model(args.model)
    print("\n".join(lines))
    return 0
