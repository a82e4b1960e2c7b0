"""Title extraction measured on the pinned corpus, with the arXiv stamp and the manifest ignored.

``python -m rag.bench.folder`` reads every manifest paper's PDF with
:func:`rag.corpus.pdf_meta.read_meta` (``use_stamp=False``: the id the stamp would give is not
used) twice, from the page-1 layout alone and with the PDF's own ``/Title`` preferred when page 1
carries it, and compares each extracted title with the manifest's title after
:func:`rag.corpus.titlecheck.normalise` (lower case, letters and digits). It writes the exact-match
accuracy of both, the misses, and the seconds per PDF to ``outputs/bench/folder_titles.json``.

``--citations`` measures title resolution with the ids hidden against the titles read from the
PDFs (``outputs/bench/folder_citations.json``). ``--growth N`` times ``rag ask --pdfs`` on a copy
of N corpus PDFs with an empty cache: cold, warm, after adding one PDF and after removing it
(``outputs/bench/folder_growth.json``). ``--resume N`` kills a cold build of N PDFs once vectors
are committed, runs it again and compares the index with an uninterrupted build
(``outputs/bench/folder_resume.json``). ``--manifest-match`` compares the manifest
:mod:`rag.index.folder_manifest` writes from the PDFs with the pinned one
(``outputs/bench/folder_manifest.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rag import paths
from rag.corpus.manifest import load_manifest
from rag.corpus.pdf_meta import read_meta
from rag.corpus.title_scores import parse_pdf_args
from rag.corpus.titlecheck import normalise
from rag.paths import CACHE_ENV, display


def measure(manifest: Path | None, pdf_dir: Path) -> dict[str, Any]:
    """Title exact-match accuracy (normalised) of layout-only and layout+metadata extraction."""
    papers = load_manifest(manifest)
    out: dict[str, Any] = {
        "what": "normalised exact match of the extracted title with the manifest title; the "
        "arXiv stamp and the manifest are not read",
        "pdfs": display(pdf_dir),
        "n": len(papers),
    }
    for mode, use_meta in (("layout", False), ("layout+pdf_metadata", True)):
        t0 = time.perf_counter()
        misses, sources = [], {"metadata": 0, "layout": 0, "": 0}
        for p in papers:
            m = read_meta(pdf_dir / p.filename, use_stamp=False, use_metadata=use_meta)
            sources[m.title_source] += 1
            if normalise(m.title) != normalise(p.title):
                misses.append({"arxiv_id": p.arxiv_id, "manifest": p.title, "extracted": m.title})
        secs = time.perf_counter() - t0
        out[mode] = {
            "accuracy": round(1 - len(misses) / len(papers), 4),
            "correct": len(papers) - len(misses),
            "title_source": sources,
            "seconds_per_pdf": round(secs / len(papers), 4),
            "misses": misses,
        }
    return out


def citations(manifest: Path | None, pdf_dir: Path) -> dict[str, Any]:
    """Title resolution of references with their ids hidden (:func:`rag.papers.measure.
    title_probes`) at the pinned threshold, matched against the manifest's titles with the stamp
    dates (the pinned graph) and against the titles read from the PDFs with no dates (a folder)."""
    from rag.corpus.papers import corpus_papers
    from rag.papers.measure import _confusion, _proportion, title_probes
    from rag.papers.resolve import TITLE_THRESHOLD, TitleMatcher

    papers, parsed = corpus_papers(str(manifest or "data/manifest.jsonl"), pdf_mirror=str(pdf_dir))
    parsed = [p for p in parsed if p.ok]
    read = {p.arxiv_id: read_meta(pdf_dir / p.filename, use_stamp=False).title for p in papers}
    folder = [p.model_copy(update={"title": read[p.arxiv_id], "stamp_date": None}) for p in papers]
    out: dict[str, Any] = {
        "what": "references that carry an arXiv id of another paper, resolved by their text with "
        "the ids hidden; truth = the id the authors wrote",
        "threshold": TITLE_THRESHOLD,
        "papers": len(parsed),
    }
    for name, plist, slack in (("manifest_titles_with_dates", papers, True),
                               ("pdf_titles_no_dates", folder, False)):  # fmt: skip
        kw = {} if slack else {"date_slack_months": None}
        matcher = TitleMatcher({p.arxiv_id: p.title for p in plist}, **kw)
        probes = title_probes(plist, parsed, matcher)
        prec, rec = _confusion(probes, TITLE_THRESHOLD)
        out[name] = {
            "entries": len(probes),
            "entries_citing_corpus": sum(1 for p in probes if p.truth),
            "precision": _proportion(prec),
            "recall": _proportion(rec),
        }
    return out


_BUILD = (
    "import json, sys\n"
    "from rag.index.folder import build_folder\n"
    "b = build_folder(sys.argv[1])\n"
    "ix = b.indexed\n"
    "import numpy as np\n"
    "np.save(sys.argv[2], ix.dense.vectors)\n"
    "open(sys.argv[3], 'w').write(json.dumps([c.chunk_id for c in ix.chunks]))\n"
)


def _vectors(cache: Path) -> int:
    import sqlite3

    n = 0
    for f in (cache / "embeddings").glob("*.sqlite"):
        with sqlite3.connect(f) as con:
            n += con.execute("SELECT COUNT(*) FROM vec").fetchone()[0]
    return n


def resume(pdf_dir: Path, n: int, workdir: Path, kill_after: int = 1) -> dict[str, Any]:
    """Kill a cold ``build_folder`` of ``n`` corpus PDFs once ``kill_after`` vectors are committed,
    run it again, and compare the index with an uninterrupted build in a cache of its own."""
    import signal

    import numpy as np

    shutil.rmtree(workdir, ignore_errors=True)
    folder = workdir / "papers"
    folder.mkdir(parents=True)
    for f in sorted(pdf_dir.glob("*.pdf"))[:n]:
        shutil.copy(f, folder / f.name.replace(".pdf", " copy.pdf"))

    def run(cache: Path, tag: str, kill: bool) -> dict[str, Any]:
        env = {**os.environ, CACHE_ENV: str(cache)}
        args = [sys.executable, "-c", _BUILD, str(folder), str(workdir / f"{tag}.npy"),
                str(workdir / f"{tag}.json")]  # fmt: skip
        t0 = time.perf_counter()
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        killed_at = None
        while kill and proc.poll() is None:
            if (cache / "embeddings").is_dir() and _vectors(cache) >= kill_after:
                proc.send_signal(signal.SIGKILL)
                killed_at = _vectors(cache)
                break
            time.sleep(0.5)
        proc.wait()
        return {"seconds": round(time.perf_counter() - t0, 1), "killed_with_vectors": killed_at}

    killed = run(workdir / "cache-a", "a", kill=True)
    resumed = run(workdir / "cache-a", "a", kill=False)
    clean = run(workdir / "cache-b", "b", kill=False)
    ids_a = json.loads((workdir / "a.json").read_text())
    ids_b = json.loads((workdir / "b.json").read_text())
    va, vb = np.load(workdir / "a.npy"), np.load(workdir / "b.npy")
    same = ids_a == ids_b and va.shape == vb.shape
    return {
        "what": "a cold folder build killed (SIGKILL) after its first committed vectors, run "
        "again, against an uninterrupted build",
        "papers": n, "killed": killed, "resumed": resumed, "clean": clean,
        "same_chunk_ids": ids_a == ids_b, "chunks": len(ids_a),
        "max_abs_vector_diff": float(np.abs(va - vb).max()) if same else None,
        "vectors_identical": bool(same and np.array_equal(va, vb)),
    }  # fmt: skip


def manifest_match(manifest: Path | None, pdf_dir: Path, workdir: Path) -> dict[str, Any]:
    """The manifest :func:`rag.index.folder_manifest.arxiv_manifest` writes from the PDFs alone,
    field by field against the pinned manifest (titles also compared normalised)."""
    from rag.index.folder_manifest import arxiv_manifest

    r = arxiv_manifest(pdf_dir, workdir / "folder.jsonl")
    made = {p.arxiv_id: p.model_dump() for p in load_manifest(workdir / "folder.jsonl")}
    pinned = {p.arxiv_id: p.model_dump() for p in load_manifest(manifest)}
    fields = sorted(next(iter(pinned.values())))
    return {
        "what": "the manifest written from the PDFs (stamp, page 1, file) vs the pinned manifest",
        "pinned": len(pinned), "written": len(made), "left_out": r["left_out"],
        "identical_lines": sum(made.get(k) == v for k, v in pinned.items()),
        "field_equal": {f: sum(made.get(k, {}).get(f) == v[f] for k, v in pinned.items())
                        for f in fields},
        "title_equal_normalised": sum(
            normalise(made.get(k, {}).get("title", "")) == normalise(v["title"])
            for k, v in pinned.items()
        ),
    }  # fmt: skip


def _timed_ask(folder: Path, cache: Path, question: str) -> float:
    env = {**os.environ, CACHE_ENV: str(cache)}
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "rag.cli", "ask", "--pdfs", str(folder), question],
        env=env, check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return round(time.perf_counter() - t0, 2)


def growth(pdf_dir: Path, n: int, workdir: Path, question: str) -> dict[str, Any]:
    """Wall seconds of ``rag ask --pdfs`` on a folder of the first ``n`` corpus PDFs with an empty
    cache (cold), again (warm), after adding the next PDF (add one) and after removing it (for
    ``n`` = the whole corpus, the first ``n - 1`` and the last)."""
    files = sorted(pdf_dir.glob("*.pdf"))[: n + 1]
    n = min(n, len(files) - 1)  # the whole corpus: its first N-1 papers, then the last added
    folder, cache = workdir / f"folder{n}", workdir / "cache"
    shutil.rmtree(workdir, ignore_errors=True)
    folder.mkdir(parents=True)
    for f in files[:n]:
        shutil.copy(f, folder / f"paper {f.stem}.pdf")
    cache.mkdir()  # the query encoder's ONNX export is per machine, not per folder: shared
    os.symlink(paths.cache_dir("onnx"), cache / "onnx")
    cold = _timed_ask(folder, cache, question)
    warm = _timed_ask(folder, cache, question)
    shutil.copy(files[n], folder / "added.pdf")
    added = _timed_ask(folder, cache, question)
    (folder / "added.pdf").unlink()
    removed = _timed_ask(folder, cache, question)
    return {
        "what": "wall seconds of `rag ask --pdfs DIR QUESTION` (a fresh process each time)",
        "papers": n, "question": question, "cold_s": cold, "warm_s": warm,
        "add_one_s": added, "remove_one_s": removed,
        "add_one_over_cold": round(added / cold, 4),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Measure and write ``outputs/bench/folder_titles.json`` (or, with ``--growth N``,
    ``outputs/bench/folder_growth.json``)."""
    ap = argparse.ArgumentParser(prog="python -m rag.bench.folder", description=__doc__)
    ap.add_argument(
        "--growth",
        type=int,
        default=0,
        metavar="N",
        help="time rag ask --pdfs on N corpus PDFs: cold, warm, add one, remove one",
    )
    ap.add_argument("--workdir", type=Path, default=None, help="(--growth) scratch folder")
    ap.add_argument(
        "--manifest-match",
        action="store_true",
        help="the manifest written from the PDFs (rag.index.folder_manifest) vs the pinned one",
    )
    ap.add_argument(
        "--resume",
        type=int,
        default=0,
        metavar="N",
        help="kill a cold build of N corpus PDFs mid-embedding, resume, compare",
    )
    ap.add_argument(
        "--citations",
        action="store_true",
        help="title resolution with ids hidden: manifest titles vs titles from PDFs",
    )
    args, pdf_dir = parse_pdf_args(ap, argv, "folder_titles.json")
    if args.growth:
        work = args.workdir or Path(tempfile.mkdtemp(prefix="folder-growth-"))
        q = "How does the model handle out-of-vocabulary words?"
        result = growth(pdf_dir, args.growth, work, q)
        out = args.out.with_name("folder_growth.json")
        out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(json.dumps(result, indent=1))
        return 0
    if args.manifest_match:
        work = args.workdir or Path(tempfile.mkdtemp(prefix="folder-manifest-"))
        result = manifest_match(args.manifest, pdf_dir, work)
        out = args.out.with_name("folder_manifest.json")
        out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(json.dumps({k: v for k, v in result.items() if k != "left_out"}, indent=1))
        return 0
    if args.resume:
        work = args.workdir or Path(tempfile.mkdtemp(prefix="folder-resume-"))
        result = resume(pdf_dir, args.resume, work)
        out = args.out.with_name("folder_resume.json")
        out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(json.dumps(result, indent=1))
        return 0
    if args.citations:
        result = citations(args.manifest, pdf_dir)
        out = args.out.with_name("folder_citations.json")
        out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(json.dumps(result, indent=1))
        return 0
    result = measure(args.manifest, pdf_dir)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for mode in ("layout", "layout+pdf_metadata"):
        r = result[mode]
        print(f"{mode}: {r['correct']}/{result['n']} = {r['accuracy']:.2f}, misses "
              f"{[m['arxiv_id'] for m in r['misses']]}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
